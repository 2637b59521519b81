//! `GET /kubeconfig` with `Authorization: Bearer <token>`: `Issuer::verify_console_token`
//! (JWS header parsing, `kid` lookup in the published JWKS, algorithm and claims checks)
//! on a real issuer that holds one key and issued one ID token to alice.
//!
//! The input is a template that may name the parts of the real token: `$H` (its header,
//! base64url), `$P` (its payload), `$S` (its signature) and `$K` (its `kid`). A template
//! with a line break is a header in JSON (with `$K` replaced) before it, base64url-encoded
//! by the target, and the rest of the token after it (e.g. `.$P.$S`), so the fuzzer can
//! try other algorithms (`none`, `HS256` keyed with the public key), other `kid`s, `crit`,
//! `jku`, duplicated members… on a real signature.
//!
//! Property: a token is accepted if and only if it is, byte for byte, the one the issuer
//! signed; a refusal is always `InvalidToken`, never a panic or an internal error.
#![no_main]

use banlieue_fuzz::Fixture;
use banlieue_identity::oidc::BearerError;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|template: &[u8]| {
    let Ok(template) = std::str::from_utf8(template) else {
        return;
    };
    let fixture = Fixture::get();
    let token = expand(template, fixture);
    let answer = fixture.block_on(fixture.issuer.verify_console_token(&token, fixture.now));
    match answer {
        Ok(user) => {
            assert_eq!(
                token, fixture.id_token,
                "a token the issuer did not sign was accepted"
            );
            assert_eq!(user.name.as_str(), "alice");
        }
        Err(BearerError::InvalidToken(_)) => {
            assert_ne!(
                token, fixture.id_token,
                "the issuer's own token was refused"
            );
        }
        Err(other) => panic!("{other:?} for {token:?}"),
    }
});

fn expand(template: &str, fixture: &Fixture) -> String {
    let mut parts = fixture.id_token.split('.');
    let (h, p, s) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let fill = |text: &str| {
        text.replace("$H", h)
            .replace("$P", p)
            .replace("$S", s)
            .replace("$K", &fixture.kid)
    };
    match template.split_once('\n') {
        Some((header, rest)) => {
            let header = header.replace("$K", &fixture.kid);
            format!("{}{}", URL_SAFE_NO_PAD.encode(header), fill(rest))
        }
        None => fill(template),
    }
}
