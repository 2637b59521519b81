//! Users and audit log pages for admins: each GET loads the page's data and renders it;
//! each POST applies one action through `banlieue_identity` (which checks the rules and
//! audits) and answers with the page, its notice or its error.

use app::{
    AppError, AuditFilter, AuditRow, AuditView, FormFeedback, Notice, Page, PageData, PageState,
    UserRow, UserView, UsersView, paths,
};
use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_domain::PasswordError;
use banlieue_domain::views::format_instant;
use banlieue_identity::{
    AUDIT_PER_PAGE, Actor, AdminError, HashError, IdentityError, PasswordChoice, USERS_PER_PAGE,
    UserProfile,
};
use banlieue_store::{AuditQuery, UserRecord};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use tower_sessions::Session;

use crate::AppState;
use crate::form::Form;
use crate::middleware::{client_ip, error_page, internal_error, signed_in};
use crate::pages;

/// `GET /users?q=&page=&deleted=` query. A page number that is not one is page 0 (a
/// hand-edited URL gets the first page, not a parse error); `deleted=<name>` is where a
/// deletion redirects, to say so.
#[derive(Debug, Default, Deserialize)]
pub struct UsersQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    page: String,
    #[serde(default)]
    deleted: String,
}

/// What an action on a user's page did, as the `?done=` of the page it redirects to
/// (post/redirect/get: a reload never repeats the action).
const DONE: [(&str, Notice); 6] = [
    ("created", Notice::UserCreated),
    ("saved", Notice::UserSaved),
    ("disabled", Notice::UserDisabled),
    ("enabled", Notice::UserEnabled),
    ("password-reset", Notice::PasswordReset),
    ("sessions-revoked", Notice::SessionsRevoked),
];

/// Session key of a generated password waiting to be shown, once, on its user's page.
const SHOWN_PASSWORD_KEY: &str = "shown-password";

#[derive(Serialize, Deserialize)]
struct ShownPassword {
    user: String,
    password: String,
}

/// Redirects to `user`'s page with `done`; a generated `password` goes with it in the
/// admin's session, read and removed by that page: shown once, gone on reload, never in
/// a URL. Without a session the password cannot be handed over safely: an error.
async fn show_once(
    session: Option<Session>,
    look: app::Look,
    user: &str,
    password: Option<String>,
    done: &Notice,
) -> Response {
    if let Some(password) = password {
        let kept = match session {
            Some(session) => {
                let shown = ShownPassword {
                    user: user.to_owned(),
                    password,
                };
                session
                    .insert(SHOWN_PASSWORD_KEY, shown)
                    .await
                    .map_err(anyhow::Error::from)
            }
            None => Err(anyhow::anyhow!(
                "no session to show a generated password in"
            )),
        };
        if let Err(error) = kept {
            return internal_error(look, &error);
        }
    }
    to_user_page(user, done)
}

/// 303 to the page of `name` with the notice of `done` (RFC 9110 §15.4.4).
fn to_user_page(name: &str, done: &Notice) -> Response {
    let token = DONE
        .iter()
        .find(|(_, notice)| notice == done)
        .map_or("saved", |(token, _)| token);
    Redirect::to(&format!("{}?done={token}", paths::user(name))).into_response()
}

fn page_number(raw: &str) -> u32 {
    raw.trim().parse().unwrap_or(0)
}

/// `GET /users`: one page of the search.
pub async fn users_page(
    State(app): State<AppState>,
    Query(query): Query<UsersQuery>,
    request: Request,
) -> Response {
    let (mut state, actor) = context(&request);
    state.notice = banlieue_domain::UserName::parse(&query.deleted)
        .ok()
        .map(|name| Notice::UserDeleted {
            name: name.as_str().to_owned(),
        });
    let refused = pages::take_feedback(request.extensions().get::<Session>(), paths::USERS).await;
    users_view(
        &app,
        state,
        &actor,
        &query.q,
        page_number(&query.page),
        refused,
    )
    .await
}

async fn users_view(
    app: &AppState,
    mut state: PageState,
    actor: &Actor,
    search: &str,
    page: u32,
    refused: Option<FormFeedback>,
) -> Response {
    state.page = Page::Users;
    state.path = paths::USERS.to_owned();
    let listed = match app.accounts.list_users(actor, search, page).await {
        Ok(listed) => listed,
        Err(error) => return refusal(app, state, error).await,
    };
    state.data = PageData::Users(UsersView {
        search: search.to_owned(),
        // The page listed: the last one when the one asked for is past it.
        page: u32::try_from(listed.offset / USERS_PER_PAGE).unwrap_or(page),
        per_page: USERS_PER_PAGE,
        total: listed.total,
        rows: listed.users.iter().map(user_row).collect(),
        role_choices: app.console.role_names(),
        show_tenant: app.tenants.is_some() || listed.users.iter().any(|u| u.tenant.is_some()),
    });
    match refused {
        None => pages::render(app, state, StatusCode::OK).await,
        Some(FormFeedback { error, values }) => {
            pages::with_feedback(app, state, error, values).await
        }
    }
}

/// `POST /users`: create a user; the generated password is shown once on their page.
pub async fn create_user(State(app): State<AppState>, request: Request) -> Response {
    let (state, actor) = context(&request);
    let session = request.extensions().get::<Session>().cloned();
    let form = match Form::read(request.into_body()).await {
        Ok(form) => form,
        Err(error) => {
            return pages::refused(
                session.as_ref(),
                state.look(),
                paths::USERS,
                error,
                Default::default(),
            )
            .await;
        }
    };
    let choice = password_choice(&form);
    let name = form.get("name").trim().to_owned();
    match app
        .accounts
        .create_user(&actor, &name, &profile(&form), choice)
        .await
    {
        Ok((user, shown)) => {
            // They are acted for in the cluster at once.
            app.console.update_impersonable_users().await;
            show_once(
                session,
                state.look(),
                user.name.as_str(),
                shown,
                &Notice::UserCreated,
            )
            .await
        }
        // Not an admin: there is no form to go back to.
        Err(AdminError::Forbidden) => refusal(&app, state, AdminError::Forbidden).await,
        Err(error) => match app_error(error) {
            Ok(error) => {
                let values = pages::typed(&[
                    ("name", form.get("name")),
                    ("display_name", form.get("display_name")),
                    ("email", form.get("email")),
                    ("roles", &roles_of(&form).join(" ")),
                ]);
                pages::refused(session.as_ref(), state.look(), paths::USERS, error, values).await
            }
            Err(error) => internal_error(state.look(), &error),
        },
    }
}

/// `GET /users/{name}`; `?done=<action>` shows what the action that redirected here did.
pub async fn user_page(
    State(app): State<AppState>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let (state, actor) = context(&request);
    let done = url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "done")
        .and_then(|(_, token)| DONE.into_iter().find(|(t, _)| *t == token))
        .map(|(_, notice)| notice);
    let shown = pages::take_once::<ShownPassword>(
        request.extensions().get::<Session>(),
        SHOWN_PASSWORD_KEY,
    )
    .await
    .filter(|shown| shown.user == name)
    .map(|shown| shown.password);
    let refused =
        pages::take_feedback(request.extensions().get::<Session>(), &paths::user(&name)).await;
    match app.accounts.user(&actor, &name).await {
        Ok(user) => user_view(&app, state, user, shown, done, refused).await,
        Err(error) => refusal(&app, state, error).await,
    }
}

async fn user_view(
    app: &AppState,
    mut state: PageState,
    user: UserRecord,
    shown_password: Option<String>,
    notice: Option<Notice>,
    refused: Option<FormFeedback>,
) -> Response {
    state.page = Page::User;
    state.path = paths::user(user.name.as_str());
    state.notice = notice;
    let mut role_choices = app.console.role_names();
    for held in user.roles.iter().map(|r| r.to_string()) {
        if !role_choices.contains(&held) {
            role_choices.push(held);
        }
    }
    state.data = PageData::User(UserView {
        user: user_row(&user),
        shown_password,
        role_choices,
    });
    match refused {
        None => pages::render(app, state, StatusCode::OK).await,
        Some(FormFeedback { error, values }) => {
            pages::with_feedback(app, state, error, values).await
        }
    }
}

/// The actions on one user's page.
#[derive(Debug, Clone, Copy)]
pub enum UserAction {
    Update,
    Disable,
    Enable,
    ResetPassword,
    RevokeSessions,
    Delete,
}

/// `POST /users/{name}[/disable|/enable|/password|/revoke-sessions|/delete]`.
pub async fn user_action(
    app: AppState,
    name: String,
    action: UserAction,
    request: Request,
) -> Response {
    let (mut state, actor) = context(&request);
    let session = request.extensions().get::<Session>().cloned();
    let form = match Form::read(request.into_body()).await {
        Ok(form) => form,
        Err(error) => return error_page(state.look(), &error),
    };
    let version: i64 = match form.get("version").parse() {
        Ok(version) => version,
        Err(_)
            if matches!(
                action,
                UserAction::ResetPassword | UserAction::RevokeSessions
            ) =>
        {
            0
        }
        Err(_) => return error_page(state.look(), &AppError::InvalidForm),
    };
    let accounts = &app.accounts;
    let outcome = match action {
        UserAction::Update => accounts
            .update_user(&actor, &name, version, &profile(&form))
            .await
            .map(|_| (Notice::UserSaved, None)),
        UserAction::Disable => accounts
            .set_user_disabled(&actor, &name, version, true)
            .await
            .map(|_| (Notice::UserDisabled, None)),
        UserAction::Enable => accounts
            .set_user_disabled(&actor, &name, version, false)
            .await
            .map(|_| (Notice::UserEnabled, None)),
        UserAction::ResetPassword => accounts
            .reset_password(&actor, &name, password_choice(&form))
            .await
            .map(|shown| (Notice::PasswordReset, shown)),
        UserAction::RevokeSessions => accounts
            .revoke_user_sessions(&actor, &name)
            .await
            .map(|()| (Notice::SessionsRevoked, None)),
        UserAction::Delete => {
            // Rights first: a forged deletion is audited whatever it typed.
            if let Err(error) = accounts.admit(&actor, "user.delete", &name).await {
                Err(error)
            } else if form.get("confirm").trim() != name {
                Err(AdminError::ConfirmationMismatch)
            } else {
                match accounts.delete_user(&actor, &name, version).await {
                    Ok(()) => {
                        // Nobody is acted for as them any more.
                        app.console.update_impersonable_users().await;
                        let query = url::form_urlencoded::Serializer::new(String::new())
                            .append_pair("deleted", &name)
                            .finish();
                        return Redirect::to(&format!("{}?{query}", paths::USERS)).into_response();
                    }
                    Err(error) => Err(error),
                }
            }
        }
    };
    state.page = Page::User;
    let current = match accounts.user(&actor, &name).await {
        Ok(user) => user,
        Err(error) => return refusal(&app, state, error).await,
    };
    match outcome {
        Ok((notice, shown)) => {
            show_once(session, state.look(), current.name.as_str(), shown, &notice).await
        }
        Err(error) => match app_error(error) {
            Ok(error) => {
                // Only the profile form types values; after a conflict the page shows
                // the stored ones.
                let values = if !matches!(action, UserAction::Update) || error == AppError::Conflict
                {
                    Default::default()
                } else {
                    pages::typed(&[
                        ("display_name", form.get("display_name")),
                        ("email", form.get("email")),
                        ("roles", &roles_of(&form).join(" ")),
                    ])
                };
                let page = paths::user(current.name.as_str());
                pages::refused(session.as_ref(), state.look(), &page, error, values).await
            }
            Err(error) => internal_error(state.look(), &error),
        },
    }
}

/// `GET /audit?actor=&action=&target=&result=&since=&until=&page=`.
#[derive(Debug, Default, Deserialize)]
pub struct AuditParams {
    #[serde(flatten)]
    filter: AuditFilterParams,
    #[serde(default)]
    page: String,
}

#[derive(Debug, Default, Deserialize)]
struct AuditFilterParams {
    #[serde(default)]
    actor: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    target: String,
    #[serde(default)]
    result: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
}

/// `GET /audit`: the filtered audit log.
pub async fn audit_page(
    State(app): State<AppState>,
    Query(params): Query<AuditParams>,
    request: Request,
) -> Response {
    let (mut state, actor) = context(&request);
    state.page = Page::Audit;
    let page = page_number(&params.page);
    let f = params.filter;
    let filter = AuditFilter {
        actor: f.actor.trim().to_owned(),
        action: f.action.trim().to_owned(),
        target: f.target.trim().to_owned(),
        result: f.result.trim().to_owned(),
        since: f.since.trim().to_owned(),
        until: f.until.trim().to_owned(),
    };
    let (since, until) = match (day_start(&filter.since), day_start(&filter.until)) {
        (Ok(since), Ok(until)) => (
            since,
            // The whole `until` day; the last representable day has no "next day".
            until.and_then(|d| {
                d.checked_add(time::Duration::days(1) - time::Duration::milliseconds(1))
            }),
        ),
        _ => {
            state.data = PageData::Audit(AuditView {
                filter,
                page: 0,
                per_page: AUDIT_PER_PAGE,
                total: 0,
                rows: Vec::new(),
            });
            return pages::with_feedback(&app, state, AppError::InvalidDate, Default::default())
                .await;
        }
    };
    let query = AuditQuery {
        actor: filter.actor.clone(),
        action: filter.action.clone(),
        target: filter.target.clone(),
        result: filter.result.clone(),
        since,
        until,
    };
    match app.accounts.audit_log(&actor, &query, page).await {
        Ok(found) => {
            state.data = PageData::Audit(AuditView {
                filter,
                page: u32::try_from(found.offset / AUDIT_PER_PAGE).unwrap_or(page),
                per_page: AUDIT_PER_PAGE,
                total: found.total,
                rows: found
                    .events
                    .into_iter()
                    .map(|e| AuditRow {
                        at: format_instant(e.at),
                        actor: e.actor,
                        action: e.action,
                        // Anyone may type a target (the name tried at sign-in): its hidden
                        // characters are written out, never let loose on the page.
                        target: banlieue_domain::text::reveal_hidden(&e.target),
                        source_ip: e.source_ip,
                        result: e.result,
                    })
                    .collect(),
            });
            pages::render(&app, state, StatusCode::OK).await
        }
        Err(error) => refusal(&app, state, error).await,
    }
}

/// `YYYY-MM-DD` as midnight UTC; empty is `None`.
fn day_start(text: &str) -> Result<Option<OffsetDateTime>, ()> {
    if text.is_empty() {
        return Ok(None);
    }
    let mut parts = text.splitn(3, '-').map(str::parse::<i32>);
    let (Some(Ok(year)), Some(Ok(month)), Some(Ok(day))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return Err(());
    };
    let month = time::Month::try_from(u8::try_from(month).map_err(|_| ())?).map_err(|_| ())?;
    let date = time::Date::from_calendar_date(year, month, u8::try_from(day).map_err(|_| ())?)
        .map_err(|_| ())?;
    Ok(Some(date.midnight().assume_utc()))
}

/// The request's page state and the signed-in person as an [`Actor`].
pub fn context(request: &Request) -> (PageState, Actor) {
    let (state, user) = signed_in(request);
    let actor = Actor::User {
        user: Box::new(user),
        source: client_ip(request.extensions()),
    };
    (state, actor)
}

async fn refusal(app: &AppState, state: PageState, error: AdminError) -> Response {
    match app_error(error) {
        Ok(error) => pages::with_feedback(app, state, error, Default::default()).await,
        Err(error) => internal_error(state.look(), &error),
    }
}

/// The user-facing form of an [`AdminError`]; internal failures stay errors for the log.
pub fn app_error(error: AdminError) -> Result<AppError, anyhow::Error> {
    Ok(match error {
        AdminError::Forbidden => AppError::Forbidden,
        AdminError::InvalidName(_) => AppError::InvalidUserName,
        AdminError::InvalidRoles(_) => AppError::InvalidRoles,
        AdminError::RoleNotHeld(role) => AppError::RoleNotHeld { role },
        AdminError::FieldTooLong { .. } => AppError::FieldTooLong,
        AdminError::InvalidPassword(PasswordError::TooShort { .. }) => AppError::PasswordTooShort,
        AdminError::InvalidPassword(PasswordError::TooLong { .. }) => AppError::PasswordTooLong,
        AdminError::NameTaken => AppError::NameTaken,
        AdminError::NotFound => AppError::NotFound,
        AdminError::Conflict => AppError::Conflict,
        AdminError::LastAdmin => AppError::LastAdmin,
        AdminError::ConfirmationMismatch => AppError::ConfirmationMismatch,
        AdminError::HiddenCharacters => AppError::HiddenCharacters,
        AdminError::InvalidEmail => AppError::InvalidEmail,
        AdminError::Internal(IdentityError::Hash(HashError::Busy { retry_after })) => {
            AppError::Busy {
                retry_after_secs: crate::handlers::whole_seconds(retry_after),
            }
        }
        AdminError::Internal(error) => return Err(error.into()),
    })
}

fn profile(form: &Form) -> UserProfile {
    UserProfile {
        display_name: form.get("display_name").to_owned(),
        email: form.get("email").to_owned(),
        roles: roles_of(form),
    }
}

/// The roles a user form sends: one `roles` field per box ticked (a shell or an older
/// page may send one field with names separated by spaces or commas).
fn roles_of(form: &Form) -> Vec<String> {
    form.all("roles")
        .flat_map(|field| field.split(|c: char| c == ',' || c.is_whitespace()))
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect()
}

fn password_choice(form: &Form) -> PasswordChoice {
    if form.get("password_mode") == "typed" {
        PasswordChoice::Typed(form.get("password").to_owned())
    } else {
        PasswordChoice::Generate
    }
}

pub fn user_row(user: &UserRecord) -> UserRow {
    UserRow {
        name: user.name.to_string(),
        display_name: user.display_name.clone(),
        email: user.email.clone(),
        roles: user.roles.iter().map(|r| r.to_string()).collect(),
        tenant: user.tenant.clone(),
        disabled: user.disabled,
        must_change_password: user.must_change_password,
        last_sign_in: user.last_sign_in_at.map(format_instant),
        version: user.version,
    }
}
