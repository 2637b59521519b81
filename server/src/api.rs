//! The JSON API for brokers and automation (`/api/v1`, SPEC §7): bearer tokens only, never
//! a cookie (so there is no cross-site request to forge), and errors as RFC 9457 problem
//! details (`application/problem+json`).
//!
//! A bearer is an ID token of the console's own issuer for the audience
//! `banlieue-console` (`Issuer::verify_console_token`), or a tenant's ID token
//! (`tenants::TenantVerifier`); the token's unverified `iss` only says which of the two
//! verifies it.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use banlieue_identity::oidc::BearerError;
use serde::Serialize;
use time::OffsetDateTime;

use crate::routes::AppState;

/// Where the API is served.
pub const PREFIX: &str = "/api/v1";

/// The API's routes, below [`PREFIX`]; served outside the pages' session, same-origin and
/// access layers.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/whoami", get(whoami))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
}

/// An RFC 9457 problem: `type` stays `about:blank`, so `title` is the status's phrase.
#[derive(Debug, Serialize)]
struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
}

fn problem(status: StatusCode, detail: impl Into<String>) -> Response {
    let body = Problem {
        kind: "about:blank",
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail: detail.into(),
    };
    (
        status,
        [
            (header::CONTENT_TYPE, "application/problem+json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        serde_json::to_string(&body).unwrap_or_default(),
    )
        .into_response()
}

/// A 401 problem with the RFC 6750 challenge (`invalid_token` when a token was sent).
fn unauthorized(error: Option<&str>) -> Response {
    let detail = error.map_or_else(
        || "send an ID token as `Authorization: Bearer <token>`".to_owned(),
        str::to_owned,
    );
    let mut response = problem(StatusCode::UNAUTHORIZED, detail);
    if let Some(value) = crate::oidc::bearer_challenge_header(error.map(|e| ("invalid_token", e))) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

async fn not_found() -> Response {
    problem(StatusCode::NOT_FOUND, "no such API endpoint")
}

async fn method_not_allowed() -> Response {
    problem(
        StatusCode::METHOD_NOT_ALLOWED,
        "this endpoint does not take that method",
    )
}

/// Who called: one of the console's users, or a tenant's person.
enum Caller {
    Console(banlieue_store::UserRecord),
    Tenant(tenants::TenantIdentity),
}

/// The caller, from the bearer token in `headers`.
///
/// Errors: the problem response to send (401 without or with an invalid token, 403 for a
/// person who may not act, 503 when the console cannot decide).
async fn caller(app: &AppState, headers: &HeaderMap) -> Result<Caller, Response> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::oidc::bearer_token)
        .ok_or_else(|| unauthorized(None))?;
    let issuer =
        tenants::unverified_issuer(token).map_err(|e| unauthorized(Some(&e.to_string())))?;
    if issuer == app.config.external_url {
        return match app
            .issuer
            .verify_console_token(token, OffsetDateTime::now_utc())
            .await
        {
            Ok(user) => Ok(Caller::Console(user)),
            Err(BearerError::InvalidToken(why)) => Err(unauthorized(Some(&why))),
            Err(BearerError::Forbidden(why)) => Err(problem(StatusCode::FORBIDDEN, why)),
            Err(BearerError::Internal(why)) => {
                tracing::error!(error = %why, "verifying a console bearer token");
                Err(problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the console cannot read its signing keys",
                ))
            }
        };
    }
    let Some(verifier) = &app.tenants else {
        return Err(unauthorized(Some(&format!(
            "the issuer {issuer:?} is not this console's, and it has no tenants"
        ))));
    };
    match verifier.verify(token, std::time::Instant::now()).await {
        Ok(identity) => Ok(Caller::Tenant(identity)),
        Err(error) => {
            tracing::info!(%error, "a tenant bearer token was refused");
            Err(match error.status() {
                401 => unauthorized(Some(&error.to_string())),
                403 => problem(StatusCode::FORBIDDEN, error.to_string()),
                _ => problem(StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
            })
        }
    }
}

/// `GET /api/v1/whoami`'s answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WhoAmI {
    /// `console` (a console user) or `tenant`.
    source: &'static str,
    /// The tenant's id, for a tenant's person.
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    /// The console user's name, or the tenant's username claim.
    username: String,
    /// The roles held.
    roles: Vec<String>,
    /// The Kubernetes user the console acts as for them.
    kubernetes_user: String,
    /// The Kubernetes groups the console acts with.
    kubernetes_groups: Vec<String>,
    /// Where a tenant's person may claim (absent for console users: where RBAC allows).
    #[serde(skip_serializing_if = "Option::is_none")]
    namespaces: Option<Vec<String>>,
}

/// `GET /api/v1/whoami`: who the bearer token names, as the console acts for them.
async fn whoami(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let answer = match caller(&app, &headers).await {
        Err(response) => return response,
        Ok(Caller::Console(user)) => {
            let roles: Vec<String> = user.roles.iter().map(|r| r.as_str().to_owned()).collect();
            let identity = cluster::KubernetesIdentity::console(
                user.name.as_str(),
                roles.iter().map(String::as_str),
            );
            WhoAmI {
                source: "console",
                tenant: None,
                username: user.name.as_str().to_owned(),
                roles,
                kubernetes_user: identity.user,
                kubernetes_groups: identity.groups,
                namespaces: None,
            }
        }
        Ok(Caller::Tenant(person)) => {
            let identity = person.kubernetes_identity();
            WhoAmI {
                source: "tenant",
                username: person.username.clone(),
                roles: person.roles.iter().map(|r| r.as_str().to_owned()).collect(),
                kubernetes_user: identity.user,
                kubernetes_groups: identity.groups,
                namespaces: Some(person.namespaces.clone()),
                tenant: Some(person.tenant),
            }
        }
    };
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        serde_json::to_string(&answer).unwrap_or_default(),
    )
        .into_response()
}
