//! Request guards in the order they run: security headers, the same-origin check for
//! state-changing requests, then the session's user, language and page access rules.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use app::security::content_security_policy;
use app::{AppError, Locale, Look, Navigation, Page, PageState, Theme, paths};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use banlieue_domain::SignedInUser;
use banlieue_identity::oidc::endpoints;
use banlieue_store::UserRecord;
use services::{Authenticator, Principal};
use tower_sessions::Session;

use crate::AppState;
use crate::session::AUTH_KEY;
use banlieue_identity::SessionGrant;

/// The cookie remembering the chosen language.
pub const LOCALE_COOKIE: &str = "banlieue-lang";

/// The cookie remembering the chosen colour theme ([`app::Theme`]).
pub const THEME_COOKIE: &str = "banlieue-theme";

/// The signed-in user's record, for handlers (in the request extensions).
#[derive(Debug, Clone)]
pub struct CurrentUser(pub UserRecord);

/// Adds the security headers every response carries unless a handler set its own
/// (pages set a CSP with their nonce): CSP, no sniffing, no framing, no referrer leaks,
/// HSTS over https, and `no-store` for HTML (pages show personal data).
pub async fn security_headers(
    State(app): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        let policy = content_security_policy(None, None);
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_str(&policy).expect("ASCII policy"),
        );
    }
    let fixed = [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "permissions-policy",
        HeaderValue::from_static("camera=(), microphone=(), geolocation=(), payment=()"),
    );
    if app.config.https {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    let is_html = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if is_html && !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Refuses state-changing requests that a browser did not send from our own origin:
/// `Sec-Fetch-Site` must be `same-origin` (or `none`, a user-initiated navigation); when a
/// client sends no fetch metadata, `Origin` must be the external origin or match `Host`.
/// Requests with neither header are refused (OWASP CSRF cheat sheet, "Verifying Origin").
/// The OAuth token and revocation endpoints are exempt: they act on the code or token in
/// the request, never on cookies, and their clients are not browsers of our origin.
/// A refusal that carried a live session (the forged request CSRF is about) is audited
/// as that person, `request.cross-site` on `<method> <path>` with result `refused`; one
/// without names nobody, and a row for each would let anyone fill the log.
pub async fn same_origin(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) || path == endpoints::TOKEN
        || path == endpoints::REVOKE
    {
        return next.run(request).await;
    }
    if is_same_origin(
        request.headers(),
        &app.config.external_origin,
        app.config.external_url_configured,
    ) {
        next.run(request).await
    } else {
        let look = look_of(request.headers());
        tracing::warn!(path = %request.uri().path(), "cross-site request refused");
        audit_cross_site(&app, &request).await;
        error_page(look, &AppError::CrossSite)
    }
}

/// Audits a refused cross-site `request` as the person of its session, if it has a live
/// one ([`same_origin`]). The detail is where the browser said it came from. Not `async`
/// over the request itself, which is not `Sync`: what the row needs is taken first.
fn audit_cross_site(app: &AppState, request: &Request) -> impl Future<Output = ()> + Send + use<> {
    let source = client_ip(request.extensions());
    let session = request.extensions().get::<Session>().cloned();
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .chars()
            .take(200)
            .collect::<String>()
    };
    let detail = format!(
        "sec-fetch-site: {}, origin: {}",
        header("sec-fetch-site"),
        header("origin")
    );
    let target = format!("{} {}", request.method(), request.uri().path());
    let app = app.clone();
    async move {
        let Some(session) = session else {
            return;
        };
        let Ok(Some(grant)) = session.get::<SessionGrant>(AUTH_KEY).await else {
            return;
        };
        let Ok(Some(user)) = app.accounts.check_session(&grant, source).await else {
            return;
        };
        app.accounts
            .audit_cross_site(user.name.as_str(), &target, source, &detail)
            .await;
    }
}

/// `Host` counts only when no external URL was configured (a development default):
/// otherwise a rebound DNS name could pass `Origin: http://evil` with `Host: evil`.
fn is_same_origin(headers: &HeaderMap, external_origin: &str, configured: bool) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site")) {
        return matches!(site, "same-origin" | "none");
    }
    let Some(origin) = text(header::ORIGIN) else {
        return false;
    };
    if origin == external_origin {
        return true;
    }
    if configured {
        return false;
    }
    let host = text(header::HOST);
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| Some(authority) == host)
}

/// Loads the session's user (ending the session when the user was disabled, deleted or
/// `not_before` passed), negotiates the language, applies the page access rules, and puts
/// [`PageState`] and [`CurrentUser`] in the request extensions.
pub async fn session_user(
    State(app): State<AppState>,
    session: Session,
    mut request: Request,
    next: Next,
) -> Response {
    let locale = locale_of(request.headers());
    let theme = theme_of(request.headers());
    let source = client_ip(request.extensions());
    let user = match load_user(&app, &session, source).await {
        Ok(user) => user,
        Err(error) => return internal_error(Look { locale, theme }, &error),
    };
    match access(request.method(), request.uri().path(), user.as_ref()) {
        Access::Allow => {}
        // The page asked for is where the sign-in returns to.
        Access::Redirect(paths::SIGN_IN) if request.uri().path() != paths::DASHBOARD => {
            let asked = request.uri().path_and_query().map_or("/", |p| p.as_str());
            let next: String = url::form_urlencoded::byte_serialize(asked.as_bytes()).collect();
            return Redirect::to(&format!("{}?next={next}", paths::SIGN_IN)).into_response();
        }
        Access::Redirect(to) => return Redirect::to(to).into_response(),
        Access::Refuse(error) => return error_page(Look { locale, theme }, &error),
    }
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let page = Page::for_path(request.uri().path());
    // Asked only where a page with the header may answer (not for live streams or
    // assets), and not while the header offers no navigation.
    let with_header = !is_public(request.uri().path())
        && !request.uri().path().starts_with("/events/")
        && request.uri().path() != paths::SIGN_OUT;
    let nav = match &user {
        Some(user) if with_header && !user.must_change_password => {
            let who = Principal::local(user.clone(), Authenticator::Session, source);
            Navigation {
                pools: app.console.may_see_pools(&who).await,
            }
        }
        _ => Navigation::default(),
    };
    request.extensions_mut().insert(PageState {
        page,
        path,
        locale,
        theme,
        user: user.as_ref().map(signed_in_user),
        nav,
        ..PageState::default()
    });
    if let Some(user) = user {
        request.extensions_mut().insert(CurrentUser(user));
    }
    next.run(request).await
}

async fn load_user(
    app: &AppState,
    session: &Session,
    source: IpAddr,
) -> anyhow::Result<Option<UserRecord>> {
    let Some(grant) = session.get::<SessionGrant>(AUTH_KEY).await? else {
        return Ok(None);
    };
    let user = app.accounts.check_session(&grant, source).await?;
    if user.is_none() {
        session.flush().await?;
    }
    Ok(user)
}

/// The page state and the signed-in user of a request behind the access rules (which
/// admit only signed-in users to the handlers that call this).
pub fn signed_in(request: &Request) -> (PageState, UserRecord) {
    let state = request
        .extensions()
        .get::<PageState>()
        .cloned()
        .unwrap_or_default();
    let user = request
        .extensions()
        .get::<CurrentUser>()
        .map(|c| c.0.clone())
        .expect("the access rules admit only signed-in users here");
    (state, user)
}

pub fn signed_in_user(user: &UserRecord) -> SignedInUser {
    SignedInUser {
        name: user.name.clone(),
        display_name: user.display_name.clone(),
        roles: user.roles.clone(),
        must_change_password: user.must_change_password,
    }
}

/// Assets, health probes, the language switch, the kubeconfig and the OIDC issuer's
/// endpoints: public, and never a page with the console's header.
fn is_public(path: &str) -> bool {
    path.starts_with("/pkg/")
        || matches!(
            path,
            "/favicon.svg"
                | "/healthz"
                | "/readyz"
                | paths::LOCALE
                | paths::THEME
                | paths::KUBECONFIG
                | endpoints::DISCOVERY
                | endpoints::JWKS
                | endpoints::AUTHORIZE
                | endpoints::TOKEN
                | endpoints::REVOKE
        )
}

/// What the access rules decide for one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Access {
    Allow,
    Redirect(&'static str),
    Refuse(AppError),
}

/// The page access rules, enforced here and not only in the pages:
/// - assets, health probes, the language switch and the sign-in page are public;
/// - the OIDC issuer's endpoints and the kubeconfig pass (the authorization page handles
///   signed-out and must-change users itself; the kubeconfig wants a session or a bearer
///   token);
/// - everything else needs a session (pages redirect to sign-in);
/// - while the password must be changed, only the change-password page and sign-out work
///   (SPEC §3); pages redirect there, other requests get 403.
pub fn access(method: &Method, path: &str, user: Option<&UserRecord>) -> Access {
    let is_page = *method == Method::GET || *method == Method::HEAD;
    if is_public(path) {
        return Access::Allow;
    }
    match user {
        None if path == paths::SIGN_IN => Access::Allow,
        None if is_page => Access::Redirect(paths::SIGN_IN),
        None => Access::Refuse(AppError::NotSignedIn),
        Some(_) if path == paths::SIGN_IN && is_page => Access::Redirect(paths::DASHBOARD),
        Some(user)
            if user.must_change_password
                && !matches!(path, paths::CHANGE_PASSWORD | paths::SIGN_OUT) =>
        {
            if is_page {
                Access::Redirect(paths::CHANGE_PASSWORD)
            } else {
                Access::Refuse(AppError::MustChangePassword)
            }
        }
        Some(_) => Access::Allow,
    }
}

/// The value of the request's cookie `name`, if it sent one.
pub fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| cookie::Cookie::split_parse(v).filter_map(Result::ok))
        .find(|c| c.name() == name)
        .map(|c| c.value().to_owned())
}

/// A `Set-Cookie` value remembering `value` as `name` for a year, for this site's pages
/// only (`HttpOnly`, `SameSite=Lax`; `Secure` over https): the language, the theme and
/// the lifetime of the last claim.
pub fn remembering_cookie(name: &str, value: &str, https: bool) -> Option<HeaderValue> {
    let secure = if https { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; Max-Age=31536000; SameSite=Lax; HttpOnly{secure}"
    ))
    .ok()
}

/// The colour theme: the remembered choice, else the system's.
pub fn theme_of(headers: &HeaderMap) -> Theme {
    cookie_value(headers, THEME_COOKIE)
        .and_then(|tag| Theme::from_tag(&tag))
        .unwrap_or_default()
}

/// The language and theme of a request ([`locale_of`], [`theme_of`]).
pub fn look_of(headers: &HeaderMap) -> Look {
    Look {
        locale: locale_of(headers),
        theme: theme_of(headers),
    }
}

/// The language: the remembered choice, else `Accept-Language`, else English.
pub fn locale_of(headers: &HeaderMap) -> Locale {
    let remembered = cookie_value(headers, LOCALE_COOKIE).and_then(|tag| Locale::from_tag(&tag));
    remembered.unwrap_or_else(|| {
        headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok())
            .map_or(Locale::En, Locale::negotiate)
    })
}

/// The client's address as [`client_address_layer`] decided it, else the peer's.
pub fn client_ip(request_extensions: &http::Extensions) -> IpAddr {
    request_extensions
        .get::<ClientIp>()
        .map_or_else(|| peer_ip(request_extensions), |c| c.0)
}

fn peer_ip(request_extensions: &http::Extensions) -> IpAddr {
    request_extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// The client's address, in the request's extensions (see [`client_address`]).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub IpAddr);

/// Decides each request's [`ClientIp`] once, for throttling, sessions and the audit log.
pub async fn client_address_layer(
    State(app): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = peer_ip(request.extensions());
    let forwarded_for = request.headers().get_all("x-forwarded-for");
    let ip = client_address(peer, forwarded_for, &app.config.trusted_proxies);
    request.extensions_mut().insert(ClientIp(ip));
    next.run(request).await
}

/// The client's address: the peer's, unless the peer is one of the `trusted` proxies.
/// Then `X-Forwarded-For` (each proxy appends the address it heard from) is read from the
/// right, and the first address that is not a trusted proxy is the client — the rule of
/// RFC 7239 §5.2 / nginx `real_ip_recursive`, so a client cannot choose its address by
/// sending the header itself. An unreadable entry stops the walk at the last good hop.
pub fn client_address<'a>(
    peer: IpAddr,
    forwarded_for: impl IntoIterator<Item = &'a HeaderValue>,
    trusted: &[ipnet::IpNet],
) -> IpAddr {
    // An IPv4 peer of an IPv6 listener (`[::]`) arrives as `::ffff:a.b.c.d`: compare and
    // record it as the IPv4 address it is.
    let peer = peer.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let hops: Vec<&str> = forwarded_for
        .into_iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let Ok(ip) = hop.parse::<IpAddr>().map(|ip| ip.to_canonical()) else {
            break;
        };
        client = ip;
        if !is_trusted(&ip) {
            break;
        }
    }
    client
}

/// A small translated HTML page for a refusal outside any form.
pub fn error_page(look: Look, error: &AppError) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Html(error.document(look))).into_response()
}

/// Logs `error` in full under a fresh correlation id and shows the user only that id.
pub fn internal_error(look: Look, error: &anyhow::Error) -> Response {
    let correlation_id = correlation_id();
    tracing::error!(%correlation_id, error = format!("{error:#}"), "request failed");
    error_page(look, &AppError::Internal { correlation_id })
}

pub fn correlation_id() -> String {
    use rand::Rng;
    let n: u64 = rand::thread_rng().r#gen();
    format!("{n:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use banlieue_domain::{Roles, UserName};
    use time::OffsetDateTime;

    #[test]
    fn the_client_address_believes_only_trusted_proxies() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let trusted: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let header = |s: &'static str| HeaderValue::from_static(s);
        let address = |peer: &str, values: &[&'static str], trusted: &[ipnet::IpNet]| {
            let values: Vec<HeaderValue> = values.iter().map(|v| header(v)).collect();
            client_address(ip(peer), &values, trusted)
        };
        // Not from a proxy: the header is the client's own claim, ignored.
        assert_eq!(
            address("198.51.100.7", &["203.0.113.9"], &trusted),
            ip("198.51.100.7")
        );
        assert_eq!(address("10.0.0.2", &["203.0.113.9"], &[]), ip("10.0.0.2"));
        // From a proxy: the rightmost address that is not a proxy.
        assert_eq!(
            address("10.0.0.2", &["203.0.113.9"], &trusted),
            ip("203.0.113.9")
        );
        assert_eq!(
            address("10.0.0.2", &["1.2.3.4, 203.0.113.9, 10.0.0.3"], &trusted),
            ip("203.0.113.9"),
            "a forged leftmost entry is not believed"
        );
        assert_eq!(
            address("10.0.0.2", &["1.2.3.4", "203.0.113.9"], &trusted),
            ip("203.0.113.9"),
            "several header lines read as one list"
        );
        assert_eq!(
            address("10.0.0.2", &["2001:db8::1"], &trusted),
            ip("2001:db8::1")
        );
        // Unreadable or missing: the last good hop.
        assert_eq!(
            address("10.0.0.2", &["garbage, 10.0.0.3"], &trusted),
            ip("10.0.0.3")
        );
        assert_eq!(address("10.0.0.2", &[], &trusted), ip("10.0.0.2"));
        // IPv4 in IPv6 form (a `[::]` listener) is IPv4.
        assert_eq!(
            address("::ffff:10.0.0.2", &["203.0.113.9"], &trusted),
            ip("203.0.113.9")
        );
        assert_eq!(
            address("10.0.0.2", &["8.8.8.8, ::ffff:10.0.0.3"], &trusted),
            ip("8.8.8.8")
        );
        assert_eq!(address("::ffff:198.51.100.7", &[], &[]), ip("198.51.100.7"));
    }

    fn user(must_change: bool) -> UserRecord {
        let now = OffsetDateTime::now_utc();
        UserRecord {
            id: 1,
            name: UserName::parse("alice").unwrap(),
            display_name: String::new(),
            email: String::new(),
            tenant: None,
            roles: Roles::default(),
            disabled: false,
            must_change_password: must_change,
            not_before: now,
            version: 1,
            created_at: now,
            updated_at: now,
            last_sign_in_at: None,
        }
    }

    #[test]
    fn access_rules() {
        let get = Method::GET;
        let post = Method::POST;
        let normal = user(false);
        let forced = user(true);
        let cases: [(&Method, &str, Option<&UserRecord>, Access); 16] = [
            (&get, "/pkg/app.css", None, Access::Allow),
            (&get, "/healthz", None, Access::Allow),
            (&get, "/readyz", None, Access::Allow),
            (&get, "/readyz", Some(&forced), Access::Allow),
            (&post, "/locale", None, Access::Allow),
            (&get, "/sign-in", None, Access::Allow),
            (&post, "/sign-in", None, Access::Allow),
            (&get, "/", None, Access::Redirect("/sign-in")),
            (&get, "/no-such-page", None, Access::Redirect("/sign-in")),
            (
                &post,
                "/change-password",
                None,
                Access::Refuse(AppError::NotSignedIn),
            ),
            (&get, "/sign-in", Some(&normal), Access::Redirect("/")),
            (&get, "/", Some(&normal), Access::Allow),
            (
                &get,
                "/",
                Some(&forced),
                Access::Redirect("/change-password"),
            ),
            (
                &post,
                "/api/anything",
                Some(&forced),
                Access::Refuse(AppError::MustChangePassword),
            ),
            (&post, "/change-password", Some(&forced), Access::Allow),
            (&post, "/sign-out", Some(&forced), Access::Allow),
        ];
        for (method, path, user, want) in cases {
            assert_eq!(access(method, path, user), want, "{method} {path}");
        }
    }

    #[test]
    fn same_origin_check() {
        let origin = "http://127.0.0.1:3000";
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (k, v) in pairs {
                map.insert(*k, HeaderValue::from_static(v));
            }
            map
        };
        assert!(is_same_origin(
            &headers(&[("sec-fetch-site", "same-origin")]),
            origin,
            false
        ));
        assert!(!is_same_origin(
            &headers(&[("sec-fetch-site", "cross-site")]),
            origin,
            false
        ));
        assert!(!is_same_origin(
            &headers(&[
                ("sec-fetch-site", "same-site"),
                ("origin", "http://127.0.0.1:3000")
            ]),
            origin,
            false
        ));
        assert!(is_same_origin(
            &headers(&[("origin", "http://127.0.0.1:3000")]),
            origin,
            false
        ));
        assert!(is_same_origin(
            &headers(&[
                ("origin", "http://localhost:4000"),
                ("host", "localhost:4000")
            ]),
            origin,
            false
        ));
        assert!(!is_same_origin(
            &headers(&[
                ("origin", "https://evil.example"),
                ("host", "127.0.0.1:3000")
            ]),
            origin,
            false
        ));
        assert!(!is_same_origin(&headers(&[]), origin, false));
        // With a configured external URL, a matching Host proves nothing (DNS rebinding).
        assert!(!is_same_origin(
            &headers(&[("origin", "http://evil.example"), ("host", "evil.example")]),
            origin,
            true
        ));
    }

    #[test]
    fn remembered_language_beats_accept_language() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_LANGUAGE, HeaderValue::from_static("ja"));
        assert_eq!(locale_of(&headers), Locale::Ja);
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; banlieue-lang=en"),
        );
        assert_eq!(locale_of(&headers), Locale::En);
        headers.insert(header::COOKIE, HeaderValue::from_static("banlieue-lang=xx"));
        assert_eq!(locale_of(&headers), Locale::Ja);
    }
}
