//! The OIDC issuer's HTTP surface (SPEC §4): discovery, JWKS, the authorization page,
//! the token and revocation endpoints, and the kubeconfig download. The rules live in
//! `banlieue_identity::oidc`.

use app::{AppError, AuthorizationProblem, AuthorizeView, Page, PageData, PageState, paths};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use banlieue_identity::oidc::{
    AuthorizationRequest, AuthorizeRefusal, BearerError, OAuthError, OAuthErrorCode, Prompt,
    UntrustedReason, kubeconfig_yaml,
};
use banlieue_identity::{SessionGrant, SignInAttempt, SignInError};
use time::OffsetDateTime;
use tower_sessions::Session;

use crate::AppState;
use crate::form::Form;
use crate::handlers::{page_state, sign_in_refusal, start_session};
use crate::middleware::{CurrentUser, client_ip, error_page, internal_error};
use crate::pages;
use crate::session::AUTH_KEY;

/// `GET /.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4).
pub async fn discovery(State(app): State<AppState>) -> Response {
    json_with_cache(
        StatusCode::OK,
        app.issuer.discovery().to_string(),
        "no-cache",
    )
}

/// `GET /oidc/jwks`: the published signing keys (RFC 7517 §5).
pub async fn jwks(State(app): State<AppState>) -> Response {
    match app.issuer.jwks(OffsetDateTime::now_utc()).await {
        Ok(keys) => json_with_cache(StatusCode::OK, keys.to_string(), "no-cache"),
        Err(error) => {
            tracing::error!(%error, "cannot read the signing keys");
            json_no_cache(
                StatusCode::SERVICE_UNAVAILABLE,
                &OAuthError::new(OAuthErrorCode::ServerError, "signing keys unavailable").to_json(),
            )
        }
    }
}

/// `GET /oidc/authorize` (RFC 6749 §4.1.1): validates the request, then shows the
/// sign-in card, or the confirmation to a signed-in person (unless `prompt=login` or
/// `max_age` asks for a fresh sign-in).
pub async fn authorize_page(
    State(app): State<AppState>,
    session: Session,
    request: Request,
) -> Response {
    let state = page_state(request.extensions());
    // Strictly, as the posted form: a value that is not UTF-8 is refused, not altered.
    let params = match Form::parse(request.uri().query().unwrap_or_default().as_bytes()) {
        Ok(query) => query.pairs().to_vec(),
        Err(error) => return error_page(state.look(), &error),
    };
    let user = request
        .extensions()
        .get::<CurrentUser>()
        .map(|c| c.0.clone());
    let authorization = match AuthorizationRequest::parse(&params) {
        Ok(authorization) => authorization,
        Err(refusal) => return refused(&app, state, &refusal),
    };
    if authorization.prompt == Prompt::None {
        let code = if user.is_some() {
            OAuthErrorCode::ConsentRequired
        } else {
            OAuthErrorCode::LoginRequired
        };
        let refusal = authorization.refuse(code, "this issuer always shows a page");
        return refused(&app, state, &refusal);
    }
    if user.as_ref().is_some_and(|u| u.must_change_password) {
        return change_password_first(&authorization);
    }
    let now = OffsetDateTime::now_utc();
    let sign_in = match &user {
        None => true,
        Some(_) => authorization.requires_sign_in(session_auth_time(&session, now).await, now),
    };
    render(&app, state, &authorization, sign_in, None).await
}

/// `POST /oidc/authorize`: the sign-in card (`user_name`, `password`) or the confirmation
/// (`decision` = `allow` | `deny`), each with the request's fields. Success redirects to
/// the client with a code; cancelling with `access_denied`.
pub async fn authorize_submit(
    State(app): State<AppState>,
    session: Session,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let state = page_state(&parts.extensions);
    let form = match Form::read(body).await {
        Ok(form) => form,
        Err(error) => return error_page(state.look(), &error),
    };
    let oauth_fields: Vec<(String, String)> = form
        .pairs()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "user_name" | "password" | "decision"))
        .cloned()
        .collect();
    let authorization = match AuthorizationRequest::parse(&oauth_fields) {
        Ok(authorization) => authorization,
        Err(refusal) => return refused(&app, state, &refusal),
    };
    let now = OffsetDateTime::now_utc();
    let signed_in = parts.extensions.get::<CurrentUser>().map(|c| c.0.clone());
    let credentials_posted = form.pairs().iter().any(|(name, _)| name == "user_name");
    let (user, auth_time) = match signed_in {
        Some(user) if !credentials_posted => {
            let auth_time = session_auth_time(&session, now).await;
            if authorization.requires_sign_in(auth_time, now) {
                return render(&app, state, &authorization, true, None).await;
            }
            if form.get("decision") != "allow" {
                let refusal = authorization.refuse(
                    OAuthErrorCode::AccessDenied,
                    "the person declined the request",
                );
                return refused(&app, state, &refusal);
            }
            (user, auth_time)
        }
        _ if !credentials_posted => {
            return render(&app, state, &authorization, true, None).await;
        }
        _ => {
            let user_name = form.get("user_name").trim().to_owned();
            let attempt = SignInAttempt {
                user_name: &user_name,
                password: form.get("password"),
                source: client_ip(&parts.extensions),
            };
            match app.accounts.sign_in(attempt).await {
                Ok(user) => {
                    if let Err(error) = start_session(&app, &session, &user, &parts, now).await {
                        return internal_error(state.look(), &error);
                    }
                    (user, now)
                }
                Err(SignInError::Internal(error)) => {
                    return internal_error(state.look(), &error.into());
                }
                Err(error) => {
                    let values = pages::typed(&[("user_name", &user_name)]);
                    let feedback = (sign_in_refusal(error), values);
                    return render(&app, state, &authorization, true, Some(feedback)).await;
                }
            }
        }
    };
    if user.must_change_password {
        return change_password_first(&authorization);
    }
    match app
        .issuer
        .issue_code(&authorization, &user, auth_time, now)
        .await
    {
        Ok(location) => Redirect::to(&location).into_response(),
        Err(refusal) => refused(&app, state, &refusal),
    }
}

/// When the browser's session authenticated (its sign-in), or `now` for a session that
/// carries none.
async fn session_auth_time(session: &Session, now: OffsetDateTime) -> OffsetDateTime {
    session
        .get::<SessionGrant>(AUTH_KEY)
        .await
        .ok()
        .flatten()
        .map_or(now, |grant| grant.auth_time())
}

/// `POST /oidc/token` (RFC 6749 §3.2): JSON, never cached (§5.1).
pub async fn token(State(app): State<AppState>, request: Request) -> Response {
    let source = client_ip(request.extensions());
    let form = match oauth_form(request).await {
        Ok(form) => form,
        Err(error) => return oauth_error(&error),
    };
    match app
        .issuer
        .token(&form, source, OffsetDateTime::now_utc())
        .await
    {
        Ok(tokens) => {
            let body = serde_json::to_value(&tokens).expect("token responses serialise");
            json_no_store(StatusCode::OK, &body)
        }
        Err(error) => oauth_error(&error),
    }
}

/// `POST /oidc/revoke` (RFC 7009 §2): 200 with an empty body when done or when the token
/// is unknown.
pub async fn revoke(State(app): State<AppState>, request: Request) -> Response {
    let source = client_ip(request.extensions());
    let form = match oauth_form(request).await {
        Ok(form) => form,
        Err(error) => return oauth_error(&error),
    };
    match app
        .issuer
        .revoke(&form, source, OffsetDateTime::now_utc())
        .await
    {
        Ok(()) => (StatusCode::OK, [(header::CACHE_CONTROL, "no-store")]).into_response(),
        Err(error) => oauth_error(&error),
    }
}

/// `GET /kubeconfig`: the kubeconfig with the `banlieue` exec plugin (no secret in it),
/// for a signed-in person with a built-in role or a bearer ID token of this issuer for the
/// console's audience (RFC 6750 §2.1; the CLI signs in first). A browser without a session
/// is sent to sign in; any other caller gets 401 with `WWW-Authenticate: Bearer`.
pub async fn kubeconfig(State(app): State<AppState>, request: Request) -> Response {
    let look = page_state(request.extensions()).look();
    let Some(cluster) = &app.config.cluster else {
        return error_page(look, &AppError::NoClusterConfigured);
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let signed_in = request.extensions().get::<CurrentUser>().map(|c| &c.0);
    let allowed = match (bearer, signed_in) {
        (Some(token), _) => match app
            .issuer
            .verify_console_token(token, OffsetDateTime::now_utc())
            .await
        {
            Ok(_) => Ok(()),
            Err(BearerError::InvalidToken(why)) => {
                return bearer_challenge(Some(("invalid_token", &why)));
            }
            Err(BearerError::Forbidden(why)) => Err((StatusCode::FORBIDDEN, why.to_owned())),
            Err(BearerError::Internal(why)) => {
                return internal_error(look, &anyhow::anyhow!(why));
            }
        },
        (None, Some(user)) if user.must_change_password => {
            return Redirect::to(paths::CHANGE_PASSWORD).into_response();
        }
        (None, Some(user)) if !holds_builtin_role(user) => {
            return error_page(look, &AppError::Forbidden);
        }
        (None, Some(_)) => Ok(()),
        (None, None) if accepts_html(&request) => {
            return Redirect::to(paths::SIGN_IN).into_response();
        }
        (None, None) => return bearer_challenge(None),
    };
    if let Err((status, why)) = allowed {
        return (status, [(header::CACHE_CONTROL, "no-store")], why).into_response();
    }
    let yaml = kubeconfig_yaml(cluster, &app.config.external_url);
    (
        [
            (header::CONTENT_TYPE, "application/yaml; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"banlieue.kubeconfig\"",
            ),
            (header::CACHE_CONTROL, "no-store"),
        ],
        yaml,
    )
        .into_response()
}

/// Viewer or better: each built-in role includes viewer.
fn holds_builtin_role(user: &banlieue_store::UserRecord) -> bool {
    user.roles
        .iter()
        .any(|role| banlieue_domain::BuiltinRole::parse(role.as_str()).is_some())
}

fn accepts_html(request: &Request) -> bool {
    request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// The token of an `Authorization: Bearer <token>` header; the scheme's case does not
/// matter (RFC 7235 §2.1).
pub(crate) fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// `401` asking for a bearer token (RFC 6750 §3), with the error when one was refused.
fn bearer_challenge(error: Option<(&str, &str)>) -> Response {
    let body = match error {
        None => "sign in first: `banlieue auth kubeconfig --issuer <this console>` does".to_owned(),
        Some((_, description)) => description.to_owned(),
    };
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(header::CACHE_CONTROL, "no-store")],
        body,
    )
        .into_response();
    if let Some(value) = bearer_challenge_header(error) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The RFC 6750 §3 `WWW-Authenticate` value: the realm, and the error code and its
/// description (quotes and backslashes replaced) when a token was refused.
pub(crate) fn bearer_challenge_header(error: Option<(&str, &str)>) -> Option<HeaderValue> {
    let challenge = match error {
        None => "Bearer realm=\"banlieue-console\"".to_owned(),
        Some((code, description)) => format!(
            "Bearer realm=\"banlieue-console\", error=\"{code}\", error_description=\"{}\"",
            description.replace(['"', '\\'], "'")
        ),
    };
    HeaderValue::from_str(&challenge).ok()
}

async fn render(
    app: &AppState,
    mut state: PageState,
    authorization: &AuthorizationRequest,
    sign_in: bool,
    feedback: Option<(AppError, std::collections::BTreeMap<String, String>)>,
) -> Response {
    let mut switch = authorization.form_fields();
    switch.retain(|(name, _)| *name != "prompt");
    switch.push(("prompt", "login".to_owned()));
    state.page = Page::Authorize;
    state.data = PageData::Authorize(AuthorizeView {
        fields: authorization
            .form_fields()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
        redirect_origin: authorization.redirect_origin(),
        sign_in,
        switch_account: format!("{}?{}", paths::AUTHORIZE, encode_query(&switch)),
    });
    match feedback {
        Some((error, values)) => pages::with_feedback(app, state, error, values).await,
        None => pages::render(app, state, StatusCode::OK).await,
    }
}

fn refused(app: &AppState, state: PageState, refusal: &AuthorizeRefusal) -> Response {
    match refusal.location(&app.config.external_url) {
        Some(location) => Redirect::to(&location).into_response(),
        None => {
            let AuthorizeRefusal::Untrusted(reason) = refusal else {
                unreachable!("only untrusted refusals have no location")
            };
            let problem = match reason {
                UntrustedReason::UnknownClient => AuthorizationProblem::UnknownClient,
                UntrustedReason::UnregisteredRedirectUri => {
                    AuthorizationProblem::UnregisteredRedirectUri
                }
                UntrustedReason::MalformedState => AuthorizationProblem::MalformedState,
            };
            error_page(
                state.look(),
                &AppError::InvalidAuthorizationRequest { problem },
            )
        }
    }
}

/// Sends a person who must change their password to the change first, then back here
/// (SPEC §4: no token before the change).
fn change_password_first(authorization: &AuthorizationRequest) -> Response {
    let back = format!(
        "{}?{}",
        paths::AUTHORIZE,
        encode_query(&authorization.form_fields())
    );
    let next = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("next", &back)
        .finish();
    Redirect::to(&format!("{}?{next}", paths::CHANGE_PASSWORD)).into_response()
}

async fn oauth_form(request: Request) -> Result<Vec<(String, String)>, OAuthError> {
    let is_form = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Err(OAuthError::new(
            OAuthErrorCode::InvalidRequest,
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    Form::read(request.into_body())
        .await
        .map(|form| form.pairs().to_vec())
        .map_err(|_| {
            OAuthError::new(
                OAuthErrorCode::InvalidRequest,
                "the body is not a valid UTF-8 form of at most 16 KiB",
            )
        })
}

/// The error as JSON; a 401 carries the `WWW-Authenticate` challenge RFC 6749 §5.2 asks
/// for (public clients authenticate with their `client_id` in the body).
fn oauth_error(error: &OAuthError) -> Response {
    let status = StatusCode::from_u16(error.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut response = json_no_store(status, &error.to_json());
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"banlieue-console\""),
        );
    }
    response
}

fn json_no_cache(status: StatusCode, body: &serde_json::Value) -> Response {
    json_with_cache(status, body.to_string(), "no-cache")
}

fn json_no_store(status: StatusCode, body: &serde_json::Value) -> Response {
    let mut response = json_with_cache(status, body.to_string(), "no-store");
    response
        .headers_mut()
        .insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

fn json_with_cache(status: StatusCode, body: String, cache: &'static str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, cache),
        ],
        body,
    )
        .into_response()
}

fn encode_query(pairs: &[(&'static str, String)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}
