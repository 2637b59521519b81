//! The Roles page (SPEC §5): built-in and custom roles as Kubernetes ClusterRoles, read
//! and written as the signed-in admin through impersonation, so Kubernetes RBAC decides
//! (an admin without the right gets the API server's refusal).

use std::collections::BTreeMap;

use app::{AppError, Notice, Page, PageData, PageState, RoleRow, RolesView, paths};
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_domain::{BuiltinRole, RoleName};
use banlieue_store::UserRecord;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::AppState;
use crate::claims::{refusal, user_client};
use crate::form::Form;
use crate::middleware::{error_page, internal_error, signed_in};
use crate::pages::{self, Refusal};

/// The label naming a custom role's console name.
pub const ROLE_LABEL: &str = "console.banlieue.io/role";
/// The label of the chart's built-in roles.
const BUILTIN_LABEL: &str = "console.banlieue.io/builtin";
/// What a custom role may grant: the banlieue.io resources and verbs.
const RESOURCES: [&str; 3] = [
    "virtualmachinepools",
    "virtualmachineclaims",
    "virtualmachines",
];
const VERBS: [&str; 6] = ["get", "list", "watch", "create", "update", "delete"];

/// `GET /roles` (admins); `?edit=<name>` pre-fills the form with that custom role.
pub async fn roles_page(State(app): State<AppState>, request: Request) -> Response {
    let (state, user) = signed_in(&request);
    let editing = url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "edit")
        .map(|(_, name)| name.into_owned());
    let notice = url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
        .find_map(|(key, name)| {
            let name = RoleName::parse(&name).ok()?.as_str().to_owned();
            match key.as_ref() {
                "saved" => Some(Notice::RoleSaved { name }),
                "deleted" => Some(Notice::RoleDeleted { name }),
                _ => None,
            }
        });
    render(&app, state, &user, editing.as_deref(), notice, None).await
}

/// `POST /roles` with `name` and `grant.<resource>.<verb>` checkboxes: creates or replaces
/// the custom role (ClusterRole `console-role-<name>` labelled with its name, bound to the
/// group `console:<name>`), by server-side apply as the admin. The author of a new role
/// then holds it and so may grant it to others (audited `role.create`); changing an
/// existing role is audited `role.update` and grants nothing.
pub async fn save_role(State(app): State<AppState>, request: Request) -> Response {
    let (state, user) = signed_in(&request);
    let (_, actor) = crate::admin::context(&request);
    let source = crate::middleware::client_ip(request.extensions());
    let form = match Form::read(request.into_body()).await {
        Ok(form) => form,
        Err(error) => return render(&app, state, &user, None, None, Some((error, None))).await,
    };
    // What was typed and ticked, put back into the form when the save is refused.
    let typed: BTreeMap<String, String> = form.pairs().iter().cloned().collect();
    let refused = |error: AppError| Some((error, Some(typed.clone())));
    let name = RoleName::parse(form.get("name").trim())
        .ok()
        .filter(|name| BuiltinRole::parse(name.as_str()).is_none());
    let mut verbs_by_resource: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for resource in RESOURCES {
        for verb in VERBS {
            if form.get(&format!("grant.{resource}.{verb}")) == "on" {
                verbs_by_resource
                    .entry(resource)
                    .or_default()
                    .push(verb.to_owned());
            }
        }
    }
    // A new, non-built-in name and at least one permission.
    let Some(name) = name.filter(|_| !verbs_by_resource.is_empty()) else {
        return render(
            &app,
            state,
            &user,
            None,
            None,
            refused(AppError::InvalidRole),
        )
        .await;
    };
    let Some(client) = admin_client(&app, &user) else {
        return error_page(state.locale, &AppError::Forbidden);
    };
    let object = format!("console-role-{name}");
    let labels = BTreeMap::from([(ROLE_LABEL.to_owned(), name.as_str().to_owned())]);
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(object.clone()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(
            verbs_by_resource
                .into_iter()
                .map(|(resource, verbs)| PolicyRule {
                    api_groups: Some(vec!["banlieue.io".into()]),
                    resources: Some(vec![resource.to_owned()]),
                    verbs,
                    ..PolicyRule::default()
                })
                .collect(),
        ),
        ..ClusterRole::default()
    };
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(object.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: object.clone(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Group".into(),
            name: format!("console:{name}"),
            ..Subject::default()
        }]),
    };
    // Only the author of a new role adopts it; editing someone's role grants nothing.
    let existed = match Api::<ClusterRole>::all(client.clone())
        .get_opt(&object)
        .await
    {
        Ok(found) => found.is_some(),
        Err(error) => return render(&app, state, &user, None, None, refused(refusal(error))).await,
    };
    let apply = PatchParams::apply("banlieue-console").force();
    let applied = async {
        Api::<ClusterRole>::all(client.clone())
            .patch(&object, &apply, &Patch::Apply(&role))
            .await?;
        Api::<ClusterRoleBinding>::all(client)
            .patch(&object, &apply, &Patch::Apply(&binding))
            .await
    };
    match applied.await {
        Ok(_) if existed => {
            app.accounts
                .audit(
                    user.name.as_str(),
                    "role.update",
                    name.as_str(),
                    source,
                    "success",
                )
                .await;
            back("saved", name.as_str())
        }
        Ok(_) => match app.accounts.adopt_created_role(&actor, &name).await {
            // The author holds the role, so they may grant it (SPEC §5).
            Ok(_) => back("saved", name.as_str()),
            Err(error) => internal_error(state.locale, &anyhow::anyhow!(error)),
        },
        Err(error) => {
            let mut state = state;
            state.feedback = None;
            render(&app, state, &user, None, None, refused(refusal(error))).await
        }
    }
}

/// `POST /roles/{name}/delete`: deletes the custom role and its binding as the admin, then
/// takes the role from everyone who held it.
pub async fn delete_role(
    State(app): State<AppState>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let (state, user) = signed_in(&request);
    let (_, actor) = crate::admin::context(&request);
    let Ok(name) = RoleName::parse(&name) else {
        return error_page(state.locale, &AppError::NotFound);
    };
    let Some(client) = admin_client(&app, &user) else {
        return error_page(state.locale, &AppError::Forbidden);
    };
    let object = format!("console-role-{name}");
    let deleted = async {
        Api::<ClusterRoleBinding>::all(client.clone())
            .delete(&object, &DeleteParams::default())
            .await?;
        Api::<ClusterRole>::all(client)
            .delete(&object, &DeleteParams::default())
            .await
    };
    match deleted.await {
        Ok(_) => match app.accounts.forget_deleted_role(&actor, &name).await {
            Ok(_) => back("deleted", name.as_str()),
            Err(error) => internal_error(state.locale, &anyhow::anyhow!(error)),
        },
        Err(error) => render(&app, state, &user, None, None, Some((refusal(error), None))).await,
    }
}

fn back(key: &str, name: &str) -> Response {
    Redirect::to(&format!("{}?{key}={name}", paths::ROLES)).into_response()
}

/// An impersonating client for an admin; `None` for anyone else or without a cluster.
fn admin_client(app: &AppState, user: &UserRecord) -> Option<kube::Client> {
    user.roles
        .hold(BuiltinRole::Admin.as_str())
        .then(|| user_client(app, user))
        .flatten()
}

async fn render(
    app: &AppState,
    mut state: PageState,
    user: &UserRecord,
    editing: Option<&str>,
    notice: Option<Notice>,
    refused: Option<Refusal>,
) -> Response {
    let Some(client) = admin_client(app, user) else {
        let error = if app.kube.is_none() {
            AppError::NoClusterConfigured
        } else {
            AppError::Forbidden
        };
        return error_page(state.locale, &error);
    };
    state.page = Page::Roles;
    state.path = paths::ROLES.to_owned();
    state.notice = notice;
    let loaded = async {
        let roles = Api::<ClusterRole>::all(client);
        let builtin = roles
            .list(&ListParams::default().labels(BUILTIN_LABEL))
            .await?;
        let custom = roles
            .list(&ListParams::default().labels(ROLE_LABEL))
            .await?;
        Ok::<_, kube::Error>((builtin.items, custom.items))
    };
    let (builtin, custom) = match loaded.await {
        Ok(lists) => lists,
        Err(error) => {
            state.data = PageData::Roles(RolesView::default());
            return pages::with_feedback(app, state, refusal(error), Default::default()).await;
        }
    };
    let rows = |roles: Vec<ClusterRole>, name_of: fn(&ClusterRole) -> String| async move {
        let mut out = Vec::new();
        for role in roles {
            let name = name_of(&role);
            let holders = app.accounts.store().user_names_with_role(&name).await?;
            out.push(role_row(&role, name, holders));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        anyhow::Ok(out)
    };
    let builtin = rows(builtin, |r| {
        r.name_any().trim_start_matches("console-").to_owned()
    })
    .await;
    let custom = rows(custom, |r| {
        r.labels().get(ROLE_LABEL).cloned().unwrap_or_default()
    })
    .await;
    let (builtin, custom) = match (builtin, custom) {
        (Ok(b), Ok(c)) => (b, c),
        (Err(error), _) | (_, Err(error)) => return internal_error(state.locale, &error),
    };
    let editing = editing.and_then(|name| custom.iter().find(|r| r.name == name).cloned());
    state.data = PageData::Roles(RolesView {
        builtin,
        custom,
        resources: RESOURCES.map(str::to_owned).to_vec(),
        verbs: VERBS.map(str::to_owned).to_vec(),
        editing,
    });
    match refused {
        Some((error, typed)) => {
            pages::with_feedback(app, state, error, typed.unwrap_or_default()).await
        }
        None => pages::render(app, state, StatusCode::OK).await,
    }
}

fn role_row(role: &ClusterRole, name: String, holders: Vec<String>) -> RoleRow {
    let rules = role.rules.clone().unwrap_or_default();
    let mut grants = Vec::new();
    let readable = rules
        .iter()
        .map(|rule| {
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            if groups.iter().any(|g| g == "banlieue.io") {
                for resource in &resources {
                    for verb in &rule.verbs {
                        grants.push((resource.clone(), verb.clone()));
                    }
                }
            }
            let group = groups
                .iter()
                .map(|g| if g.is_empty() { "core" } else { g.as_str() })
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "{} — {} ({group})",
                rule.verbs.join(", "),
                resources.join(", ")
            )
        })
        .collect();
    RoleRow {
        name,
        rules: readable,
        grants,
        holders,
    }
}
