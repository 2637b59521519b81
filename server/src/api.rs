//! The JSON API for brokers and automation (`/api/v1`, SPEC §7): bearer tokens only, never
//! a cookie (so there is no cross-site request to forge), and errors as RFC 9457 problem
//! details (`application/problem+json`). Its OpenAPI 3.1 document (`/api/v1/openapi.json`)
//! is made from the handlers' `#[utoipa::path]` declarations and the types they answer
//! with, so the document and the routes are declared once, together.
//!
//! A bearer is an ID token of the console's own issuer for the audience
//! `banlieue-console` (`Issuer::verify_console_token`), or a tenant's ID token
//! (`tenants::TenantVerifier`); the token's unverified `iss` only says which of the two
//! verifies it.

use std::borrow::Cow;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use banlieue_identity::oidc::BearerError;
use cluster::crd::ClaimSubject;
use futures::StreamExt;
use kube::CustomResourceExt;
use serde::{Deserialize, Serialize};
use services::{Authenticator, ClaimScope, CreateClaim, Principal, ServiceError};
use time::OffsetDateTime;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ObjectBuilder, RefOr, Schema};
use utoipa::{IntoParams, OpenApi, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::routes::AppState;

/// Where the API is served.
pub const PREFIX: &str = "/api/v1";

/// The API's routes, below [`PREFIX`], and `GET /openapi.json`, their document; served
/// outside the pages' session, same-origin and access layers.
pub fn router() -> Router<AppState> {
    let (routes, openapi) = OpenApiRouter::with_openapi(ApiDocument::openapi())
        .routes(routes!(whoami))
        .routes(routes!(pools))
        .routes(routes!(list_claims, create_claim))
        .routes(routes!(read_claim, release_claim))
        .split_for_parts();
    let document: Arc<str> = document(openapi).into();
    routes
        .route(
            "/openapi.json",
            get(move || {
                let document = document.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        document.to_string(),
                    )
                }
            }),
        )
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
}

/// The OpenAPI document's frame; the paths come from the handlers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "banlieue-console API",
        description = "Claims of sandbox VMs for brokers and automation. Every request carries \
            an ID token as `Authorization: Bearer <token>`: one of this console's issuer for \
            the audience `banlieue-console`, or a tenant's. Errors are RFC 9457 problems."
    ),
    servers((url = "/api/v1")),
    components(responses(Problem)),
    modifiers(&BearerTokens),
    security(("bearer" = []))
)]
struct ApiDocument;

/// The `bearer` security scheme every operation requires (RFC 6750).
struct BearerTokens;

impl utoipa::Modify for BearerTokens {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .bearer_format("JWT")
                        .build(),
                ),
            );
    }
}

/// The name of the claim object's schema in the document.
const CLAIM_SCHEMA: &str = "VirtualMachineClaim";

/// A `banlieue.io/v1alpha1` VirtualMachineClaim as Kubernetes has it. Only a name in
/// the handlers' declarations: [`document`] puts in the CRD's own schema.
struct ClaimObject;

impl PartialSchema for ClaimObject {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().into()
    }
}

impl ToSchema for ClaimObject {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed(CLAIM_SCHEMA)
    }
}

/// The document as JSON, the claim's schema being the CRD's `openAPIV3Schema`.
fn document(openapi: utoipa::openapi::OpenApi) -> String {
    let mut document = serde_json::to_value(openapi).expect("the OpenAPI document is JSON");
    let crd = cluster::crd::VirtualMachineClaim::crd();
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|version| version.schema.as_ref())
        .and_then(|validation| validation.open_api_v3_schema.as_ref())
        .map(|schema| serde_json::to_value(schema).expect("a CRD schema is JSON"));
    if let Some(schema) = schema {
        document["components"]["schemas"][CLAIM_SCHEMA] = schema;
    }
    document.to_string()
}

/// An RFC 9457 problem: `type` stays `about:blank`, so `title` is the status's phrase.
#[derive(Debug, Serialize, ToSchema, utoipa::ToResponse)]
#[response(
    description = "An RFC 9457 problem: the status, and what went wrong in `detail`",
    content_type = "application/problem+json"
)]
struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    /// The request field a 422 is about (an extension member, RFC 9457 §3.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
}

fn problem(status: StatusCode, detail: impl Into<String>) -> Response {
    problem_with(status, detail, None)
}

fn problem_with(status: StatusCode, detail: impl Into<String>, field: Option<String>) -> Response {
    let body = Problem {
        kind: "about:blank",
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail: detail.into(),
        field,
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
async fn caller(
    app: &AppState,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Caller, Response> {
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
        Err(refusal) => Err(refused_tenant_token(app, &refusal, extensions).await),
    }
}

/// The answer to a refused tenant token: one fixed message per status, so a caller
/// learns nothing about the tenants or their providers from it; the reason goes to the
/// log and the audit log (`tenant.token`, the tenant it was held to as the target, the
/// refusal's code as the result), and the count to `/metrics`.
async fn refused_tenant_token(
    app: &AppState,
    refusal: &tenants::Refusal,
    extensions: &Extensions,
) -> Response {
    let error = &refusal.error;
    let tenant = refusal
        .tenant
        .as_deref()
        .unwrap_or(tenants::metrics::NO_TENANT);
    tracing::info!(%error, tenant, "a tenant bearer token was refused");
    // The reason may quote the token (its issuer, a claim): no control characters, and
    // no more than a line of it.
    let reason: String = error
        .to_string()
        .chars()
        .filter(|c| !c.is_control())
        .take(REFUSAL_REASON_CHARS)
        .collect();
    app.accounts
        .audit_event(
            "-",
            "tenant.token",
            tenant,
            crate::middleware::client_ip(extensions),
            error.code(),
            &reason,
        )
        .await;
    match error.status() {
        401 => unauthorized(Some(TENANT_TOKEN_INVALID)),
        403 => problem(StatusCode::FORBIDDEN, TENANT_SUSPENDED),
        _ => problem(StatusCode::SERVICE_UNAVAILABLE, TENANT_TOKENS_UNAVAILABLE),
    }
}

/// The detail of every 401 for a tenant token.
const TENANT_TOKEN_INVALID: &str = "the bearer token is not a valid ID token of a tenant";
/// The detail of every 403 for a tenant token.
const TENANT_SUSPENDED: &str = "the token's tenant is suspended";
/// The detail of every 503 for a tenant token.
const TENANT_TOKENS_UNAVAILABLE: &str = "tenant tokens cannot be verified now; try again later";
/// How much of a refusal's reason the audit log keeps.
const REFUSAL_REASON_CHARS: usize = 256;

/// `GET /api/v1/whoami`'s answer.
#[derive(Debug, Serialize, ToSchema)]
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
#[utoipa::path(
    get,
    path = "/whoami",
    responses(
        (status = 200, description = "Who the token names, as the console acts for them", body = WhoAmI),
        (status = 401, response = Problem),
        (status = 403, response = Problem),
        (status = 500, response = Problem),
        (status = 503, response = Problem),
    )
)]
async fn whoami(
    State(app): State<AppState>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    let answer = match caller(&app, &headers, &extensions).await {
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
                namespaces: Some(person.namespaces.to_vec()),
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

/// A JSON answer that no cache keeps.
fn json(status: StatusCode, body: &impl Serialize) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        serde_json::to_string(body).unwrap_or_default(),
    )
        .into_response()
}

/// A use case's refusal as its problem: 403, 404, 409, 422 (with the field), or 503
/// (no cluster; the cluster unavailable, its cause logged under a correlation id).
fn service_problem(error: ServiceError) -> Response {
    match error {
        ServiceError::Forbidden { reason, .. } => problem(StatusCode::FORBIDDEN, reason),
        ServiceError::NotFound { reason, .. } => problem(StatusCode::NOT_FOUND, reason),
        ServiceError::Conflict { reason, .. } => problem(StatusCode::CONFLICT, reason),
        ServiceError::Invalid { field, reason, .. } => {
            problem_with(StatusCode::UNPROCESSABLE_ENTITY, reason, Some(field))
        }
        ServiceError::NoCluster => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "this console has no Kubernetes cluster configured",
        ),
        ServiceError::Unavailable { source } => {
            let correlation_id = crate::middleware::correlation_id();
            tracing::error!(%correlation_id, error = %source, "the cluster is unavailable");
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the cluster did not answer; reference {correlation_id}"),
            )
        }
    }
}

/// The principal the use cases act for: the bearer token's console user or tenant
/// person, from the request's client address.
///
/// Errors: as [`caller`].
async fn principal(
    app: &AppState,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Principal, Response> {
    let address = crate::middleware::client_ip(extensions);
    Ok(match caller(app, headers, extensions).await? {
        Caller::Console(user) => Principal::local(user, Authenticator::BearerToken, address),
        Caller::Tenant(person) => Principal::tenant(person, Authenticator::BearerToken, address),
    })
}

/// The bearer token's principal ([`principal`]); a request without one is answered
/// with its problem before the handler runs.
struct Bearer(Principal);

impl FromRequestParts<AppState> for Bearer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, Response> {
        principal(app, &parts.headers, &parts.extensions)
            .await
            .map(Self)
    }
}

/// A query string read into `T` (which refuses unknown parameters); one that does not
/// fit is a 400 problem.
struct StrictQuery<T>(T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> FromRequestParts<S> for StrictQuery<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(query)| Self(query))
            .map_err(|rejection| problem(StatusCode::BAD_REQUEST, rejection.body_text()))
    }
}

/// A pool, as `GET /api/v1/pools` lists it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct Pool {
    namespace: String,
    name: String,
    /// Ready members no claim holds.
    ready: u32,
    /// Members bound to claims.
    claimed: u32,
    /// The most members the pool may have.
    max: u32,
    /// Whether Kubernetes lets the caller create claims in the pool's namespace.
    can_claim: bool,
}

/// A list answer, as Kubernetes lists: `{"items": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
struct Items<T> {
    items: Vec<T>,
}

/// `GET /api/v1/pools`: the pools the caller may list (as the dashboard shows them).
#[utoipa::path(
    get,
    path = "/pools",
    responses(
        (status = 200, description = "The pools the caller may list", body = Items<Pool>),
        (status = 401, response = Problem),
        (status = 403, response = Problem),
        (status = 500, response = Problem),
        (status = 503, response = Problem),
    )
)]
async fn pools(State(app): State<AppState>, Bearer(who): Bearer) -> Response {
    match app.console.claimable_pools(&who).await {
        Ok(rows) => json(
            StatusCode::OK,
            &Items {
                items: rows
                    .into_iter()
                    .map(|row| Pool {
                        namespace: row.namespace,
                        name: row.name,
                        ready: row.ready,
                        claimed: row.claimed,
                        max: row.max,
                        can_claim: row.can_claim,
                    })
                    .collect(),
            },
        ),
        Err(error) => service_problem(error),
    }
}

/// The query of `GET /api/v1/claims`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListClaims {
    /// `own` (the default) or `everyone` (operators and admins).
    #[serde(default)]
    #[param(pattern = "^(own|everyone)$")]
    scope: Option<String>,
}

/// `GET /api/v1/claims[?scope=everyone]`: the caller's claims (or everyone's), as
/// Kubernetes has them (`banlieue.io/v1alpha1` VirtualMachineClaims).
#[utoipa::path(
    get,
    path = "/claims",
    params(ListClaims),
    responses(
        (status = 200, description = "The caller's claims, or everyone's", body = Items<ClaimObject>),
        (status = 400, response = Problem),
        (status = 401, response = Problem),
        (status = 403, response = Problem),
        (status = 500, response = Problem),
        (status = 503, response = Problem),
    )
)]
async fn list_claims(
    State(app): State<AppState>,
    Bearer(who): Bearer,
    StrictQuery(query): StrictQuery<ListClaims>,
) -> Response {
    let scope = match query.scope.as_deref() {
        None | Some("own") => ClaimScope::Own,
        Some("everyone") => ClaimScope::Everyone,
        Some(other) => {
            return problem(
                StatusCode::BAD_REQUEST,
                format!("scope {other:?} is neither own nor everyone"),
            );
        }
    };
    match app.console.claims(&who, scope).await {
        Ok(items) => json(StatusCode::OK, &Items { items }),
        Err(error) => service_problem(error),
    }
}

/// The body of `POST /api/v1/claims`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NewClaim {
    /// The pool's namespace.
    #[schema(example = "demo")]
    namespace: String,
    /// The pool's name.
    #[schema(example = "sandbox")]
    pool: String,
    /// One of the lifetimes the console offers, in seconds.
    #[schema(example = 900)]
    ttl_seconds: u32,
    /// Whom the sandbox is for, when a broker claims for someone else; absent: the
    /// caller at this console's issuer.
    #[serde(default)]
    subject: Option<ClaimSubject>,
}

/// `POST /api/v1/claims`: claims a sandbox (as the dashboard's Claim button does); 201
/// with the claim and its `Location`. The claim is Pending until the claim controller
/// binds it: poll `GET` on the `Location` until `status.phase` is `Bound`.
#[utoipa::path(
    post,
    path = "/claims",
    request_body(content = NewClaim, content_type = "application/json"),
    responses(
        (status = 201, description = "The claim, Pending until it is bound", body = ClaimObject,
            headers(("Location" = String, description = "The claim's address in this API"))),
        (status = 400, response = Problem),
        (status = 401, response = Problem),
        (status = 403, response = Problem),
        (status = 404, response = Problem),
        (status = 409, response = Problem),
        (status = 415, response = Problem),
        (status = 422, response = Problem),
        (status = 500, response = Problem),
        (status = 503, response = Problem),
    )
)]
async fn create_claim(
    State(app): State<AppState>,
    Bearer(who): Bearer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return problem(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the claim as application/json",
        );
    }
    // An object only: serde would also read a struct from an array of its fields.
    let new = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&body)
        .and_then(|object| serde_json::from_value::<NewClaim>(object.into()));
    let new = match new {
        Ok(new) => new,
        Err(error) => {
            return problem(
                StatusCode::BAD_REQUEST,
                format!("the body is not a claim request: {error}"),
            );
        }
    };
    let namespace = new.namespace.clone();
    let command = CreateClaim {
        namespace: new.namespace,
        pool: new.pool,
        ttl_seconds: Some(new.ttl_seconds),
        subject: new.subject,
    };
    let name = match app.console.create_claim(&who, command).await {
        Ok(name) => name,
        Err(error) => return service_problem(error),
    };
    let location = format!("{PREFIX}/claims/{namespace}/{name}");
    let mut response = match app.console.claim_object(&who, &namespace, &name).await {
        Ok(Some(claim)) => json(StatusCode::CREATED, &claim),
        Ok(None) => problem(
            StatusCode::NOT_FOUND,
            "the claim was made but is already gone",
        ),
        Err(error) => service_problem(error),
    };
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// The query of `GET /api/v1/claims/{namespace}/{name}`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ReadClaim {
    /// Stream the claim's changes instead of answering once.
    #[serde(default)]
    watch: bool,
}

/// `GET /api/v1/claims/{namespace}/{name}`: one claim as Kubernetes has it, read as the
/// caller; 404 once it is gone. With `?watch=true`, its changes instead, as Kubernetes
/// watches send them: one JSON object per line, `{"type": "ADDED" | "MODIFIED" |
/// "DELETED", "object": <claim>}`, ending after `DELETED` or when the bearer token
/// expires (watch again with a fresh one).
#[utoipa::path(
    get,
    path = "/claims/{namespace}/{name}",
    params(
        ("namespace" = String, Path, description = "The claim's namespace"),
        ("name" = String, Path, description = "The claim's name"),
        ReadClaim,
    ),
    responses(
        (status = 200, description = "The claim; with `watch=true`, its changes, one watch event (`{\"type\", \"object\"}`) per line", body = ClaimObject),
        (status = 400, response = Problem),
        (status = 401, response = Problem),
        (status = 403, response = Problem),
        (status = 404, response = Problem),
        (status = 500, response = Problem),
        (status = 503, response = Problem),
    )
)]
async fn read_claim(
    State(app): State<AppState>,
    Bearer(who): Bearer,
    headers: HeaderMap,
    Path((namespace, name)): Path<(String, String)>,
    StrictQuery(query): StrictQuery<ReadClaim>,
) -> Response {
    if query.watch {
        return watch_claim(&app, who, &headers, &namespace, &name).await;
    }
    match app.console.claim_object(&who, &namespace, &name).await {
        Ok(Some(claim)) => json(StatusCode::OK, &claim),
        Ok(None) => problem(StatusCode::NOT_FOUND, "no such claim"),
        Err(error) => service_problem(error),
    }
}

/// `DELETE /api/v1/claims/{namespace}/{name}`: releases the claim (as the Release
/// button does); 202, as the claim stays `Releasing` until its VM is gone.
#[utoipa::path(
    delete,
    path = "/claims/{namespace}/{name}",
    params(
        ("namespace" = String, Path, description = "The claim's namespace"),
        ("name" = String, Path, description = "The claim's name"),
    ),
    responses(
        (status = 202, description = "Releasing: the claim is gone once its VM is"),
        (status = 401, response = Problem),
        (status = 403, response = Problem),
        (status = 404, response = Problem),
        (status = 409, response = Problem),
        (status = 500, response = Problem),
        (status = 503, response = Problem),
    )
)]
async fn release_claim(
    State(app): State<AppState>,
    Bearer(who): Bearer,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    match app.console.release_claim(&who, &namespace, &name).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(error) => service_problem(error),
    }
}

/// The caller of a watch, re-checked before every event: the bearer token must still
/// verify (unexpired, its user enabled), so the stream ends with it.
struct BearerViewer {
    app: AppState,
    token: String,
    source: std::net::IpAddr,
}

impl services::live::Viewer for BearerViewer {
    async fn current(&self) -> Option<Principal> {
        let user = self
            .app
            .issuer
            .verify_console_token(&self.token, OffsetDateTime::now_utc())
            .await
            .ok()?;
        Some(Principal::local(
            user,
            Authenticator::BearerToken,
            self.source,
        ))
    }
}

/// One line of a watch: a Kubernetes watch event.
#[derive(Debug, Serialize)]
struct WatchEvent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    object: &'a cluster::crd::VirtualMachineClaim,
}

/// The claim's changes for `who` as newline-delimited watch events, until it is deleted,
/// the token expires or the console shuts down.
async fn watch_claim(
    app: &AppState,
    who: Principal,
    headers: &HeaderMap,
    namespace: &str,
    name: &str,
) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::oidc::bearer_token)
        .unwrap_or_default()
        .to_owned();
    let viewer = BearerViewer {
        app: app.clone(),
        token,
        source: who.address(),
    };
    let snapshots = match app
        .console
        .claim_object_snapshots(&who, viewer, namespace, name)
        .await
    {
        Ok(snapshots) => snapshots,
        Err(error) => return service_problem(error),
    };
    // The first is ADDED; a deletion repeats the last state sent, and ends the stream.
    let event = |kind, claim: &cluster::crd::VirtualMachineClaim| {
        serde_json::to_string(&WatchEvent {
            kind,
            object: claim,
        })
        .map(|line| Bytes::from(line + "\n"))
    };
    let lines = futures::stream::unfold(
        (Box::pin(snapshots), None, false),
        move |(mut snapshots, last, deleted)| async move {
            if deleted {
                return None;
            }
            let revision = snapshots.next().await?;
            Some(match revision.0 {
                Some(claim) => {
                    let kind = if last.is_none() { "ADDED" } else { "MODIFIED" };
                    (event(kind, &claim), (snapshots, Some(claim), false))
                }
                None => {
                    let line = match &last {
                        Some(claim) => event("DELETED", claim),
                        None => Ok(Bytes::new()),
                    };
                    (line, (snapshots, last, true))
                }
            })
        },
    )
    .filter_map(|line| std::future::ready(line.ok().map(Ok::<_, std::convert::Infallible>)))
    .take_until(app.stopping.clone().cancelled_owned());
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        axum::body::Body::from_stream(lines),
    )
        .into_response()
}
