//! `GET /oidc/authorize` and the sign-in and confirmation forms that post it back: the
//! query or form as the server reads both (`banlieue_domain::form::parse_form`), through
//! `AuthorizationRequest::parse`. Properties: a request is accepted only with a registered
//! redirect, an S256 challenge, a known audience and echo-safe `state`/`nonce`; its form
//! fields, posted back, give the same request; a refusal sent to the client has a
//! well-formed redirect carrying `error`, `state` and `iss`, its description in RFC 6749's
//! characters.
#![no_main]

use banlieue_domain::form::parse_form;
use banlieue_fuzz::{ISSUER_URL, is_oauth_text};
use banlieue_identity::oidc::{AuthorizationRequest, AuthorizeRefusal};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|query: &[u8]| {
    if let Ok(params) = parse_form(query) {
        check(&params);
    }
});

fn check(params: &[(String, String)]) {
    match AuthorizationRequest::parse(params) {
        Ok(request) => accepted(&request, params),
        Err(refusal) => refused(&refusal, params),
    }
}

fn accepted(request: &AuthorizationRequest, params: &[(String, String)]) {
    assert!(
        request.client.accepts_redirect(&request.redirect_uri),
        "{params:?}"
    );
    assert!(
        request.client.accepts_audience(&request.audience),
        "{params:?}"
    );
    assert_eq!(request.code_challenge.len(), 43, "{params:?}");
    assert!(
        request.scope == "openid" || request.scope == "openid offline_access",
        "{params:?}"
    );
    for opaque in [&request.state, &request.nonce].into_iter().flatten() {
        assert!(
            opaque.len() <= 512 && !opaque.chars().any(char::is_control),
            "{params:?}"
        );
    }
    let origin = request.redirect_origin();
    assert!(
        origin.starts_with("http://127.0.0.1:"),
        "{origin} for {params:?}"
    );
    // The sign-in card posts these fields back with the credentials; the server drops
    // those and parses the rest again: it must be the same request.
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    body.extend_pairs(request.form_fields());
    body.append_pair("user_name", "alice")
        .append_pair("password", "p");
    let posted: Vec<(String, String)> = parse_form(body.finish().as_bytes())
        .expect("the card's form parses")
        .into_iter()
        .filter(|(name, _)| !matches!(name.as_str(), "user_name" | "password" | "decision"))
        .collect();
    assert_eq!(
        AuthorizationRequest::parse(&posted).as_ref(),
        Ok(request),
        "the posted-back form is another request: {params:?}"
    );
    // `requires_sign_in` on any authentication age.
    let now = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
    let _ = request.requires_sign_in(time::OffsetDateTime::UNIX_EPOCH, now);
}

fn refused(refusal: &AuthorizeRefusal, params: &[(String, String)]) {
    let location = refusal.location(ISSUER_URL);
    let AuthorizeRefusal::Redirect {
        redirect_uri,
        state,
        error,
    } = refusal
    else {
        assert!(location.is_none());
        return;
    };
    assert!(
        is_oauth_text(&error.description),
        "error_description outside RFC 6749's characters: {:?} for {params:?}",
        error.description
    );
    let location = location.expect("a redirect refusal has a location");
    let url = url::Url::parse(&location).expect("the location is a URL");
    assert!(
        location.starts_with(&format!("{redirect_uri}?")),
        "{location}"
    );
    let get = |name: &str| {
        url.query_pairs()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(get("error").as_deref(), Some(error.code.as_str()));
    assert_eq!(get("error_description").as_ref(), Some(&error.description));
    assert_eq!(get("state"), *state);
    assert_eq!(get("iss").as_deref(), Some(ISSUER_URL));
}
