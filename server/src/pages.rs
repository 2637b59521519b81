//! Rendering a page from a handler: GET handlers load the page's data first, and a
//! refused form is answered with its page, the error and what was typed, in the user's
//! language.

use std::collections::BTreeMap;

use app::{AppError, FormFeedback, Look, PageState, shell};
use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use leptos::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

use crate::AppState;
use crate::middleware::internal_error;

/// Provides the request's [`PageState`] (set by the middleware and handlers) to the app.
pub fn provide_page_state() {
    if let Some(parts) = use_context::<http::request::Parts>()
        && let Some(state) = parts.extensions.get::<PageState>()
    {
        provide_context(state.clone());
    }
}

/// `GET` of a page without data of its own (dashboard, sign-in, password change): the
/// middleware already chose the page from the path.
pub async fn page(
    axum::extract::State(app): axum::extract::State<AppState>,
    request: Request<Body>,
) -> Response {
    let state = request
        .extensions()
        .get::<PageState>()
        .cloned()
        .unwrap_or_default();
    render(&app, state, StatusCode::OK).await
}

/// Renders `state.page` with `state`, answering with `status`.
pub async fn render(app: &AppState, state: PageState, status: StatusCode) -> Response {
    let options = LeptosOptions::clone(&app.leptos);
    let render = leptos_axum::render_app_to_stream_with_context(provide_page_state, move || {
        shell(options.clone())
    });
    let mut request = Request::get("/")
        .body(Body::empty())
        .expect("static request");
    request.extensions_mut().insert(state);
    let mut response = render(request).await.into_response();
    *response.status_mut() = status;
    response
}

/// Renders `state.page` with `error` and the typed `values` (never passwords), with
/// the error's status code (and `Retry-After` for [`AppError::Throttled`] and
/// [`AppError::Busy`], RFC 9110
/// §10.2.3).
pub async fn with_feedback(
    app: &AppState,
    mut state: PageState,
    error: AppError,
    values: BTreeMap<String, String>,
) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::OK);
    let retry_after = match &error {
        AppError::Throttled { retry_after_secs } | AppError::Busy { retry_after_secs } => {
            Some(*retry_after_secs)
        }
        _ => None,
    };
    state.feedback = Some(FormFeedback { error, values });
    let mut response = render(app, state, status).await;
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// Session key of a refused form's feedback on its way to the page it was posted from.
const REFUSED_FORM_KEY: &str = "refused-form";

/// A refused form's feedback waiting in the session for the next `GET` of `path`.
#[derive(Serialize, Deserialize)]
struct RefusedForm {
    path: String,
    feedback: FormFeedback,
    /// When it was refused (Unix seconds): feedback whose redirect was not followed at
    /// once is not shown later.
    at: i64,
}

/// How long a refused form's feedback waits for its page, in seconds.
const REFUSED_FORM_WAITS: i64 = 60;

/// Post/redirect/get for a refused form: `error` and the typed `values` (never
/// passwords) wait in the session for the next `GET` of `page` ([`take_feedback`]), and
/// the answer is `303 See Other` there, so a reload shows the page again and repeats
/// nothing. Every page route has a session; without one this is an internal error.
pub async fn refused(
    session: Option<&Session>,
    look: Look,
    page: &str,
    error: AppError,
    values: BTreeMap<String, String>,
) -> Response {
    let waiting = RefusedForm {
        path: page.to_owned(),
        feedback: FormFeedback { error, values },
        at: time::OffsetDateTime::now_utc().unix_timestamp(),
    };
    let kept = match session {
        Some(session) => session
            .insert(REFUSED_FORM_KEY, &waiting)
            .await
            .map_err(anyhow::Error::from),
        None => Err(anyhow::anyhow!("no session to keep a refused form in")),
    };
    match kept {
        Ok(()) => Redirect::to(page).into_response(),
        Err(error) => internal_error(look, &error),
    }
}

/// The feedback a refused form left for `path` ([`refused`]), taken from the session:
/// shown once. Feedback left for another page stays for that page (another tab may be on
/// its way there); feedback older than [`REFUSED_FORM_WAITS`] is dropped.
pub async fn take_feedback(session: Option<&Session>, path: &str) -> Option<FormFeedback> {
    let session = session?;
    let waiting = session
        .get::<RefusedForm>(REFUSED_FORM_KEY)
        .await
        .ok()
        .flatten()?;
    let fresh = time::OffsetDateTime::now_utc().unix_timestamp() - waiting.at <= REFUSED_FORM_WAITS;
    if waiting.path != path && fresh {
        return None;
    }
    session.remove_value(REFUSED_FORM_KEY).await.ok()?;
    fresh.then_some(waiting.feedback)
}

/// The value under `key` in the session, removed from it (shown once). Read before it
/// is removed: removing marks the session changed, which writes it back to the store,
/// and most page loads have nothing waiting.
pub async fn take_once<T: DeserializeOwned>(session: Option<&Session>, key: &str) -> Option<T> {
    let session = session?;
    let value = session.get::<T>(key).await.ok().flatten()?;
    session.remove_value(key).await.ok()?;
    Some(value)
}

/// `[(name, value)]` as the feedback's typed values.
pub fn typed(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
