//! The relying-party side of OpenID Connect, built on the `openidconnect` crate: discovery,
//! authorization code + PKCE S256, refresh, RFC 7009 revocation and ID-token validation.

use std::borrow::Cow;

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreResponseType,
    CoreRevocableToken, CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AdditionalProviderMetadata, AuthUrl, AuthenticationFlow, AuthorizationCode,
    Client, ClientId, CsrfToken, EmptyExtraTokenFields, EndpointNotSet, EndpointSet, IdToken,
    IdTokenFields, IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier,
    ProviderMetadata, RedirectUrl, RefreshToken, RequestTokenError, Scope, StandardErrorResponse,
    StandardTokenResponse, TokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, chain, sanitize};
use crate::http::OidcHttp;
use crate::urls::check_url;

/// Claims beyond the standard ones that the issuer puts in ID tokens: `groups`, the user's
/// roles (SPEC §4). Absent means no groups.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct GroupsClaims {
    /// The `groups` claim.
    #[serde(default)]
    pub groups: Vec<String>,
}
impl AdditionalClaims for GroupsClaims {}

/// Discovery fields beyond `openidconnect`'s core set: the RFC 7009 revocation endpoint
/// (RFC 8414 §2 `revocation_endpoint`) and RFC 9207 issuer identification.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ExtraMetadata {
    /// Where `logout` posts the refresh token.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// RFC 9207 §3: the issuer puts `iss` in every authorization response, so a callback
    /// without it must be refused.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
}
impl AdditionalProviderMetadata for ExtraMetadata {}

/// How long a piece of text from the issuer may be when it is shown, in characters.
const MAX_SERVER_TEXT: usize = 300;

/// An RFC 6749 §5.2 error body.
#[derive(Deserialize)]
struct OAuthErrorBody {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

type Metadata = ProviderMetadata<
    ExtraMetadata,
    CoreAuthDisplay,
    openidconnect::core::CoreClientAuthMethod,
    openidconnect::core::CoreClaimName,
    openidconnect::core::CoreClaimType,
    openidconnect::core::CoreGrantType,
    CoreJweContentEncryptionAlgorithm,
    openidconnect::core::CoreJweKeyManagementAlgorithm,
    CoreJsonWebKey,
    openidconnect::core::CoreResponseMode,
    CoreResponseType,
    openidconnect::core::CoreSubjectIdentifierType,
>;

type OurIdToken = IdToken<
    GroupsClaims,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type OurTokenResponse = StandardTokenResponse<
    IdTokenFields<
        GroupsClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;
type OurClient = Client<
    GroupsClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    OurTokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
    EndpointNotSet,
>;

/// Who the CLI is and what it asks for.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// Issuer URL, already checked by [`crate::urls::check_issuer`]; compared byte-for-byte
    /// with the discovered `issuer` and every ID token's `iss`.
    pub issuer: String,
    /// OAuth client id of the public client (default `banlieue-cli`).
    pub client_id: String,
    /// The `audience` authorize parameter and the `aud` every ID token must contain
    /// (default `kubernetes`).
    pub audience: String,
}

/// A validated ID token with the claims the CLI keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tokens {
    /// The compact JWS, as sent to the Kubernetes API server.
    pub id_token: String,
    /// The refresh token, if the issuer sent one (`offline_access`).
    pub refresh_token: Option<String>,
    /// `exp`, in seconds since the Unix epoch.
    pub expires_at: i64,
    /// `sub`.
    pub sub: String,
    /// `groups`.
    pub groups: Vec<String>,
}

/// What the browser must be sent to, and what the callback and code exchange must check.
#[derive(Debug)]
pub struct LoginRequest {
    /// The authorization URL (OIDC Core §3.1.2.1) with PKCE S256, state, nonce and audience.
    pub url: url::Url,
    /// The `state` the callback must echo (RFC 6749 §4.1.1).
    pub state: CsrfToken,
    /// The `nonce` the ID token must carry (OIDC Core §3.1.2.1).
    pub nonce: Nonce,
    /// The PKCE verifier for the token request (RFC 7636 §4.5).
    pub verifier: PkceCodeVerifier,
    /// The redirect URI used at authorize, repeated at the token endpoint.
    pub redirect_uri: RedirectUrl,
}

/// A discovered issuer, ready for the code, refresh and revocation requests.
pub struct Issuer {
    settings: ClientSettings,
    client: OurClient,
    http: OidcHttp,
    revocation_endpoint: Option<String>,
    iss_parameter_required: bool,
}

impl Issuer {
    /// Fetches `{issuer}/.well-known/openid-configuration` and the JWKS (OIDC Discovery 1.0
    /// §4). The document's `issuer` must equal `settings.issuer` byte-for-byte, and it must
    /// name a `token_endpoint`.
    ///
    /// # Errors
    /// [`Error::Network`] or [`Error::Protocol`].
    pub async fn discover(settings: ClientSettings, http: reqwest::Client) -> Result<Self> {
        let http = OidcHttp(http);
        let issuer_url = IssuerUrl::new(settings.issuer.clone()).map_err(|e| Error::Protocol {
            what: "issuer URL",
            detail: e.to_string(),
        })?;
        let metadata = Metadata::discover_async(issuer_url.clone(), &http)
            .await
            .map_err(|e| discovery_error(&settings.issuer, e))?;
        let token_url: TokenUrl =
            metadata
                .token_endpoint()
                .cloned()
                .ok_or_else(|| Error::Protocol {
                    what: "discovery",
                    detail: "the issuer names no token_endpoint".into(),
                })?;
        let extra = metadata.additional_metadata();
        let revocation_endpoint = extra.revocation_endpoint.clone();
        let iss_parameter_required = extra.authorization_response_iss_parameter_supported;
        let auth_url: AuthUrl = metadata.authorization_endpoint().clone();
        let client = Client::new(
            ClientId::new(settings.client_id.clone()),
            issuer_url,
            metadata.jwks().clone(),
        )
        .set_auth_uri(auth_url)
        .set_token_uri(token_url);
        Ok(Issuer {
            settings,
            client,
            http,
            revocation_endpoint,
            iss_parameter_required,
        })
    }

    /// The issuer URL, byte-for-byte as configured (and as the discovery document names it).
    pub fn issuer(&self) -> &str {
        &self.settings.issuer
    }

    /// Whether discovery advertised `authorization_response_iss_parameter_supported: true`
    /// (RFC 9207): then an authorization response without `iss` must be refused.
    pub fn iss_parameter_required(&self) -> bool {
        self.iss_parameter_required
    }

    /// Builds the authorization request: `response_type=code`, scope `openid offline_access`,
    /// fresh random `state` and `nonce`, PKCE S256 (RFC 7636 §4.2), `audience`, and
    /// `redirect_uri` (the loopback listener's, RFC 8252 §7.3).
    pub fn begin_login(&self, redirect_uri: &str) -> Result<LoginRequest> {
        let redirect_uri =
            RedirectUrl::new(redirect_uri.to_string()).map_err(|e| Error::Protocol {
                what: "redirect URI",
                detail: e.to_string(),
            })?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = self
            .client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scope(Scope::new("offline_access".into()))
            .add_extra_param("audience", self.settings.audience.clone())
            .set_pkce_challenge(challenge)
            .set_redirect_uri(Cow::Owned(redirect_uri.clone()))
            .url();
        Ok(LoginRequest {
            url,
            state,
            nonce,
            verifier,
            redirect_uri,
        })
    }

    /// Exchanges an authorization code (RFC 6749 §4.1.3 + RFC 7636 §4.5: `code`,
    /// `redirect_uri`, `client_id`, `code_verifier`) and validates the ID token, nonce included.
    ///
    /// # Errors
    /// [`Error::OAuth`], [`Error::Network`], [`Error::Protocol`], [`Error::InvalidIdToken`].
    pub async fn exchange_code(&self, code: String, login: LoginRequest) -> Result<Tokens> {
        let response = self
            .client
            .exchange_code(AuthorizationCode::new(code))
            .set_pkce_verifier(login.verifier)
            .set_redirect_uri(Cow::Owned(login.redirect_uri))
            .request_async(&self.http)
            .await
            .map_err(|e| token_error("token endpoint (code)", e, false))?;
        self.validate(&response, Some(&login.nonce))
    }

    /// Refreshes (RFC 6749 §6: `grant_type=refresh_token`, `refresh_token`, `client_id`) and
    /// validates the new ID token. The issuer carries the audience; `nonce` is not checked.
    /// If the issuer sends no new refresh token, the old one is kept.
    ///
    /// # Errors
    /// [`Error::SessionEnded`] on `invalid_grant`; otherwise as [`Issuer::exchange_code`].
    pub async fn refresh(&self, refresh_token: &str) -> Result<Tokens> {
        let rt = RefreshToken::new(refresh_token.to_string());
        let response = self
            .client
            .exchange_refresh_token(&rt)
            .request_async(&self.http)
            .await
            .map_err(|e| token_error("token endpoint (refresh)", e, true))?;
        let mut tokens = self.validate(&response, None)?;
        if tokens.refresh_token.is_none() {
            tokens.refresh_token = Some(refresh_token.to_string());
        }
        Ok(tokens)
    }

    /// Revokes a refresh token (RFC 7009 §2.1: `token`, `token_type_hint=refresh_token`,
    /// `client_id`).
    ///
    /// # Errors
    /// [`Error::Protocol`] if the issuer advertises no `revocation_endpoint`;
    /// [`Error::OAuth`] or [`Error::Network`] if the request fails.
    pub async fn revoke(&self, refresh_token: &str) -> Result<()> {
        // Sent with reqwest directly: `oauth2` refuses any non-https revocation URL, which
        // would rule out a loopback issuer.
        let what = "revocation";
        let url = self
            .revocation_endpoint
            .as_deref()
            .ok_or_else(|| Error::Protocol {
                what,
                detail: "the issuer advertises no revocation_endpoint".into(),
            })?;
        check_url(url)?;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", refresh_token)
            .append_pair("token_type_hint", "refresh_token")
            .append_pair("client_id", &self.settings.client_id)
            .finish();
        let response = self
            .http
            .0
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| Error::Network {
                what,
                detail: chain(&e),
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        match serde_json::from_str::<OAuthErrorBody>(&text) {
            Ok(b) => Err(Error::OAuth {
                what,
                error: sanitize(&b.error, MAX_SERVER_TEXT),
                description: b.error_description.map(|d| sanitize(&d, MAX_SERVER_TEXT)),
            }),
            Err(_) => Err(Error::Protocol {
                what,
                detail: format!("HTTP {status}"),
            }),
        }
    }

    /// Validates the ID token of a token response: RS256 signature with a key from the JWKS,
    /// `iss` equal to the issuer, `exp` in the future, `aud` containing the requested audience
    /// (the client id need not be in `aud`: the issuer mints audience-specific tokens; `azp`
    /// must be the client id when `aud` has several values), and `nonce` when given.
    fn validate(&self, response: &OurTokenResponse, nonce: Option<&Nonce>) -> Result<Tokens> {
        let id_token: &OurIdToken = response.id_token().ok_or_else(|| Error::Protocol {
            what: "token endpoint",
            detail: "the response has no id_token".into(),
        })?;
        let verifier = self
            .client
            .id_token_verifier()
            .set_allowed_algs(vec![CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256])
            .require_audience_match(false);
        let claims = match nonce {
            Some(n) => id_token.claims(&verifier, n),
            None => id_token.claims(&verifier, |_: Option<&Nonce>| Ok(())),
        }
        .map_err(|e| Error::InvalidIdToken(chain(&e)))?;
        if !claims
            .audiences()
            .iter()
            .any(|a| a.as_str() == self.settings.audience)
        {
            return Err(Error::InvalidIdToken(format!(
                "aud does not contain {:?}",
                self.settings.audience
            )));
        }
        Ok(Tokens {
            id_token: id_token.to_string(),
            refresh_token: response.refresh_token().map(|t| t.secret().clone()),
            expires_at: claims.expiration().timestamp(),
            sub: claims.subject().as_str().to_string(),
            groups: claims.additional_claims().groups.clone(),
        })
    }
}

/// Turns a discovery failure into an error; an `issuer` that differs from the one given gets a
/// hint, since the comparison is byte-for-byte (OIDC Discovery 1.0 §4.3) and a URL copied
/// from a browser often ends with a slash the issuer does not have.
fn discovery_error<E: std::error::Error + 'static>(
    given: &str,
    e: openidconnect::DiscoveryError<E>,
) -> Error {
    match e {
        openidconnect::DiscoveryError::Validation(detail) if detail.contains("issuer") => {
            let detail = sanitize(&detail, MAX_SERVER_TEXT);
            let hint = match given.strip_suffix('/') {
                Some(trimmed) => format!("try `--issuer {trimmed}` (without the trailing slash)"),
                None => "use the issuer URL exactly as the console's discovery document names it"
                    .to_string(),
            };
            Error::Protocol {
                what: "discovery",
                detail: format!(
                    "the issuer's discovery document names another issuer: {detail}; --issuer must match the console's issuer URL exactly (it is compared byte for byte): {hint}"
                ),
            }
        }
        other => Error::Network {
            what: "discovery",
            detail: sanitize(&chain(&other), 1000),
        },
    }
}

fn token_error<E: std::error::Error + 'static>(
    what: &'static str,
    e: RequestTokenError<E, StandardErrorResponse<CoreErrorResponseType>>,
    refresh: bool,
) -> Error {
    match e {
        RequestTokenError::ServerResponse(r) => {
            let description = r
                .error_description()
                .map(|d| sanitize(d, MAX_SERVER_TEXT))
                .filter(|d| !d.is_empty());
            if refresh && *r.error() == CoreErrorResponseType::InvalidGrant {
                Error::SessionEnded { description }
            } else {
                Error::OAuth {
                    what,
                    error: sanitize(r.error().as_ref(), MAX_SERVER_TEXT),
                    description,
                }
            }
        }
        RequestTokenError::Parse(err, _body) => Error::Protocol {
            what,
            detail: format!("unparsable response: {err}"),
        },
        other => Error::Network {
            what,
            detail: chain(&other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(extra: &str) -> String {
        format!(
            r#"{{"issuer":"http://127.0.0.1:1","authorization_endpoint":"http://127.0.0.1:1/oidc/authorize",
            "token_endpoint":"http://127.0.0.1:1/oidc/token","jwks_uri":"http://127.0.0.1:1/oidc/jwks",
            "response_types_supported":["code"],"subject_types_supported":["public"],
            "id_token_signing_alg_values_supported":["RS256"]{extra}}}"#
        )
    }

    #[test]
    fn discovery_reads_the_rfc_9207_flag() {
        let m: Metadata = serde_json::from_str(&document(
            r#","authorization_response_iss_parameter_supported":true,"revocation_endpoint":"http://127.0.0.1:1/oidc/revoke""#,
        ))
        .unwrap();
        assert!(
            m.additional_metadata()
                .authorization_response_iss_parameter_supported
        );
        let m: Metadata = serde_json::from_str(&document("")).unwrap();
        assert!(
            !m.additional_metadata()
                .authorization_response_iss_parameter_supported
        );
    }

    #[test]
    fn an_issuer_mismatch_with_a_trailing_slash_gets_a_hint() {
        let e = discovery_error::<std::io::Error>(
            "http://127.0.0.1:5210/",
            openidconnect::DiscoveryError::Validation(
                "unexpected issuer URI `http://127.0.0.1:5210` (expected `http://127.0.0.1:5210/`)"
                    .into(),
            ),
        )
        .to_string();
        assert!(e.contains("exactly"), "{e}");
        assert!(
            e.contains("try `--issuer http://127.0.0.1:5210` (without the trailing slash)"),
            "{e}"
        );
    }
}
