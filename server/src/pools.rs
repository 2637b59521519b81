//! The Pools page (operators, SPEC §5): VirtualMachinePools listed, created, changed and
//! deleted as the signed-in person through impersonation, so Kubernetes RBAC decides.

use app::{AppError, Notice, Page, PageData, PageState, PoolForm, PoolsView, paths};
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_domain::object_names::{is_dns_label, is_dns_subdomain};
use banlieue_store::UserRecord;
use cluster::crd::{
    VirtualMachinePool, VirtualMachinePoolSpec, VirtualMachineTemplate, is_memory_quantity,
};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::AppState;
use crate::claims::{audit_success, refusal, user_client};
use crate::form::Form;
use crate::middleware::{error_page, signed_in};
use crate::pages::{self, Refusal};

/// `GET /pools`; `?edit=<namespace>/<name>` fills the form with that pool;
/// `?saved=` / `?deleted=` show their notice.
pub async fn pools_page(State(app): State<AppState>, request: Request) -> Response {
    let (state, user) = signed_in(&request);
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let value = |key: &str| query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let notice = value("saved")
        .filter(|n| is_dns_subdomain(n))
        .map(|name| Notice::PoolSaved { name })
        .or_else(|| {
            value("deleted")
                .filter(|n| is_dns_subdomain(n))
                .map(|name| Notice::PoolDeleted { name })
        });
    render(&app, state, &user, value("edit").as_deref(), notice, None).await
}

/// `POST /pools`: creates or changes a pool (server-side apply as the person).
pub async fn save_pool(State(app): State<AppState>, request: Request) -> Response {
    let (state, user) = signed_in(&request);
    let source = crate::middleware::client_ip(request.extensions());
    let form = match Form::read(request.into_body()).await {
        Ok(form) => form,
        Err(error) => return render(&app, state, &user, None, None, Some((error, None))).await,
    };
    let typed: std::collections::BTreeMap<String, String> = form
        .pairs()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let Some(pool) = parse_pool(&form) else {
        return render(
            &app,
            state,
            &user,
            None,
            None,
            Some((AppError::InvalidPool, Some(typed))),
        )
        .await;
    };
    let Some(client) = user_client(&app, &user) else {
        return error_page(state.locale, &AppError::NoClusterConfigured);
    };
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let applied = Api::<VirtualMachinePool>::namespaced(client, &namespace)
        .patch(
            &name,
            &PatchParams::apply("banlieue-console").force(),
            &Patch::Apply(&pool),
        )
        .await;
    match applied {
        Ok(_) => {
            audit_success(&app, &user, "pool.save", &namespace, &name, source).await;
            Redirect::to(&format!("{}?saved={name}", paths::POOLS)).into_response()
        }
        Err(error) => {
            render(
                &app,
                state,
                &user,
                None,
                None,
                Some((refusal(error), Some(typed))),
            )
            .await
        }
    }
}

/// `POST /pools/{namespace}/{name}/delete`. Claimed members survive: the pool controller
/// re-parents them to their claims (SPEC §6).
pub async fn delete_pool(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    request: Request,
) -> Response {
    let (state, user) = signed_in(&request);
    let source = crate::middleware::client_ip(request.extensions());
    if !crate::claims::is_object_path(&namespace, &name) {
        return error_page(state.locale, &AppError::NotFound);
    }
    let Some(client) = user_client(&app, &user) else {
        return error_page(state.locale, &AppError::NoClusterConfigured);
    };
    let deleted = Api::<VirtualMachinePool>::namespaced(client, &namespace)
        .delete(&name, &DeleteParams::default())
        .await;
    match deleted {
        Ok(_) => {
            audit_success(&app, &user, "pool.delete", &namespace, &name, source).await;
            Redirect::to(&format!("{}?deleted={name}", paths::POOLS)).into_response()
        }
        Err(error) => render(&app, state, &user, None, None, Some((refusal(error), None))).await,
    }
}

async fn render(
    app: &AppState,
    mut state: PageState,
    user: &UserRecord,
    editing: Option<&str>,
    notice: Option<Notice>,
    refused: Option<Refusal>,
) -> Response {
    let Some(client) = user_client(app, user) else {
        return error_page(state.locale, &AppError::NoClusterConfigured);
    };
    state.page = Page::Pools;
    state.path = paths::POOLS.to_owned();
    state.notice = notice;
    let listed = Api::<VirtualMachinePool>::all(client.clone())
        .list(&ListParams::default())
        .await;
    let pools: Vec<PoolForm> = match listed {
        Ok(list) => list.items.iter().map(pool_form).collect(),
        Err(error) => {
            state.data = PageData::Pools(PoolsView::default());
            return pages::with_feedback(app, state, refusal(error), Default::default()).await;
        }
    };
    let form = editing
        .and_then(|key| key.split_once('/'))
        .and_then(|(ns, name)| pools.iter().find(|p| p.namespace == ns && p.name == name))
        .cloned()
        .unwrap_or_else(new_pool_defaults);
    // The form and Edit / Delete only for people Kubernetes lets create pools; in doubt,
    // none (Kubernetes decides a post anyway).
    let can_manage = crate::claims::may(&client, "virtualmachinepools", "create", None)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot ask Kubernetes whether the person may create pools");
            false
        });
    state.data = PageData::Pools(PoolsView {
        pools,
        form,
        can_manage,
    });
    match refused {
        Some((error, typed)) => {
            pages::with_feedback(app, state, error, typed.unwrap_or_default()).await
        }
        None => pages::render(app, state, StatusCode::OK).await,
    }
}

fn new_pool_defaults() -> PoolForm {
    PoolForm {
        warm_replicas: 3,
        max_replicas: 10,
        cpu: 2,
        memory: "4Gi".into(),
        provider: "simulated".into(),
        ..PoolForm::default()
    }
}

fn pool_form(pool: &VirtualMachinePool) -> PoolForm {
    let status = pool.status.clone().unwrap_or_default();
    PoolForm {
        namespace: pool.namespace().unwrap_or_default(),
        name: pool.name_any(),
        warm_replicas: pool.spec.warm_replicas,
        max_replicas: pool.spec.max_replicas,
        image_revision: pool.spec.image_revision.clone(),
        cpu: pool.spec.template.cpu,
        memory: pool.spec.template.memory.clone(),
        image: pool.spec.template.image.clone(),
        provider: pool.spec.provider_ref.clone(),
        ready: status.ready_replicas,
        claimed: status.claimed_replicas,
        total: status.replicas,
    }
}

/// The pool a form describes, or `None` when a field is missing or out of range (the
/// bounds of the pool CRD's schema: sizes, a memory quantity, an RFC 1123 provider name).
fn parse_pool(form: &Form) -> Option<VirtualMachinePool> {
    let text = |name: &str| Some(form.get(name).trim().to_owned()).filter(|v| !v.is_empty());
    let number = |name: &str| form.get(name).trim().parse::<u32>().ok();
    let namespace = text("namespace").filter(|n| is_dns_label(n))?;
    let name = text("name").filter(|n| is_dns_subdomain(n))?;
    let (warm, max, cpu) = (
        number("warm_replicas")?,
        number("max_replicas")?,
        number("cpu")?,
    );
    // The CRD's bounds (crates/cluster/src/crd.rs), so the person reads our message.
    if max == 0 || warm > max || max > 10_000 || !(1..=1_024).contains(&cpu) {
        return None;
    }
    let bounded = |name: &str, max_len: usize| text(name).filter(|v| v.len() <= max_len);
    let memory = text("memory").filter(|m| is_memory_quantity(m))?;
    let provider = text("provider").filter(|p| is_dns_label(p))?;
    Some(VirtualMachinePool {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        spec: VirtualMachinePoolSpec {
            warm_replicas: warm,
            max_replicas: max,
            image_revision: bounded("image_revision", 128)?,
            template: VirtualMachineTemplate {
                cpu,
                memory,
                image: bounded("image", 512)?,
            },
            provider_ref: provider,
            progress_deadline_seconds: None,
        },
        status: None,
    })
}
