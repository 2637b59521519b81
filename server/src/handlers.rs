//! The form endpoints: sign-in, password change, sign-out and the language switch, plus
//! the health probes and the metrics. Each form answers with a redirect (303, RFC 9110
//! §15.4.4) or with its page and the error.

use std::sync::Arc;

use app::{AppError, Locale, PageState, Theme, paths};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_identity::{ChangePasswordError, SignInAttempt, SignInError};
use prometheus_client::registry::Registry;
use time::OffsetDateTime;
use tower_sessions::Session;

use crate::AppState;
use crate::form::Form;
use crate::middleware::{
    CurrentUser, LOCALE_COOKIE, THEME_COOKIE, client_ip, internal_error, remembering_cookie,
};
use crate::pages;
use crate::session::AUTH_KEY;
use banlieue_identity::SessionGrant;

/// `POST /sign-in` with `user_name`, `password`. Success rotates the session id (no
/// fixation) and redirects to the password change when it is due, else to the page the
/// person was sent here from (`?next=`, a path on this site), else to the dashboard.
pub async fn sign_in(State(app): State<AppState>, session: Session, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let state = page_state(&parts.extensions);
    let form = match Form::read(body).await {
        Ok(form) => form,
        Err(error) => {
            return pages::with_feedback(&app, state, error, Default::default()).await;
        }
    };
    let user_name = form.get("user_name").trim().to_owned();
    if user_name.is_empty() {
        return pages::with_feedback(&app, state, AppError::MissingUserName, Default::default())
            .await;
    }
    let attempt = SignInAttempt {
        user_name: &user_name,
        password: form.get("password"),
        source: client_ip(&parts.extensions),
    };
    let error = match app.accounts.sign_in(attempt).await {
        Err(SignInError::Internal(error)) => return internal_error(state.look(), &error.into()),
        Err(error) => sign_in_refusal(error),
        Ok(user) => {
            let opened = start_session(&app, &session, &user, &parts, OffsetDateTime::now_utc());
            if let Err(error) = opened.await {
                return internal_error(state.look(), &error);
            }
            let next = if user.must_change_password {
                paths::CHANGE_PASSWORD.to_owned()
            } else {
                return_path(parts.uri.query()).unwrap_or_else(|| paths::DASHBOARD.to_owned())
            };
            return Redirect::to(&next).into_response();
        }
    };
    let values = pages::typed(&[("user_name", &user_name)]);
    pages::with_feedback(&app, state, error, values).await
}

/// What a refused sign-in shows. [`SignInError::Internal`] is the caller's to log.
pub(crate) fn sign_in_refusal(error: SignInError) -> AppError {
    match error {
        SignInError::Throttled { retry_after } => AppError::Throttled {
            retry_after_secs: whole_seconds(retry_after),
        },
        SignInError::Busy { retry_after } => AppError::Busy {
            retry_after_secs: whole_seconds(retry_after),
        },
        SignInError::InvalidCredentials | SignInError::Internal(_) => AppError::InvalidCredentials,
        SignInError::PasswordTooLong => AppError::PasswordTooLong,
    }
}

/// `Retry-After` in whole seconds, rounded up so that a client waiting that long is not
/// refused again.
pub(crate) fn whole_seconds(wait: std::time::Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// `POST /change-password` with `current_password`, `new_password`, `confirm_password`.
/// Success ends every other session (`not_before` moves), keeps this one under a new id,
/// and redirects to the dashboard, or to `?next=` when an OIDC authorization waits.
pub async fn change_password(
    State(app): State<AppState>,
    session: Session,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let state = page_state(&parts.extensions);
    let Some(CurrentUser(user)) = parts.extensions.get::<CurrentUser>().cloned() else {
        return crate::middleware::error_page(state.look(), &AppError::NotSignedIn);
    };
    let refuse = |state, error| pages::with_feedback(&app, state, error, Default::default());
    let form = match Form::read(body).await {
        Ok(form) => form,
        Err(error) => return refuse(state, error).await,
    };
    let new = form.get("new_password");
    if new != form.get("confirm_password") {
        return refuse(state, AppError::PasswordsDiffer).await;
    }
    let now = OffsetDateTime::now_utc();
    let source = client_ip(&parts.extensions);
    match app
        .accounts
        .change_password(&user, form.get("current_password"), new, source, now)
        .await
    {
        Ok(updated) => {
            if let Err(error) = start_session(&app, &session, &updated, &parts, now).await {
                return internal_error(state.look(), &error);
            }
            Redirect::to(
                &waiting_authorization(parts.uri.query()).unwrap_or(paths::DASHBOARD.into()),
            )
            .into_response()
        }
        Err(ChangePasswordError::WrongCurrentPassword) => {
            refuse(state, AppError::WrongCurrentPassword).await
        }
        Err(ChangePasswordError::Unchanged) => refuse(state, AppError::PasswordUnchanged).await,
        Err(ChangePasswordError::InvalidNewPassword(e)) => {
            let error = match e {
                banlieue_domain::PasswordError::TooShort { .. } => AppError::PasswordTooShort,
                banlieue_domain::PasswordError::TooLong { .. } => AppError::PasswordTooLong,
            };
            refuse(state, error).await
        }
        Err(ChangePasswordError::Throttled { retry_after }) => {
            let error = AppError::Throttled {
                retry_after_secs: whole_seconds(retry_after),
            };
            refuse(state, error).await
        }
        Err(ChangePasswordError::Busy { retry_after }) => {
            let error = AppError::Busy {
                retry_after_secs: whole_seconds(retry_after),
            };
            refuse(state, error).await
        }
        Err(ChangePasswordError::Internal(error)) => internal_error(state.look(), &error.into()),
    }
}

/// `POST /sign-out`: deletes the session on the server (the cookie alone is worthless
/// afterwards) and returns to the sign-in page.
pub async fn sign_out(State(app): State<AppState>, session: Session, request: Request) -> Response {
    let look = page_state(request.extensions()).look();
    let user = request
        .extensions()
        .get::<CurrentUser>()
        .map(|u| u.0.name.clone());
    let source = client_ip(request.extensions());
    let ended = async {
        if let Some(grant) = session.get::<SessionGrant>(AUTH_KEY).await? {
            match &user {
                Some(name) => app.accounts.sign_out(&grant, name.as_str(), source).await?,
                // The session was no longer valid (user disabled or gone): nobody signs out.
                None => app.accounts.close_session(&grant).await?,
            }
        }
        session.flush().await?;
        anyhow::Ok(())
    };
    if let Err(error) = ended.await {
        return internal_error(look, &error);
    }
    Redirect::to(paths::SIGN_IN).into_response()
}

/// Gives the browser a fresh session for `user`: a new session id (the old one is deleted
/// from the store, so a planted or stolen id is worthless, OWASP session fixation) and a
/// new row in "My sessions".
pub(crate) async fn start_session(
    app: &AppState,
    session: &Session,
    user: &banlieue_store::UserRecord,
    request: &http::request::Parts,
    now: OffsetDateTime,
) -> anyhow::Result<()> {
    let user_agent = request
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let grant = app
        .accounts
        .open_session(user, client_ip(&request.extensions), user_agent, now)
        .await?;
    session.cycle_id().await?;
    session.insert(AUTH_KEY, grant).await?;
    Ok(())
}

/// `POST /locale` with `lang` (`en` or `ja`) and `next` (a path on this site): remembers
/// the language for a year and goes back to `next`.
pub async fn set_locale(State(app): State<AppState>, request: Request) -> Response {
    let known = |tag: &str| Locale::from_tag(tag).map(Locale::tag);
    remember_choice(&app, request, "lang", LOCALE_COOKIE, known).await
}

/// `POST /theme` with `theme` (`system`, `light` or `dark`, [`Theme`]) and `next`:
/// remembers the theme for a year and goes back to `next`.
pub async fn set_theme(State(app): State<AppState>, request: Request) -> Response {
    let known = |tag: &str| Theme::from_tag(tag).map(Theme::tag);
    remember_choice(&app, request, "theme", THEME_COOKIE, known).await
}

/// A switch's form: the value of `field`, when `known` accepts it, remembered in `cookie`;
/// then back to `next`, a path on this site (else the dashboard).
async fn remember_choice(
    app: &AppState,
    request: Request,
    field: &str,
    cookie: &str,
    known: impl Fn(&str) -> Option<&'static str>,
) -> Response {
    let form = match Form::read(request.into_body()).await {
        Ok(form) => form,
        Err(_) => return Redirect::to(paths::DASHBOARD).into_response(),
    };
    let next = local_path(form.get("next")).unwrap_or_else(|| paths::DASHBOARD.to_owned());
    let mut response = Redirect::to(&next).into_response();
    if let Some(tag) = known(form.get(field))
        && let Some(value) = remembering_cookie(cookie, tag, app.config.https)
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `next` when it is a path on this site, never another origin (`//evil`, `/\evil`), as a
/// `Location` carries it: characters outside ASCII percent-encoded (RFC 3986 §2.1).
fn local_path(next: &str) -> Option<String> {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.chars().any(char::is_control);
    ok.then(|| percent_encoding::utf8_percent_encode(next, percent_encoding::CONTROLS).to_string())
}

/// A method an address does not take (typically reloading the result of a form post):
/// a translated page instead of an empty 405.
pub async fn method_not_allowed(request: Request) -> Response {
    crate::middleware::error_page(
        crate::middleware::look_of(request.headers()),
        &AppError::MethodNotAllowed,
    )
}

/// `GET /healthz`: the process answers.
pub async fn healthz() -> &'static str {
    "ok"
}

/// How long `/readyz` waits for the database and for the cluster, each: within the
/// chart's probe timeout (2 s), so a slow dependency makes the replica unready, not the
/// probe time out.
pub const READINESS_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1500);

/// `GET /readyz`: 200 `ok` when the database and the cluster (when one is configured)
/// both answer within [`READINESS_TIMEOUT`]; else 503 naming which did not. 503
/// `shutting down` once the console is terminating ([`AppState::terminating`]).
pub async fn readyz(State(app): State<AppState>) -> Response {
    if app.terminating.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    let database = async {
        match tokio::time::timeout(READINESS_TIMEOUT, app.accounts.store().ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer in {READINESS_TIMEOUT:?}")),
        }
    };
    let cluster = app.console.check_cluster_ready(READINESS_TIMEOUT);
    let (database, cluster) = tokio::join!(database, cluster);
    let mut unready = Vec::new();
    if let Err(error) = database {
        tracing::warn!(%error, "readiness: database unreachable");
        unready.push("database unreachable");
    }
    if let Err(error) = cluster {
        tracing::warn!(%error, "readiness: cluster unreachable");
        unready.push("cluster unreachable");
    }
    if unready.is_empty() {
        "ok".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, unready.join("; ")).into_response()
    }
}

/// The `Content-Type` of the OpenMetrics text format that [`metrics`] serves (what
/// prometheus-client's text encoder writes; Prometheus negotiates it).
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `GET /metrics` (SPEC §9) on the metrics listener: every metric of `registry` in the
/// OpenMetrics text format. It asks for no credentials, so it must stay on the cluster
/// network (the chart's NetworkPolicy; README, "Metrics").
pub async fn metrics(State(registry): State<Arc<Registry>>) -> Response {
    let mut body = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut body, &registry) {
        tracing::error!(%error, "cannot encode the metrics");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
        )],
        body,
    )
        .into_response()
}

/// The `next` parameter of `query`, decoded.
fn next_of(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "next")
        .map(|(_, next)| next.into_owned())
}

/// The `next` of a password change: only the OIDC authorization endpoint on this site.
fn waiting_authorization(query: Option<&str>) -> Option<String> {
    let next = next_of(query)?;
    let rest = next.strip_prefix(paths::AUTHORIZE)?;
    rest.starts_with('?').then(|| local_path(&next))?
}

/// The `next` of a sign-in: a path on this site ([`local_path`]), never the sign-in or
/// sign-out page itself.
fn return_path(query: Option<&str>) -> Option<String> {
    let next = next_of(query)?;
    let page = next.split(['?', '#']).next().unwrap_or_default();
    if matches!(page, paths::SIGN_IN | paths::SIGN_OUT) {
        return None;
    }
    local_path(&next)
}

pub(crate) fn page_state(extensions: &http::Extensions) -> PageState {
    extensions.get::<PageState>().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn only_local_paths_are_followed() {
        assert_eq!(local_path("/sign-in").as_deref(), Some("/sign-in"));
        assert_eq!(local_path("/").as_deref(), Some("/"));
        assert_eq!(
            local_path("/claims/é?q=%2F").as_deref(),
            Some("/claims/%C3%A9?q=%2F"),
            "a Location of ASCII only, what was encoded kept"
        );
        for bad in [
            "",
            "https://evil.example",
            "//evil.example",
            "/\\evil",
            "/a\nb",
        ] {
            assert_eq!(local_path(bad), None, "{bad:?}");
        }
    }
}
