//! Bearer ID tokens of this issuer for the console's own API (`aud=banlieue-console`,
//! RFC 6750): how the CLI, signed in, fetches `/kubeconfig` (and, later, calls the JSON
//! API). Verified with `jsonwebtoken` against the keys this issuer publishes in its JWKS.

use banlieue_domain::{BuiltinRole, UserName};
use banlieue_store::UserRecord;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use time::OffsetDateTime;

use super::token::IdTokenClaims;
use super::{CONSOLE_AUDIENCE, Issuer};

/// Why a bearer token is not accepted.
#[derive(Debug, thiserror::Error)]
pub enum BearerError {
    /// Malformed, unsigned by a published key, for another issuer or audience, or
    /// expired: the caller signs in again (`401`, `WWW-Authenticate: Bearer
    /// error="invalid_token"`). The reason is the console's own words, never a
    /// library's (they go into `error_description`).
    #[error("the bearer token is not valid: {0}")]
    InvalidToken(String),
    /// A valid token of a person who may not have what was asked: gone, disabled, signed
    /// out everywhere since, or without a built-in role (`403`).
    #[error("{0}")]
    Forbidden(&'static str),
    /// The keys could not be read.
    #[error("the signing keys cannot be read: {0}")]
    Internal(String),
}

impl Issuer {
    /// The person an ID token of this issuer for the console's audience names, when they
    /// may still act: the token is RS256, signed by a key the JWKS publishes at `now`,
    /// with `iss` this issuer, `aud` containing `banlieue-console` and `exp` after `now`
    /// (the caller's clock, used for every check); its user exists, is enabled, has no pending password change, was not
    /// signed out everywhere after `auth_time`, and holds a built-in role (viewer or
    /// better).
    ///
    /// Errors: [`BearerError`].
    pub async fn verify_console_token(
        &self,
        token: &str,
        now: OffsetDateTime,
    ) -> Result<UserRecord, BearerError> {
        let invalid = |e: jsonwebtoken::errors::Error| BearerError::InvalidToken(why_invalid(&e));
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            BearerError::InvalidToken(
                "the token is not a signed JWT (header.payload.signature)".into(),
            )
        })?;
        let kid = header
            .kid
            .ok_or_else(|| BearerError::InvalidToken("no key id (kid)".into()))?;
        let jwks = self
            .keys
            .jwks(now)
            .await
            .map_err(|e| BearerError::Internal(e.to_string()))?;
        let jwks: JwkSet =
            serde_json::from_str(&jwks).map_err(|e| BearerError::Internal(e.to_string()))?;
        let jwk = jwks.find(&kid).ok_or_else(|| {
            // Not echoed: the caller's text never reaches the error_description.
            BearerError::InvalidToken("the token's key (kid) is not published".into())
        })?;
        let key = DecodingKey::from_jwk(jwk).map_err(invalid)?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[&self.config.issuer_url]);
        validation.set_audience(&[CONSOLE_AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Expiry is judged at `now`, the instant the keys were chosen for, not at the
        // system clock's reading: one instant for the whole verification.
        validation.validate_exp = false;
        let claims = jsonwebtoken::decode::<IdTokenClaims>(token, &key, &validation)
            .map_err(invalid)?
            .claims;
        if claims.exp <= now.unix_timestamp() {
            return Err(BearerError::InvalidToken(
                "the token has expired (exp)".into(),
            ));
        }
        let name = UserName::parse(&claims.sub)
            .map_err(|_| BearerError::InvalidToken("sub is not a user name".into()))?;
        let user = self
            .accounts
            .store()
            .user_by_name(&name)
            .await
            .map_err(|e| BearerError::Internal(e.to_string()))?
            .filter(|user| {
                !user.disabled
                    && !user.must_change_password
                    && claims.auth_time >= user.not_before.unix_timestamp()
            })
            .ok_or(BearerError::Forbidden(
                "the person's session has ended; sign in again",
            ))?;
        if !user
            .roles
            .iter()
            .any(|role| BuiltinRole::parse(role.as_str()).is_some())
        {
            return Err(BearerError::Forbidden(
                "a built-in role (viewer or better) is needed",
            ));
        }
        Ok(user)
    }
}

/// What an `error_description` says about a token `jsonwebtoken` refused: one of a fixed
/// set of phrases, so no library wording or token content reaches the caller.
fn why_invalid(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::InvalidSignature => "the signature does not verify".to_owned(),
        ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => {
            "the token is not signed with RS256".to_owned()
        }
        ErrorKind::InvalidIssuer => "the token is for another issuer (iss)".to_owned(),
        ErrorKind::InvalidAudience => "the token is for another audience (aud)".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
            "exp" | "iss" | "aud" | "sub" => format!("the token has no {claim} claim"),
            _ => "the token lacks a required claim".to_owned(),
        },
        ErrorKind::InvalidClaimFormat(_) | ErrorKind::Json(_) => {
            "the token's claims are not the claims of an ID token".to_owned()
        }
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".to_owned(),
        ErrorKind::ExpiredSignature => "the token has expired (exp)".to_owned(),
        ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat => "the token's key cannot verify it".to_owned(),
        _ => "the token is not a signed JWT (header.payload.signature)".to_owned(),
    }
}
