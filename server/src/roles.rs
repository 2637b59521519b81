//! The Roles page's HTTP side (admins, SPEC §5): one use-case call per handler
//! ([`services::Console::roles`], `save_role`, `delete_role`).

use std::collections::BTreeMap;

use app::{AppError, FormFeedback, Notice, Page, PageData, PageState, RolesView, paths};
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_domain::RoleName;
use services::{
    CUSTOM_ROLE_RESOURCES, CUSTOM_ROLE_VERBS, Decider, Principal, SaveRole, ServiceError,
};

use crate::AppState;
use crate::form::Form;
use crate::middleware::error_page;
use crate::pages;
use crate::use_cases::{PageContext, PageSession, Who, app_error};

/// `GET /roles` (admins); `?edit=<name>` pre-fills the form with that custom role.
pub async fn roles_page(
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
    let editing = query
        .iter()
        .find(|(k, _)| k == "edit")
        .map(|(_, v)| v.clone());
    let notice = query.iter().find_map(|(key, name)| {
        let name = RoleName::parse(name).ok()?.as_str().to_owned();
        match key.as_str() {
            "saved" => Some(Notice::RoleSaved { name }),
            "deleted" => Some(Notice::RoleDeleted { name }),
            _ => None,
        }
    });
    let refused = pages::take_feedback(session.as_ref(), &state.path).await;
    render(&app, state, &who, editing.as_deref(), notice, refused).await
}

/// `POST /roles` with `name` and `grant.<resource>.<verb>` checkboxes: creates the custom
/// role, or with `version` (the edit form's) changes it. A refusal goes back to the
/// Roles page (post/redirect/get) with what was typed and ticked.
pub async fn save_role(
    State(app): State<AppState>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
    body: Body,
) -> Response {
    let refused = |page: String, error, typed| {
        let look = state.look();
        let session = session.clone();
        async move { pages::refused(session.as_ref(), look, &page, error, typed).await }
    };
    let form = match Form::read(body).await {
        Ok(form) => form,
        Err(error) => return refused(paths::ROLES.to_owned(), error, Default::default()).await,
    };
    // What was typed and ticked, put back into the form when the save is refused.
    let typed: BTreeMap<String, String> = form.pairs().iter().cloned().collect();
    let grants = CUSTOM_ROLE_RESOURCES
        .iter()
        .flat_map(|resource| CUSTOM_ROLE_VERBS.iter().map(move |verb| (*resource, *verb)))
        .filter(|(resource, verb)| form.get(&format!("grant.{resource}.{verb}")) == "on")
        .map(|(resource, verb)| (resource.to_owned(), verb.to_owned()))
        .collect();
    let version = form.get("version");
    let command = SaveRole {
        name: form.get("name").to_owned(),
        grants,
        version: (!version.is_empty()).then(|| version.to_owned()),
    };
    match app.console.save_role(&who, &command).await {
        Ok(name) => back("saved", name.as_str()),
        Err(
            error @ ServiceError::Forbidden {
                by: Decider::Console,
                ..
            },
        ) => error_page(state.look(), &app_error(error, AppError::Forbidden)),
        Err(ServiceError::Conflict {
            by: Decider::Console,
            ..
        }) if command.version.is_some() => {
            // The form shows the role as it is now, to make the change again.
            let editing: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("edit", command.name.trim())
                .finish();
            let page = format!("{}?{editing}", paths::ROLES);
            refused(page, AppError::RoleChanged, Default::default()).await
        }
        Err(ServiceError::Conflict {
            by: Decider::Console,
            ..
        }) => refused(paths::ROLES.to_owned(), AppError::RoleExists, typed).await,
        Err(error) => {
            let invalid = match &error {
                ServiceError::Invalid { field, .. } if field == "name" => AppError::InvalidRoleName,
                _ => AppError::InvalidRole,
            };
            refused(paths::ROLES.to_owned(), app_error(error, invalid), typed).await
        }
    }
}

/// `POST /roles/{name}/delete`: deletes the custom role, then takes it from everyone who
/// held it.
pub async fn delete_role(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Who(who): Who,
    PageContext(state): PageContext,
    PageSession(session): PageSession,
) -> Response {
    match app.console.delete_role(&who, &name).await {
        Ok(_) => back("deleted", &name),
        Err(
            error @ (ServiceError::Forbidden {
                by: Decider::Console,
                ..
            }
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
                paths::ROLES,
                error,
                Default::default(),
            )
            .await
        }
    }
}

fn back(key: &str, name: &str) -> Response {
    Redirect::to(&format!("{}?{key}={name}", paths::ROLES)).into_response()
}

async fn render(
    app: &AppState,
    mut state: PageState,
    who: &Principal,
    editing: Option<&str>,
    notice: Option<Notice>,
    refused: Option<FormFeedback>,
) -> Response {
    state.page = Page::Roles;
    state.path = paths::ROLES.to_owned();
    state.notice = notice;
    match app.console.roles(who, editing).await {
        Ok(view) => state.data = PageData::Roles(view),
        Err(
            error @ (ServiceError::NoCluster
            | ServiceError::Forbidden {
                by: Decider::Console,
                ..
            }
            | ServiceError::Unavailable { .. }),
        ) => return error_page(state.look(), &app_error(error, AppError::Forbidden)),
        Err(error) => {
            state.data = PageData::Roles(RolesView::default());
            let error = app_error(error, AppError::InvalidRole);
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
