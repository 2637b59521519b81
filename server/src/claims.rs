//! The dashboard's cluster side (SPEC §6): pools and the person's own claims, claiming
//! and releasing, and the live snapshots — every call made as the signed-in person
//! ([`KubeAccess::as_user`]), so Kubernetes RBAC and the claim admission policy decide.

use std::convert::Infallible;
use std::sync::Arc;

use app::{
    AppError, ClaimRow, ClaimView, DashboardView, Notice, Page, PageData, PageState, PoolRow, paths,
};
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_domain::BuiltinRole;
use banlieue_domain::object_names::{is_dns_label, is_dns_subdomain};
use banlieue_identity::SessionGrant;
use banlieue_store::UserRecord;
use cluster::crd::{
    ClaimSubject, VirtualMachineClaim, VirtualMachineClaimSpec, VirtualMachinePool,
};
use futures::{Stream, StreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use time::OffsetDateTime;

use crate::AppState;
use crate::form::Form;
use crate::middleware::{error_page, internal_error, signed_in};
use crate::pages;
use crate::session::AUTH_KEY;

/// `GET /`: the dashboard; `?claimed=<name>` / `?released=<name>` (where a claim or
/// release redirects, so a reload never posts again) show their notice.
pub async fn dashboard_page(State(app): State<AppState>, request: Request) -> Response {
    let notice = url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
        .find_map(|(key, name)| {
            let name = name.into_owned();
            let is_name = is_dns_subdomain(&name);
            match key.as_ref() {
                "claimed" if is_name => Some(Notice::ClaimCreated { name }),
                "released" if is_name => Some(Notice::ReleaseRequested { name }),
                _ => None,
            }
        });
    let (state, user) = signed_in(&request);
    render(&app, state, &user, notice, None).await
}

/// Back to the dashboard with a notice (303, RFC 9110 §15.4.4): post/redirect/get.
fn to_dashboard(key: &str, name: &str) -> Response {
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair(key, name)
        .finish();
    Redirect::to(&format!("{}?{query}", paths::DASHBOARD)).into_response()
}

/// `POST /claims` with `namespace`, `pool`, `ttl_seconds`: creates a VirtualMachineClaim
/// as the person, for themselves (`spec.subject` = this console's issuer and their name,
/// which the admission policy checks against the caller).
pub async fn create_claim(State(app): State<AppState>, request: Request) -> Response {
    let (state, user) = signed_in(&request);
    let source = crate::middleware::client_ip(request.extensions());
    let form = match Form::read(request.into_body()).await {
        Ok(form) => form,
        Err(error) => return render(&app, state, &user, None, Some(error)).await,
    };
    let ttl = form.get("ttl_seconds").parse::<u32>().ok();
    let (namespace, pool) = (form.get("namespace"), form.get("pool"));
    let (Some(ttl), true) = (
        ttl.filter(|t| app.config.claim_ttl_choices.contains(t)),
        is_object_path(namespace, pool),
    ) else {
        return render(&app, state, &user, None, Some(AppError::InvalidClaim)).await;
    };
    let Some(client) = user_client(&app, &user) else {
        return render(
            &app,
            state,
            &user,
            None,
            Some(AppError::NoClusterConfigured),
        )
        .await;
    };
    let claim = VirtualMachineClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", user.name)),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: VirtualMachineClaimSpec {
            pool_ref: pool.to_owned(),
            ttl_seconds: ttl,
            subject: ClaimSubject {
                issuer: app.config.external_url.clone(),
                id: user.name.to_string(),
            },
        },
        status: None,
    };
    // Only a pool the person can see: a claim for a pool that does not exist would wait
    // forever.
    match Api::<VirtualMachinePool>::namespaced(client.clone(), namespace)
        .get_opt(pool)
        .await
    {
        Ok(Some(_)) => {}
        Ok(None) => {
            return render(&app, state, &user, None, Some(AppError::InvalidClaim)).await;
        }
        Err(error) => return render(&app, state, &user, None, Some(refusal(error))).await,
    }
    let created = Api::<VirtualMachineClaim>::namespaced(client, namespace)
        .create(&PostParams::default(), &claim)
        .await;
    match created {
        Ok(created) => {
            let name = created.name_any();
            audit_success(&app, &user, "claim.create", namespace, &name, source).await;
            to_dashboard("claimed", &name)
        }
        Err(error) => render(&app, state, &user, None, Some(refusal(error))).await,
    }
}

/// `POST /claims/{namespace}/{name}/release`: deletes the claim as the person; the claim
/// controller deletes its VM first (SPEC §6 release ordering).
pub async fn release_claim(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    request: Request,
) -> Response {
    let (state, user) = signed_in(&request);
    let source = crate::middleware::client_ip(request.extensions());
    if !is_object_path(&namespace, &name) {
        return error_page(state.locale, &AppError::NotFound);
    }
    let Some(client) = user_client(&app, &user) else {
        return render(
            &app,
            state,
            &user,
            None,
            Some(AppError::NoClusterConfigured),
        )
        .await;
    };
    let deleted = Api::<VirtualMachineClaim>::namespaced(client, &namespace)
        .delete(&name, &DeleteParams::default())
        .await;
    match deleted {
        Ok(_) => {
            audit_success(&app, &user, "claim.release", &namespace, &name, source).await;
            to_dashboard("released", &name)
        }
        Err(error) => render(&app, state, &user, None, Some(refusal(error))).await,
    }
}

/// `GET /events/dashboard`: server-sent events, each a JSON [`DashboardView`] sent when
/// the person's pools or claims change (a watch as the person), so an open page updates
/// without reloading.
pub async fn dashboard_events(State(app): State<AppState>, request: Request) -> Response {
    let (_, user) = signed_in(&request);
    let Some(client) = user_client(&app, &user) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let Some(viewer) = Viewer::of(&request).await else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let claims = changes(Api::<VirtualMachineClaim>::all(client.clone()), None);
    let pools = changes(Api::<VirtualMachinePool>::all(client), None);
    let stream = live_snapshots(
        app.clone(),
        viewer,
        futures::stream::select(claims, pools),
        move |user| {
            let app = app.clone();
            async move { dashboard_view(&app, &user).await.ok() }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `GET /claims/{namespace}/{name}`: one claim's page, read as the person; 404 with the
/// page saying so when it does not exist (released, expired, or never made).
pub async fn claim_page(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    request: Request,
) -> Response {
    let (mut state, user) = signed_in(&request);
    if !is_object_path(&namespace, &name) {
        // Not a name any claim could have: nothing to say about it.
        state.page = Page::NotFound;
        return pages::render(&app, state, StatusCode::NOT_FOUND).await;
    }
    match claim_view(&app, &user, &namespace, &name).await {
        Ok(Some(view)) => {
            state.data = PageData::Claim(view);
            pages::render(&app, state, StatusCode::OK).await
        }
        Ok(None) => {
            state.data = PageData::Claim(ClaimView::gone(&namespace, &name));
            pages::render(&app, state, StatusCode::NOT_FOUND).await
        }
        Err(Loading::Refused(error)) => {
            pages::with_feedback(&app, state, error, Default::default()).await
        }
        Err(Loading::Failed(failure)) => internal_error(state.locale, &failure),
    }
}

/// `GET /events/claims/{namespace}/{name}`: server-sent events, each a JSON [`ClaimView`]
/// sent when the claim changes (a watch as the person on that one name); once the claim
/// is deleted the view says it is gone.
pub async fn claim_events(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    request: Request,
) -> Response {
    let (state, user) = signed_in(&request);
    if !is_object_path(&namespace, &name) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let Some(client) = user_client(&app, &user) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let Some(viewer) = Viewer::of(&request).await else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let api = Api::<VirtualMachineClaim>::namespaced(client, &namespace);
    // Kubernetes' answer to reading it decides, before any stream is opened.
    match api.get_opt(&name).await {
        Ok(Some(_)) => {}
        Ok(None) => return StatusCode::NOT_FOUND.into_response(),
        Err(kube::Error::Api(status)) => {
            return StatusCode::from_u16(status.code)
                .unwrap_or(StatusCode::FORBIDDEN)
                .into_response();
        }
        Err(error) => return internal_error(state.locale, &anyhow::anyhow!(error)),
    }
    let selector = format!("metadata.name={name}");
    let stream = live_snapshots(
        app.clone(),
        viewer,
        changes(api, Some(&selector)),
        move |user| {
            let (app, namespace, name) = (app.clone(), namespace.clone(), name.clone());
            async move {
                match claim_view(&app, &user, &namespace, &name).await {
                    Ok(Some(view)) => Some(view),
                    Ok(None) => Some(ClaimView::gone(&namespace, &name)),
                    Err(_) => None,
                }
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Whether `namespace/name` from a URL may name a claim or pool ([`is_dns_label`],
/// [`is_dns_subdomain`]); anything else is 404 before Kubernetes is asked.
pub(crate) fn is_object_path(namespace: &str, name: &str) -> bool {
    is_dns_label(namespace) && is_dns_subdomain(name)
}

/// The person a live stream serves, re-checked before every snapshot (and at least every
/// [`RECHECK`]), so a stream ends with its session — sign-out, "sign out everywhere", a
/// disabled account, a password reset — and follows role changes.
struct Viewer {
    grant: SessionGrant,
    source: std::net::IpAddr,
}

/// How often an idle live stream re-checks its session.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(15);

impl Viewer {
    /// The viewer of `request`'s session (`None` without one). Not `async` over the
    /// request itself, which is not `Sync`: the session and address are taken first.
    fn of(request: &Request) -> impl Future<Output = Option<Self>> + Send + use<> {
        let session = request
            .extensions()
            .get::<tower_sessions::Session>()
            .cloned();
        let source = crate::middleware::client_ip(request.extensions());
        async move {
            let grant = session?.get::<SessionGrant>(AUTH_KEY).await.ok()??;
            Some(Self { grant, source })
        }
    }

    /// The person as they are now, or `None` when their session has ended or they must
    /// change their password first.
    async fn current(&self, app: &AppState) -> Option<UserRecord> {
        let user = app
            .accounts
            .check_session(&self.grant, self.source)
            .await
            .ok()??;
        (!user.must_change_password).then_some(user)
    }
}

/// A tick for each batch of watch events on `api` (with an optional field selector),
/// restarting the watch with back-off after errors — except a refusal: a person
/// Kubernetes does not let list or watch `K` gets no ticks from it (rather than a retry a
/// second, forever).
fn changes<K>(api: Api<K>, fields: Option<&str>) -> impl Stream<Item = ()> + Send + use<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let mut config = watcher::Config::default();
    if let Some(fields) = fields {
        config = config.fields(fields);
    }
    watcher(api, config)
        .default_backoff()
        .take_while(|event| {
            let refused = matches!(
                event,
                Err(watcher::Error::InitialListFailed(kube::Error::Api(status))
                    | watcher::Error::WatchStartFailed(kube::Error::Api(status)))
                    if status.code == 403
            );
            std::future::ready(!refused)
        })
        .map(|_| ())
}

/// Server-sent events carrying `load(user)`'s JSON after each batch of `changes` (and at
/// least every [`RECHECK`]), skipping a snapshot equal to the last one sent and any `load`
/// that failed. Before each load the viewer's session is checked: the stream ends when it
/// has ended, and when the console shuts down.
fn live_snapshots<T, Fut>(
    app: AppState,
    viewer: Viewer,
    changes: impl Stream<Item = ()> + Send,
    load: impl Fn(UserRecord) -> Fut + Send + Sync + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> + Send
where
    T: serde::Serialize + PartialEq + Clone + Send,
    Fut: Future<Output = Option<T>> + Send,
{
    let ticks = futures::stream::unfold((), |()| async {
        tokio::time::sleep(RECHECK).await;
        Some(((), ()))
    });
    let stopping = app.stopping.clone().cancelled_owned();
    let (viewer, load) = (Arc::new(viewer), Arc::new(load));
    futures::stream::select(changes, ticks)
        .ready_chunks(256)
        .then(move |_| {
            let (app, viewer, load) = (app.clone(), viewer.clone(), load.clone());
            async move {
                let user = viewer.current(&app).await?;
                Some(load(user).await)
            }
        })
        .take_while(|checked| std::future::ready(checked.is_some()))
        .filter_map(|checked| std::future::ready(checked.flatten()))
        .scan(None::<T>, |last, snapshot: T| {
            let fresh = (last.as_ref() != Some(&snapshot)).then_some(snapshot);
            if let Some(snapshot) = &fresh {
                *last = Some(snapshot.clone());
            }
            std::future::ready(Some(fresh))
        })
        .filter_map(|fresh| async move {
            let json = serde_json::to_string(&fresh?).ok()?;
            Some(Ok(Event::default().data(json)))
        })
        .take_until(stopping)
}

async fn render(
    app: &AppState,
    mut state: PageState,
    user: &UserRecord,
    notice: Option<Notice>,
    error: Option<AppError>,
) -> Response {
    state.page = Page::Dashboard;
    state.path = paths::DASHBOARD.to_owned();
    state.notice = notice;
    let view = match dashboard_view(app, user).await {
        Ok(view) => view,
        Err(Loading::Refused(refused)) => {
            let error = error.unwrap_or(refused);
            state.data = PageData::Dashboard(DashboardView::default());
            return pages::with_feedback(app, state, error, Default::default()).await;
        }
        Err(Loading::Failed(failure)) => return internal_error(state.locale, &failure),
    };
    state.data = PageData::Dashboard(view);
    match error {
        Some(error) => pages::with_feedback(app, state, error, Default::default()).await,
        None => pages::render(app, state, StatusCode::OK).await,
    }
}

enum Loading {
    /// Kubernetes said no (shown to the person).
    Refused(AppError),
    Failed(anyhow::Error),
}

/// The pools the person may list and their own claims, read as them.
async fn dashboard_view(app: &AppState, user: &UserRecord) -> Result<DashboardView, Loading> {
    let Some(client) = user_client(app, user) else {
        return Ok(DashboardView::default());
    };
    let pools = visible(
        Api::<VirtualMachinePool>::all(client.clone())
            .list(&ListParams::default())
            .await,
    )?;
    let claims = visible(
        Api::<VirtualMachineClaim>::all(client.clone())
            .list(&ListParams::default())
            .await,
    )?;
    let mut claim_rights = std::collections::HashMap::new();
    let mut pool_rows = Vec::with_capacity(pools.len());
    for pool in pools {
        let namespace = pool.namespace().unwrap_or_default();
        let can_claim = match claim_rights.get(&namespace) {
            Some(allowed) => *allowed,
            None => {
                let allowed = may_create_claims(&client, &namespace)
                    .await
                    .map_err(Loading::Failed)?;
                claim_rights.insert(namespace.clone(), allowed);
                allowed
            }
        };
        let status = pool.status.clone().unwrap_or_default();
        pool_rows.push(PoolRow {
            name: pool.name_any(),
            namespace,
            ready: status.ready_replicas,
            claimed: status.claimed_replicas,
            max: pool.spec.max_replicas,
            can_claim,
        });
    }
    let now = OffsetDateTime::now_utc();
    let overseer = oversees_claims(user);
    let mut release_rights = std::collections::HashMap::new();
    let mut claim_rows = Vec::new();
    let mut all_claims = Vec::new();
    for claim in &claims {
        let mine = is_own(app, user, claim);
        if !mine && !overseer {
            continue;
        }
        let namespace = claim.namespace().unwrap_or_default();
        let may_delete = match release_rights.get(&namespace) {
            Some(allowed) => *allowed,
            None => {
                let allowed = may(&client, "virtualmachineclaims", "delete", Some(&namespace))
                    .await
                    .map_err(Loading::Failed)?;
                release_rights.insert(namespace, allowed);
                allowed
            }
        };
        let row = claim_row(claim, now, may_delete);
        if mine {
            claim_rows.push(row.clone());
        }
        if overseer {
            all_claims.push(row);
        }
    }
    let by_place =
        |a: &ClaimRow, b: &ClaimRow| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name));
    claim_rows.sort_by(by_place);
    all_claims.sort_by(by_place);
    Ok(DashboardView {
        cluster: true,
        pools: pool_rows,
        claims: claim_rows,
        all_claims,
        ttl_choices: app.config.claim_ttl_choices.clone(),
    })
}

/// Whether `claim` is the person's own: its subject is them at this console's issuer.
fn is_own(app: &AppState, user: &UserRecord, claim: &VirtualMachineClaim) -> bool {
    claim.spec.subject.id == user.name.as_str()
        && claim.spec.subject.issuer == app.config.external_url
}

/// Operators and admins see and release everyone's claims (SPEC §6).
fn oversees_claims(user: &UserRecord) -> bool {
    user.roles.hold(BuiltinRole::Operator.as_str())
}

/// `claim` as a row; `may_delete` is the person's RBAC answer for deleting claims in its
/// namespace.
fn claim_row(claim: &VirtualMachineClaim, now: OffsetDateTime, may_delete: bool) -> ClaimRow {
    let status = claim.status.clone().unwrap_or_default();
    let expires = status.expires_at.as_ref().and_then(instant);
    ClaimRow {
        namespace: claim.namespace().unwrap_or_default(),
        name: claim.name_any(),
        subject: claim.spec.subject.id.clone(),
        pool: claim.spec.pool_ref.clone(),
        phase: status.phase.unwrap_or_default(),
        reason: status.reason.unwrap_or_default(),
        message: status.message.unwrap_or_default(),
        expires_at: expires.map(crate::admin::format_instant),
        remaining_secs: expires.map(|at| (at - now).whole_seconds().max(0)),
        addresses: status.addresses.iter().map(|a| a.address.clone()).collect(),
        can_release: may_delete && claim.metadata.deletion_timestamp.is_none(),
    }
}

/// A Kubernetes timestamp (second precision) as an instant.
fn instant(at: &Time) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(at.0.as_second()).ok()
}

/// One claim as its page shows it, read as the person; `None` when it does not exist.
async fn claim_view(
    app: &AppState,
    user: &UserRecord,
    namespace: &str,
    name: &str,
) -> Result<Option<ClaimView>, Loading> {
    let Some(client) = user_client(app, user) else {
        return Ok(None);
    };
    let found = Api::<VirtualMachineClaim>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await;
    let Some(claim) = found? else {
        return Ok(None);
    };
    let may_delete = (is_own(app, user, &claim) || oversees_claims(user))
        && may(&client, "virtualmachineclaims", "delete", Some(namespace))
            .await
            .map_err(Loading::Failed)?;
    let status = claim.status.clone().unwrap_or_default();
    let when = |at: Option<&Time>| at.and_then(instant).map(crate::admin::format_instant);
    Ok(Some(ClaimView {
        claim: claim_row(&claim, OffsetDateTime::now_utc(), may_delete),
        issuer: claim.spec.subject.issuer.clone(),
        ttl_seconds: claim.spec.ttl_seconds,
        created_at: when(claim.metadata.creation_timestamp.as_ref()),
        bound_at: when(status.bound_at.as_ref()),
        virtual_machine: status.virtual_machine_ref,
        gone: false,
    }))
}

/// Records that `user` did `action` to the object `namespace/name`.
pub(crate) async fn audit_success(
    app: &AppState,
    user: &UserRecord,
    action: &str,
    namespace: &str,
    name: &str,
    source: std::net::IpAddr,
) {
    let target = format!("{namespace}/{name}");
    app.accounts
        .audit(user.name.as_str(), action, &target, source, "success")
        .await;
}

/// SelfSubjectAccessReview: may the person create claims in `namespace`?
async fn may_create_claims(client: &kube::Client, namespace: &str) -> anyhow::Result<bool> {
    may(client, "virtualmachineclaims", "create", Some(namespace)).await
}

/// SelfSubjectAccessReview (authorization.k8s.io/v1) for `verb` on `resource` of
/// `banlieue.io`, in `namespace` or in every namespace (`None`).
pub(crate) async fn may(
    client: &kube::Client,
    resource: &str,
    verb: &str,
    namespace: Option<&str>,
) -> anyhow::Result<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some("banlieue.io".into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                namespace: namespace.map(Into::into),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// A list the person may not read at all is an empty list, not an error.
fn visible<K: Clone>(listed: kube::Result<kube::core::ObjectList<K>>) -> Result<Vec<K>, Loading> {
    match listed {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(Vec::new()),
        Err(error) => Err(Loading::from(error)),
    }
}

impl From<kube::Error> for Loading {
    fn from(error: kube::Error) -> Self {
        match refusal(error) {
            AppError::Internal { correlation_id } => Self::Failed(anyhow::anyhow!(
                "Kubernetes request failed (correlation id {correlation_id})"
            )),
            refused => Self::Refused(refused),
        }
    }
}

/// Kubernetes' answer, translated: an API refusal keeps the API server's message.
pub(crate) fn refusal(error: kube::Error) -> AppError {
    match error {
        kube::Error::Api(status) => AppError::Kubernetes {
            code: status.code,
            message: status.message.clone(),
        },
        other => {
            let correlation_id = crate::middleware::correlation_id();
            tracing::error!(%correlation_id, error = %other, "Kubernetes request failed");
            AppError::Internal { correlation_id }
        }
    }
}

pub(crate) fn user_client(app: &AppState, user: &UserRecord) -> Option<kube::Client> {
    let access = app.kube.as_ref()?;
    match access.as_user(user) {
        Ok(client) => Some(client),
        Err(error) => {
            tracing::error!(%error, "cannot build an impersonating client");
            None
        }
    }
}
