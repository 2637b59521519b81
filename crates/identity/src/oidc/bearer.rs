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
    /// error="invalid_token"`).
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
        let invalid = |e: jsonwebtoken::errors::Error| BearerError::InvalidToken(e.to_string());
        let header = jsonwebtoken::decode_header(token).map_err(invalid)?;
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
        let jwk = jwks
            .find(&kid)
            .ok_or_else(|| BearerError::InvalidToken(format!("key {kid} is not published")))?;
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
