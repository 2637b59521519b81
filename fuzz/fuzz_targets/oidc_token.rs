//! `POST /oidc/token`: the body as the console reads it (`banlieue_domain::form::parse_form`,
//! the server's `Form`), then `Issuer::token` on a real issuer whose store holds no live
//! code or refresh token. Properties: the form parser agrees with WHATWG and round-trips;
//! no body obtains tokens; every refusal is one the endpoint documents, never a server
//! error, with an `error_description` in RFC 6749's character set.
#![no_main]

use banlieue_fuzz::{Fixture, SOURCE, checked_form, is_oauth_text};
use banlieue_identity::oidc::OAuthErrorCode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let Some(fields) = checked_form(body) else {
        return;
    };
    let fixture = Fixture::get();
    let answer = fixture.block_on(fixture.issuer.token(&fields, SOURCE, fixture.now));
    let error = match answer {
        Ok(tokens) => panic!("a guessed form obtained tokens: {fields:?} -> {tokens:?}"),
        Err(error) => error,
    };
    assert!(
        matches!(
            error.code,
            OAuthErrorCode::InvalidRequest
                | OAuthErrorCode::InvalidClient
                | OAuthErrorCode::InvalidGrant
                | OAuthErrorCode::UnsupportedGrantType
        ),
        "unexpected refusal {error:?} for {fields:?}"
    );
    assert!(
        is_oauth_text(&error.description),
        "error_description outside RFC 6749's characters: {:?}",
        error.description
    );
});
