//! The dashboard's and claim pages' HTTP side (SPEC §6): each handler takes the request
//! apart, makes one use-case call ([`services::Console`]) and maps the answer; the live
//! snapshots are framed as server-sent events here.

use std::convert::Infallible;

use app::{AppError, ClaimView, DashboardView, Notice, Page, PageData, PageState, paths};
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_domain::object_names::is_dns_subdomain;
use banlieue_identity::SessionGrant;
use futures::{Stream, StreamExt};
use services::live::Viewer;
use services::{CreateClaim, Principal, ServiceError};
use tower_sessions::Session;

use crate::AppState;
use crate::form::Form;
use crate::middleware::{cookie_value, error_page, remembering_cookie};
use crate::pages;
use crate::session::AUTH_KEY;
use crate::use_cases::{PageContext, PageSession, Who, app_error};

/// The cookie remembering the lifetime this browser claimed with last, which the claim
/// forms start with.
pub const CLAIM_TTL_COOKIE: &str = "banlieue-claim-ttl";

/// `GET /`: the dashboard; `?claimed=<name>` / `?released=<name>` (where a claim or
/// release redirects, so a reload never posts again) show their notice.
pub async fn dashboard_page(
    State(app): State<AppState>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let notice = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()).find_map(
        |(key, name)| {
            let name = name.into_owned();
            let is_name = is_dns_subdomain(&name);
            match key.as_ref() {
                "claimed" if is_name => Some(Notice::ClaimCreated {
                    name,
                    waiting: true,
                }),
                "released" if is_name => Some(Notice::ReleaseRequested { name }),
                _ => None,
            }
        },
    );
    let refused = pages::take_feedback(session.as_ref(), &state.path).await;
    // A refused claim's form keeps the lifetime it asked for; else the last one claimed.
    let ttl = refused
        .as_ref()
        .and_then(|refused| refused.values.get("ttl_seconds").cloned())
        .or_else(|| cookie_value(&headers, CLAIM_TTL_COOKIE))
        .and_then(|secs| secs.parse().ok());
    render(&app, state, &who, notice, refused.map(|r| r.error), ttl).await
}

/// Back to the dashboard with a notice (303, RFC 9110 §15.4.4): post/redirect/get.
fn to_dashboard(key: &str, name: &str) -> Response {
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair(key, name)
        .finish();
    Redirect::to(&format!("{}?{query}", paths::DASHBOARD)).into_response()
}

/// Post/redirect/get for a refused claim or release: back to the dashboard, which shows
/// the refusal once.
async fn refused(
    session: Option<&Session>,
    state: &PageState,
    error: AppError,
    ttl_seconds: Option<u32>,
) -> Response {
    let typed = ttl_seconds
        .map(|secs| pages::typed(&[("ttl_seconds", &secs.to_string())]))
        .unwrap_or_default();
    pages::refused(session, state.look(), paths::DASHBOARD, error, typed).await
}

/// `POST /claims` with `namespace`, `pool`, `ttl_seconds`: claims a sandbox for the
/// person ([`services::Console::create_claim`]).
pub async fn create_claim(
    State(app): State<AppState>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
    body: Body,
) -> Response {
    let form = match Form::read(body).await {
        Ok(form) => form,
        Err(error) => return refused(session.as_ref(), &state, error, None).await,
    };
    let ttl_seconds = form.get("ttl_seconds").parse().ok();
    let command = CreateClaim {
        namespace: form.get("namespace").to_owned(),
        pool: form.get("pool").to_owned(),
        ttl_seconds,
        subject: None,
    };
    match app.console.create_claim(&who, command).await {
        Ok(name) => {
            let mut response = to_dashboard("claimed", &name);
            // The next claim starts with the same lifetime, even after a reload.
            if let Some(secs) = ttl_seconds
                && let Some(cookie) =
                    remembering_cookie(CLAIM_TTL_COOKIE, &secs.to_string(), app.config.https)
            {
                response.headers_mut().append(header::SET_COOKIE, cookie);
            }
            response
        }
        Err(error) => {
            let error = app_error(error, AppError::InvalidClaim);
            refused(session.as_ref(), &state, error, ttl_seconds).await
        }
    }
}

/// `POST /claims/{namespace}/{name}/release`: releases the claim as the person.
pub async fn release_claim(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
) -> Response {
    match app.console.release_claim(&who, &namespace, &name).await {
        Ok(()) => to_dashboard("released", &name),
        Err(
            error @ ServiceError::NotFound {
                by: services::Decider::Console,
                ..
            },
        ) => error_page(state.look(), &app_error(error, AppError::NotFound)),
        Err(error) => {
            let error = app_error(error, AppError::NotFound);
            refused(session.as_ref(), &state, error, None).await
        }
    }
}

/// `GET /claims/{namespace}/{name}`: one claim's page; 404 with the page saying so when
/// it does not exist (released, expired, or never made).
pub async fn claim_page(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Who(who): Who,
    PageContext(mut state): PageContext,
) -> Response {
    match app.console.claim(&who, &namespace, &name).await {
        Ok(Some(view)) => {
            state.data = PageData::Claim(view);
            pages::render(&app, state, StatusCode::OK).await
        }
        Ok(None) => {
            state.data = PageData::Claim(ClaimView::gone(&namespace, &name));
            pages::render(&app, state, StatusCode::NOT_FOUND).await
        }
        // Not a name any claim could have: nothing to say about it.
        Err(ServiceError::NotFound {
            by: services::Decider::Console,
            ..
        }) => {
            state.page = Page::NotFound;
            pages::render(&app, state, StatusCode::NOT_FOUND).await
        }
        Err(error) => {
            let error = app_error(error, AppError::NotFound);
            pages::with_feedback(&app, state, error, Default::default()).await
        }
    }
}

/// `GET /events/dashboard`: server-sent events, each a JSON [`DashboardView`] sent when
/// the person's pools or claims change, so an open page updates without reloading.
pub async fn dashboard_events(
    State(app): State<AppState>,
    Who(who): Who,
    request: Request,
) -> Response {
    let Some(viewer) = SessionViewer::of(&app, &request).await else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match app.console.dashboard_snapshots(&who, viewer).await {
        Ok(snapshots) => events(&app, snapshots),
        Err(error) => stream_refused(error),
    }
}

/// `GET /events/claims/{namespace}/{name}`: server-sent events, each a JSON
/// [`ClaimView`] sent when the claim changes; once it is deleted the view says so.
pub async fn claim_events(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Who(who): Who,
    request: Request,
) -> Response {
    let Some(viewer) = SessionViewer::of(&app, &request).await else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match app
        .console
        .claim_snapshots(&who, viewer, &namespace, &name)
        .await
    {
        Ok(snapshots) => events(&app, snapshots),
        Err(error) => stream_refused(error),
    }
}

/// A live stream that could not open: Kubernetes' status, or 404.
fn stream_refused(error: ServiceError) -> Response {
    let status = match app_error(error, AppError::NotFound) {
        AppError::Kubernetes { code, .. } => {
            StatusCode::from_u16(code).unwrap_or(StatusCode::FORBIDDEN)
        }
        other => StatusCode::from_u16(other.status()).unwrap_or(StatusCode::NOT_FOUND),
    };
    status.into_response()
}

/// Each snapshot as an event carrying its JSON, then [`app::SESSION_ENDED_EVENT`] when
/// the snapshots end with the session; until the console shuts down.
fn events<T: serde::Serialize + Send + 'static>(
    app: &AppState,
    snapshots: impl Stream<Item = T> + Send + 'static,
) -> Response {
    let stopping = app.stopping.clone().cancelled_owned();
    // The snapshots end only when the viewer's session did (SessionViewer): the last
    // event says so (with data: a browser dispatches no event without). A shutdown cuts
    // the stream before it.
    let ended = Event::default()
        .event(app::SESSION_ENDED_EVENT)
        .data("the session ended");
    let events = snapshots
        .filter_map(|snapshot| async move {
            let json = serde_json::to_string(&snapshot).ok()?;
            Some(Ok::<_, Infallible>(Event::default().data(json)))
        })
        .chain(futures::stream::once(async { Ok(ended) }))
        .take_until(stopping);
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The person a live stream serves, re-checked through their session before every
/// snapshot, so a stream ends with it — sign-out, "sign out everywhere", a disabled
/// account, a password reset — and follows role changes.
struct SessionViewer {
    app: AppState,
    grant: SessionGrant,
    source: std::net::IpAddr,
}

impl SessionViewer {
    /// The viewer of `request`'s session (`None` without one). Not `async` over the
    /// request itself, which is not `Sync`: the session and address are taken first.
    fn of(app: &AppState, request: &Request) -> impl Future<Output = Option<Self>> + Send + use<> {
        let session = request
            .extensions()
            .get::<tower_sessions::Session>()
            .cloned();
        let source = crate::middleware::client_ip(request.extensions());
        let app = app.clone();
        async move {
            let grant = session?.get::<SessionGrant>(AUTH_KEY).await.ok()??;
            Some(Self { app, grant, source })
        }
    }
}

impl Viewer for SessionViewer {
    async fn current(&self) -> Option<Principal> {
        let user = self
            .app
            .accounts
            .check_session(&self.grant, self.source)
            .await
            .ok()??;
        (!user.must_change_password)
            .then(|| Principal::local(user, services::Authenticator::Session, self.source))
    }
}

/// The dashboard, with `notice` or `error`, its claim forms starting with lifetime `ttl`.
async fn render(
    app: &AppState,
    mut state: PageState,
    who: &Principal,
    notice: Option<Notice>,
    error: Option<AppError>,
    ttl: Option<u32>,
) -> Response {
    state.page = Page::Dashboard;
    state.path = paths::DASHBOARD.to_owned();
    state.notice = notice;
    let (view, error) = match app.console.dashboard(who).await {
        Ok(view) => (view, error),
        Err(ServiceError::Unavailable { source }) if error.is_none() => {
            let failure = ServiceError::Unavailable { source };
            return error_page(state.look(), &app_error(failure, AppError::NotFound));
        }
        Err(refused) => (
            DashboardView::default(),
            Some(error.unwrap_or_else(|| app_error(refused, AppError::NotFound))),
        ),
    };
    state.data = PageData::Dashboard(DashboardView {
        ttl_chosen: ttl,
        ..view
    });
    match error {
        Some(error) => pages::with_feedback(app, state, error, Default::default()).await,
        None => pages::render(app, state, StatusCode::OK).await,
    }
}
