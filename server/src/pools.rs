//! The Pools page's HTTP side (operators, SPEC §5): one use-case call per handler
//! ([`services::Console::pools`], `save_pool`, `delete_pool`).

use std::collections::BTreeMap;

use app::{AppError, FormFeedback, Notice, Page, PageData, PageState, PoolsView, paths};
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_domain::object_names::is_dns_subdomain;
use services::{Decider, Principal, SavePool, ServiceError};

use crate::AppState;
use crate::form::Form;
use crate::middleware::error_page;
use crate::pages;
use crate::use_cases::{PageContext, PageSession, Who, app_error};

/// `GET /pools`; `?edit=<namespace>/<name>` fills the form with that pool;
/// `?saved=` / `?deleted=` show their notice.
pub async fn pools_page(
    State(app): State<AppState>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
    RawQuery(query): RawQuery,
) -> Response {
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
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
    let refused = pages::take_feedback(session.as_ref(), &state.path).await;
    render(&app, state, &who, value("edit").as_deref(), notice, refused).await
}

/// `POST /pools`: creates or changes a pool; a refusal goes back to the Pools page
/// (post/redirect/get) with what was typed.
pub async fn save_pool(
    State(app): State<AppState>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
    body: Body,
) -> Response {
    let refused =
        |error, typed| pages::refused(session.as_ref(), state.look(), paths::POOLS, error, typed);
    let form = match Form::read(body).await {
        Ok(form) => form,
        Err(error) => return refused(error, Default::default()).await,
    };
    let typed: BTreeMap<String, String> = form.pairs().iter().cloned().collect();
    let field = |name: &str| form.get(name).to_owned();
    let command = SavePool {
        namespace: field("namespace"),
        name: field("name"),
        warm_replicas: field("warm_replicas"),
        max_replicas: field("max_replicas"),
        image_revision: field("image_revision"),
        cpu: field("cpu"),
        memory: field("memory"),
        image: field("image"),
        provider: field("provider"),
    };
    match app.console.save_pool(&who, &command).await {
        Ok(name) => Redirect::to(&format!("{}?saved={name}", paths::POOLS)).into_response(),
        Err(ServiceError::NoCluster) => error_page(state.look(), &AppError::NoClusterConfigured),
        Err(error) => refused(app_error(error, AppError::InvalidPool), typed).await,
    }
}

/// `POST /pools/{namespace}/{name}/delete`.
pub async fn delete_pool(
    State(app): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
) -> Response {
    match app.console.delete_pool(&who, &namespace, &name).await {
        Ok(()) => Redirect::to(&format!("{}?deleted={name}", paths::POOLS)).into_response(),
        Err(
            error @ (ServiceError::NoCluster
            | ServiceError::NotFound {
                by: Decider::Console,
                ..
            }),
        ) => error_page(state.look(), &app_error(error, AppError::NotFound)),
        Err(error) => {
            let error = app_error(error, AppError::NotFound);
            pages::refused(
                session.as_ref(),
                state.look(),
                paths::POOLS,
                error,
                Default::default(),
            )
            .await
        }
    }
}

async fn render(
    app: &AppState,
    mut state: PageState,
    who: &Principal,
    editing: Option<&str>,
    notice: Option<Notice>,
    refused: Option<FormFeedback>,
) -> Response {
    state.page = Page::Pools;
    state.path = paths::POOLS.to_owned();
    state.notice = notice;
    let editing = editing.and_then(|key| key.split_once('/'));
    match app.console.pools(who, editing).await {
        Ok(view) => state.data = PageData::Pools(view),
        Err(ServiceError::NoCluster) => {
            return error_page(state.look(), &AppError::NoClusterConfigured);
        }
        Err(error) => {
            state.data = PageData::Pools(PoolsView::default());
            let error = app_error(error, AppError::InvalidPool);
            return pages::with_feedback(app, state, error, Default::default()).await;
        }
    }
    match refused {
        Some(FormFeedback { error, values }) => {
            pages::with_feedback(app, state, error, values).await
        }
        None => pages::render(app, state, StatusCode::OK).await,
    }
}
