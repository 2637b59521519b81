//! `POST /oidc/revoke` (RFC 7009): the body as the console reads it, then `Issuer::revoke`
//! on a real issuer whose store holds no refresh token. Properties: the form parser agrees
//! with WHATWG and round-trips; a revocation is accepted only when every parameter is
//! single, the client registered, the token present and the hint not `access_token`;
//! every refusal is a documented one with an `error_description` in RFC 6749's characters.
#![no_main]

use std::collections::HashSet;

use banlieue_fuzz::{Fixture, SOURCE, checked_form, is_oauth_text};
use banlieue_identity::oidc::{Client, OAuthErrorCode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let Some(fields) = checked_form(body) else {
        return;
    };
    let fixture = Fixture::get();
    let answer = fixture.block_on(fixture.issuer.revoke(&fields, SOURCE, fixture.now));
    match answer {
        Ok(()) => {
            let names: HashSet<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
            let get = |name: &str| {
                fields
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.as_str())
            };
            assert_eq!(
                names.len(),
                fields.len(),
                "a repeated parameter was accepted: {fields:?}"
            );
            assert!(
                get("client_id").and_then(Client::find).is_some(),
                "{fields:?}"
            );
            assert!(get("token").is_some_and(|t| !t.is_empty()), "{fields:?}");
            assert_ne!(get("token_type_hint"), Some("access_token"), "{fields:?}");
        }
        Err(error) => {
            assert!(
                matches!(
                    error.code,
                    OAuthErrorCode::InvalidRequest
                        | OAuthErrorCode::InvalidClient
                        | OAuthErrorCode::UnsupportedTokenType
                ),
                "unexpected refusal {error:?} for {fields:?}"
            );
            assert!(
                is_oauth_text(&error.description),
                "error_description outside RFC 6749's characters: {:?}",
                error.description
            );
        }
    }
});
