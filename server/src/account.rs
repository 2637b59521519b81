//! My account: my sessions, ending one of them, and signing out everywhere.

use app::{AccountView, Notice, Page, PageData, PageState, SessionRow, paths};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_identity::SessionGrant;
use services::{IdentitySource, Principal};
use tower_sessions::Session;

use crate::AppState;
use crate::middleware::{client_ip, internal_error, signed_in};
use crate::pages;
use crate::session::AUTH_KEY;
use crate::use_cases::{PageContext, Who};
use banlieue_domain::views::format_instant;

/// The `?done=` of `/account` after one of my sessions was ended (post/redirect/get).
const SESSION_ENDED: &str = "session-ended";

/// `GET /account`; `?done=session-ended` says that the session an "End" named was ended.
pub async fn account_page(
    State(app): State<AppState>,
    session: Session,
    Who(who): Who,
    PageContext(state): PageContext,
    RawQuery(query): RawQuery,
) -> Response {
    let ended = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .any(|(key, value)| key == "done" && value == SESSION_ENDED);
    let notice = ended.then_some(Notice::SessionRevoked);
    account_view(&app, &session, state, &who, notice).await
}

async fn account_view(
    app: &AppState,
    session: &Session,
    mut state: PageState,
    who: &Principal,
    notice: Option<Notice>,
) -> Response {
    // Browser sessions are console accounts' alone: a tenant's person has no sessions here.
    let IdentitySource::Local(user) = who.source() else {
        return crate::middleware::error_page(state.look(), &app::AppError::Forbidden);
    };
    let loaded = async {
        let current = session
            .get::<SessionGrant>(AUTH_KEY)
            .await?
            .map(|g| g.handle);
        let sessions = app.accounts.store().user_sessions_of(user.id).await?;
        anyhow::Ok((current, sessions))
    };
    let (current, sessions) = match loaded.await {
        Ok(loaded) => loaded,
        Err(error) => return internal_error(state.look(), &error),
    };
    state.page = Page::Account;
    state.path = paths::ACCOUNT.to_owned();
    state.notice = notice;
    state.data = PageData::Account(AccountView {
        sessions: sessions
            .into_iter()
            .map(|s| SessionRow {
                current: current.as_deref() == Some(s.handle.as_str()),
                handle: s.handle,
                created: format_instant(s.created_at),
                last_seen: format_instant(s.last_seen_at),
                source_ip: s.source_ip,
                user_agent: s.user_agent,
            })
            .collect(),
        kubeconfig_available: app.config.cluster.is_some(),
        access: match app.console.access(who).await {
            Ok(access) => access,
            Err(error) => {
                let error = crate::use_cases::app_error(error, app::AppError::NotFound);
                return crate::middleware::error_page(state.look(), &error);
            }
        },
    });
    pages::render(app, state, StatusCode::OK).await
}

/// `POST /account/sessions/{handle}/revoke`: ends one of my other sessions (that browser
/// is signed out on its next request), then redirects to `/account` (post/redirect/get: a
/// reload asks nothing again).
pub async fn revoke_session(
    State(app): State<AppState>,
    Path(handle): Path<String>,
    Who(who): Who,
    PageContext(state): PageContext,
) -> Response {
    let IdentitySource::Local(user) = who.source() else {
        return crate::middleware::error_page(state.look(), &app::AppError::Forbidden);
    };
    match app
        .accounts
        .end_own_session(user, &handle, who.address())
        .await
    {
        Ok(true) => {
            Redirect::to(&format!("{}?done={SESSION_ENDED}", paths::ACCOUNT)).into_response()
        }
        // An unknown handle (already ended, or not ours): the list as it is.
        Ok(false) => Redirect::to(paths::ACCOUNT).into_response(),
        Err(error) => internal_error(state.look(), &error.into()),
    }
}

/// `POST /account/sessions/revoke-all`: ends every session of mine, this one included.
pub async fn revoke_all(
    State(app): State<AppState>,
    session: Session,
    request: Request,
) -> Response {
    let (state, user) = signed_in(&request);
    let source = client_ip(request.extensions());
    let ended = async {
        app.accounts.sign_out_everywhere(&user, source).await?;
        session.flush().await?;
        anyhow::Ok(())
    };
    match ended.await {
        Ok(()) => Redirect::to(paths::SIGN_IN).into_response(),
        Err(error) => internal_error(state.look(), &error),
    }
}
