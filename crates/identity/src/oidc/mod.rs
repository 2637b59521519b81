//! A minimal OpenID Provider for the console's two public clients (SPEC §4): discovery,
//! JWKS, the authorization code flow with PKCE S256 only, RS256 ID tokens, rotating
//! refresh tokens with reuse detection, and RFC 7009 revocation.
//!
//! The HTTP surface lives in the server; this module holds the rules and the state.

mod authorize;
mod bearer;
mod clients;
mod current_tokens;
mod error;
mod keys;
mod kubeconfig;
mod sealing;
mod token;

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

pub use authorize::{AuthorizationRequest, AuthorizeRefusal, Prompt, UntrustedReason};
pub use bearer::BearerError;
pub use clients::{
    CLI_CLIENT_ID, CONSOLE_AUDIENCE, CONSOLE_CLIENT_ID, Client, KUBERNETES_AUDIENCE,
};
pub use error::{OAuthError, OAuthErrorCode};
pub use keys::{KeyError, KeyPolicy, SigningKeys};
pub use kubeconfig::{ClusterAccess, kubeconfig_yaml};
pub use sealing::{KEK_LEN, KeyEncryption, SealError};
pub use token::{IdTokenClaims, TokenResponse};

use crate::Accounts;

/// Lifetimes of what the issuer hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    /// `iss`, byte-for-byte: the console's external URL without a trailing slash.
    pub issuer_url: String,
    /// ID-token lifetime, 1–15 minutes; default 5 minutes.
    pub id_token_ttl: Duration,
    /// Absolute lifetime of a refresh-token family, 1 hour – 30 days; default 12 hours.
    pub refresh_lifetime: Duration,
    /// Authorization-code lifetime: 60 seconds (SPEC §4).
    pub code_ttl: Duration,
    /// How long the immediately previous refresh token still yields the same successor,
    /// so parallel kubectl runs don't revoke their own family: 3 seconds.
    pub refresh_grace: Duration,
}

impl IssuerConfig {
    pub const ID_TOKEN_TTL_RANGE: std::ops::RangeInclusive<Duration> =
        Duration::from_secs(60)..=Duration::from_secs(15 * 60);
    pub const REFRESH_LIFETIME_RANGE: std::ops::RangeInclusive<Duration> =
        Duration::from_secs(3600)..=Duration::from_secs(30 * 24 * 3600);

    /// The defaults of SPEC §4 for an issuer at `issuer_url`.
    pub fn new(issuer_url: impl Into<String>) -> Self {
        Self {
            issuer_url: issuer_url.into(),
            id_token_ttl: Duration::from_secs(5 * 60),
            refresh_lifetime: Duration::from_secs(12 * 3600),
            code_ttl: Duration::from_secs(60),
            refresh_grace: Duration::from_secs(3),
        }
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.issuer_url)
    }
}

/// Paths of the issuer's endpoints below the issuer URL.
pub mod endpoints {
    pub const DISCOVERY: &str = "/.well-known/openid-configuration";
    pub const AUTHORIZE: &str = "/oidc/authorize";
    pub const TOKEN: &str = "/oidc/token";
    pub const REVOKE: &str = "/oidc/revoke";
    pub const JWKS: &str = "/oidc/jwks";
}

/// The issuer: configuration, signing keys and the account service it authenticates
/// people with.
pub struct Issuer {
    config: IssuerConfig,
    keys: SigningKeys,
    accounts: Arc<Accounts>,
    current_tokens: current_tokens::CurrentTokens,
    /// [`Issuer::discovery`], serialised once.
    discovery: Arc<str>,
}

impl Issuer {
    /// The issuer for `config`, its signing keys kept by `keys` and sealed by `sealing`.
    pub fn new(
        config: IssuerConfig,
        keys: KeyPolicy,
        sealing: Arc<KeyEncryption>,
        accounts: Arc<Accounts>,
    ) -> Self {
        Self {
            keys: SigningKeys::new(accounts.store().clone(), keys, sealing),
            discovery: Self::metadata(&config),
            config,
            accounts,
            current_tokens: Default::default(),
        }
    }

    pub fn config(&self) -> &IssuerConfig {
        &self.config
    }

    pub fn keys(&self) -> &SigningKeys {
        &self.keys
    }

    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// The OpenID Provider Metadata (OpenID Connect Discovery 1.0 §3) as JSON.
    pub fn discovery(&self) -> Arc<str> {
        self.discovery.clone()
    }

    fn metadata(config: &IssuerConfig) -> Arc<str> {
        serde_json::json!({
            "issuer": config.issuer_url,
            "authorization_endpoint": config.endpoint(endpoints::AUTHORIZE),
            "token_endpoint": config.endpoint(endpoints::TOKEN),
            "revocation_endpoint": config.endpoint(endpoints::REVOKE),
            "jwks_uri": config.endpoint(endpoints::JWKS),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "offline_access"],
            "claims_supported": [
                "iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "nonce", "groups",
                "preferred_username", "name",
            ],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": true,
            "request_parameter_supported": false,
            "request_uri_parameter_supported": false,
        })
        .to_string()
        .into()
    }

    /// The JWK Set of the published keys.
    pub async fn jwks(&self, now: OffsetDateTime) -> Result<Arc<str>, KeyError> {
        self.keys.jwks(now).await
    }
}

/// 256 random bits from the OS RNG, base64url: codes and refresh tokens.
fn random_token() -> String {
    use base64::Engine;
    use rand::Rng;
    let bytes: [u8; 32] = rand::rngs::OsRng.r#gen();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// SHA-256, hex: how codes and refresh tokens are stored.
fn token_hash(token: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
