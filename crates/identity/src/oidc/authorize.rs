//! The authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, OpenID Connect Core
//! §3.1.2.1): validation, and the code the issuer sends back once the person agreed.

use std::collections::HashMap;

use banlieue_store::{AuthorizationCodeRecord, UserRecord};
use time::OffsetDateTime;
use url::Url;

use super::clients::Client;
use super::error::{OAuthError, OAuthErrorCode};
use super::{Issuer, random_token, token_hash};

/// The longest `state` or `nonce` accepted, in bytes.
const MAX_OPAQUE_LEN: usize = 512;

/// A validated authorization request. The sign-in and confirmation forms carry its
/// parameters ([`Self::form_fields`]) and the server validates them again on post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRequest {
    pub client: Client,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub nonce: Option<String>,
    /// BASE64URL(SHA-256(code_verifier)), 43 characters (RFC 7636 §4.2).
    pub code_challenge: String,
    /// Granted scopes: `openid`, plus `offline_access` when asked for.
    pub scope: String,
    pub audience: String,
    /// `prompt` (OpenID Connect Core §3.1.2.1).
    pub prompt: Prompt,
    /// `max_age`, seconds: an older authentication must be repeated.
    pub max_age: Option<u64>,
}

/// What the request's `prompt` asks of the authorization page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prompt {
    /// Sign in if needed, then confirm.
    Default,
    /// `none`: answer without showing any page (always refused here: the console always
    /// asks for a confirmation).
    None,
    /// `login` / `select_account`: sign in again even when signed in.
    Login,
}

/// Why an authorization request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeRefusal {
    /// The client or redirect URI can't be trusted, or the request can't be echoed back
    /// safely: tell the person, never redirect (RFC 6749 §4.1.2.1).
    Untrusted(UntrustedReason),
    /// Send the error back to the client's redirect URI.
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: OAuthError,
    },
}

/// Why a request is shown to the person instead of being sent back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UntrustedReason {
    /// `client_id` missing, repeated or not registered.
    UnknownClient,
    /// `redirect_uri` missing, repeated or not registered for the client.
    UnregisteredRedirectUri,
    /// `state` or `nonce` longer than 512 bytes or with control characters: not echoed.
    MalformedState,
}

impl AuthorizeRefusal {
    /// The redirect target for [`AuthorizeRefusal::Redirect`], with `error`,
    /// `error_description`, `state` and `iss` (RFC 9207) in the query.
    pub fn location(&self, issuer_url: &str) -> Option<String> {
        match self {
            Self::Untrusted(_) => None,
            Self::Redirect {
                redirect_uri,
                state,
                error,
            } => Some(with_query(
                redirect_uri,
                &[
                    ("error", Some(error.code.as_str())),
                    ("error_description", Some(error.description.as_str())),
                    ("state", state.as_deref()),
                    ("iss", Some(issuer_url)),
                ],
            )),
        }
    }
}

impl AuthorizationRequest {
    /// Validates the request parameters (query of `GET /oidc/authorize`, or the fields of
    /// its forms). Parameters that appear twice are refused (RFC 6749 §3.1).
    pub fn parse(params: &[(String, String)]) -> Result<Self, AuthorizeRefusal> {
        let mut seen: HashMap<&str, Vec<&str>> = HashMap::new();
        for (name, value) in params {
            seen.entry(name.as_str()).or_default().push(value.as_str());
        }
        let single = |name: &str| -> Result<Option<&str>, ()> {
            match seen.get(name).map(Vec::as_slice) {
                None => Ok(None),
                Some([value]) => Ok(Some(value)),
                Some(_) => Err(()),
            }
        };
        let untrusted = AuthorizeRefusal::Untrusted;
        let client = single("client_id")
            .ok()
            .flatten()
            .and_then(Client::find)
            .ok_or(untrusted(UntrustedReason::UnknownClient))?;
        let redirect_uri = single("redirect_uri")
            .ok()
            .flatten()
            .filter(|uri| client.accepts_redirect(uri))
            .ok_or(untrusted(UntrustedReason::UnregisteredRedirectUri))?;
        for name in ["state", "nonce"] {
            let malformed =
                seen.get(name).into_iter().flatten().any(|value| {
                    value.len() > MAX_OPAQUE_LEN || value.chars().any(char::is_control)
                });
            if malformed {
                return Err(untrusted(UntrustedReason::MalformedState));
            }
        }
        let state = single("state").ok().flatten().map(str::to_owned);
        let refuse = |code, description: &str| AuthorizeRefusal::Redirect {
            redirect_uri: redirect_uri.to_owned(),
            state: state.clone(),
            error: OAuthError::new(code, description),
        };
        // The first repeated parameter in the request's order (not the map's, which varies).
        if let Some((name, _)) = params.iter().find(|(name, _)| {
            seen.get(name.as_str())
                .is_some_and(|values| values.len() > 1)
        }) {
            return Err(AuthorizeRefusal::Redirect {
                redirect_uri: redirect_uri.to_owned(),
                state: state.clone(),
                error: OAuthError::repeated_parameter(name),
            });
        }
        let get = |name| single(name).ok().flatten();
        if get("request").is_some() {
            return Err(refuse(
                OAuthErrorCode::RequestNotSupported,
                "request objects are not supported",
            ));
        }
        if get("request_uri").is_some() {
            return Err(refuse(
                OAuthErrorCode::RequestUriNotSupported,
                "request_uri is not supported",
            ));
        }
        match get("response_type") {
            Some("code") => {}
            None => {
                return Err(refuse(
                    OAuthErrorCode::InvalidRequest,
                    "response_type is missing",
                ));
            }
            Some(_) => {
                return Err(refuse(
                    OAuthErrorCode::UnsupportedResponseType,
                    "only response_type=code is supported",
                ));
            }
        }
        if get("response_mode").is_some_and(|mode| mode != "query") {
            return Err(refuse(
                OAuthErrorCode::InvalidRequest,
                "only response_mode=query is supported",
            ));
        }
        let scopes: Vec<&str> = get("scope").unwrap_or_default().split(' ').collect();
        if !scopes.contains(&"openid") {
            return Err(refuse(
                OAuthErrorCode::InvalidScope,
                "scope must include openid",
            ));
        }
        let scope = if scopes.contains(&"offline_access") {
            "openid offline_access"
        } else {
            "openid"
        };
        let Some(code_challenge) = get("code_challenge") else {
            return Err(refuse(
                OAuthErrorCode::InvalidRequest,
                "code_challenge is required (PKCE, RFC 7636)",
            ));
        };
        if get("code_challenge_method") != Some("S256") {
            return Err(refuse(
                OAuthErrorCode::InvalidRequest,
                "code_challenge_method must be S256; plain is not supported",
            ));
        }
        if !is_s256_challenge(code_challenge) {
            return Err(refuse(
                OAuthErrorCode::InvalidRequest,
                "code_challenge must be 43 base64url characters (S256)",
            ));
        }
        let audience = get("audience").unwrap_or(client.default_audience);
        if !client.accepts_audience(audience) {
            return Err(refuse(
                OAuthErrorCode::InvalidRequest,
                "audience must be kubernetes or banlieue-console",
            ));
        }
        let prompt = match get("prompt") {
            None | Some("consent") => Prompt::Default,
            Some("none") => Prompt::None,
            Some("login" | "select_account") => Prompt::Login,
            Some(_) => {
                return Err(refuse(
                    OAuthErrorCode::InvalidRequest,
                    "prompt is not understood",
                ));
            }
        };
        let max_age = match get("max_age").map(str::parse::<u64>) {
            None => None,
            Some(Ok(seconds)) => Some(seconds),
            Some(Err(_)) => {
                return Err(refuse(
                    OAuthErrorCode::InvalidRequest,
                    "max_age must be a number of seconds",
                ));
            }
        };
        Ok(Self {
            redirect_uri: redirect_uri.to_owned(),
            nonce: get("nonce").map(str::to_owned),
            code_challenge: code_challenge.to_owned(),
            scope: scope.to_owned(),
            audience: audience.to_owned(),
            client,
            state,
            prompt,
            max_age,
        })
    }

    /// The parameters to carry in the sign-in and confirmation forms, which post them
    /// back to the authorization endpoint.
    pub fn form_fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            ("response_type", "code".to_owned()),
            ("client_id", self.client.id.to_owned()),
            ("redirect_uri", self.redirect_uri.clone()),
            ("scope", self.scope.clone()),
            ("code_challenge", self.code_challenge.clone()),
            ("code_challenge_method", "S256".to_owned()),
            ("audience", self.audience.clone()),
        ];
        fields.extend(self.state.clone().map(|s| ("state", s)));
        fields.extend(self.nonce.clone().map(|n| ("nonce", n)));
        fields.extend(self.max_age.map(|m| ("max_age", m.to_string())));
        // A fresh sign-in the client asked for must survive the page's own POST.
        if self.prompt == Prompt::Login {
            fields.push(("prompt", "login".to_owned()));
        }
        fields
    }

    /// Whether a person who authenticated at `auth_time` must sign in again first
    /// (`prompt=login`, or an authentication older than `max_age`).
    pub fn requires_sign_in(&self, auth_time: OffsetDateTime, now: OffsetDateTime) -> bool {
        self.prompt == Prompt::Login
            || self
                .max_age
                .is_some_and(|max| now - auth_time > time::Duration::seconds(max as i64))
    }

    /// The scheme, host and port of the redirect URI: where the confirmation form may
    /// send the browser (the page's CSP `form-action`).
    pub fn redirect_origin(&self) -> String {
        Url::parse(&self.redirect_uri)
            .map(|url| url.origin().ascii_serialization())
            .unwrap_or_default()
    }

    /// A refusal sent back to the client, e.g. `access_denied` when the person cancels.
    pub fn refuse(&self, code: OAuthErrorCode, description: &str) -> AuthorizeRefusal {
        AuthorizeRefusal::Redirect {
            redirect_uri: self.redirect_uri.clone(),
            state: self.state.clone(),
            error: OAuthError::new(code, description),
        }
    }
}

impl Issuer {
    /// Issues a single-use code for `user`, who authenticated at `auth_time`, and returns
    /// the redirect back to the client with `code`, `state` and `iss` (RFC 9207).
    /// A user who must change their password gets no code (the caller sends them to the
    /// change first); a disabled one neither.
    pub async fn issue_code(
        &self,
        request: &AuthorizationRequest,
        user: &UserRecord,
        auth_time: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<String, AuthorizeRefusal> {
        if user.disabled || user.must_change_password {
            return Err(request.refuse(
                OAuthErrorCode::AccessDenied,
                "the account cannot receive tokens now",
            ));
        }
        let code = random_token();
        let record = AuthorizationCodeRecord {
            code_hash: token_hash(&code),
            client_id: request.client.id.to_owned(),
            redirect_uri: request.redirect_uri.clone(),
            code_challenge: request.code_challenge.clone(),
            nonce: request.nonce.clone(),
            audience: request.audience.clone(),
            scope: request.scope.clone(),
            user_id: user.id,
            auth_time,
            expires_at: now + self.config.code_ttl,
        };
        if let Err(error) = self
            .accounts
            .store()
            .insert_authorization_code(&record)
            .await
        {
            tracing::error!(%error, "cannot store an authorization code");
            return Err(request.refuse(OAuthErrorCode::ServerError, "the issuer failed; try again"));
        }
        Ok(with_query(
            &request.redirect_uri,
            &[
                ("code", Some(code.as_str())),
                ("state", request.state.as_deref()),
                ("iss", Some(self.config.issuer_url.as_str())),
            ],
        ))
    }
}

/// RFC 7636 §4.2: BASE64URL-ENCODE(SHA256(ASCII(code_verifier))) is 43 characters.
fn is_s256_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn with_query(uri: &str, pairs: &[(&str, Option<&str>)]) -> String {
    let mut url = Url::parse(uri).expect("redirect URIs are validated before use");
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in pairs {
            if let Some(value) = value {
                query.append_pair(name, value);
            }
        }
    }
    url.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://console.example";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    fn params(overrides: &[(&str, Option<&str>)]) -> Vec<(String, String)> {
        let mut base: Vec<(&str, Option<&str>)> = vec![
            ("response_type", Some("code")),
            ("client_id", Some("banlieue-cli")),
            ("redirect_uri", Some("http://127.0.0.1:53124/callback")),
            ("scope", Some("openid offline_access")),
            ("state", Some("s1")),
            ("nonce", Some("n1")),
            ("code_challenge", Some(CHALLENGE)),
            ("code_challenge_method", Some("S256")),
        ];
        for (name, value) in overrides {
            base.retain(|(n, _)| n != name);
            base.push((name, *value));
        }
        base.into_iter()
            .filter_map(|(n, v)| v.map(|v| (n.to_owned(), v.to_owned())))
            .collect()
    }

    fn error_code(refusal: AuthorizeRefusal) -> &'static str {
        match refusal {
            AuthorizeRefusal::Redirect { error, .. } => error.code.as_str(),
            AuthorizeRefusal::Untrusted(_) => "untrusted",
        }
    }

    #[test]
    fn a_complete_request_is_accepted_with_defaults() {
        let request = AuthorizationRequest::parse(&params(&[])).unwrap();
        assert_eq!(request.audience, "kubernetes");
        assert_eq!(request.scope, "openid offline_access");
        assert_eq!(request.redirect_origin(), "http://127.0.0.1:53124");
        let again = AuthorizationRequest::parse(
            &request
                .form_fields()
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(again, request);
    }

    #[test]
    fn unknown_clients_and_redirects_are_never_redirected_to() {
        for overrides in [
            vec![("client_id", Some("kubectl"))],
            vec![("client_id", None)],
            vec![("redirect_uri", Some("http://localhost:53124/callback"))],
            vec![("redirect_uri", None)],
        ] {
            let refusal = AuthorizationRequest::parse(&params(&overrides)).unwrap_err();
            assert_eq!(refusal.location(ISSUER), None, "{overrides:?}");
        }
    }

    #[test]
    fn pkce_downgrades_are_refused() {
        let cases = [
            (vec![("code_challenge", None)], "invalid_request"),
            (vec![("code_challenge_method", None)], "invalid_request"),
            (
                vec![("code_challenge_method", Some("plain"))],
                "invalid_request",
            ),
            (vec![("code_challenge", Some("short"))], "invalid_request"),
        ];
        for (overrides, code) in cases {
            let refusal = AuthorizationRequest::parse(&params(&overrides)).unwrap_err();
            assert_eq!(error_code(refusal), code, "{overrides:?}");
        }
    }

    #[test]
    fn other_bad_requests_go_back_with_their_error_and_state() {
        let cases = [
            (
                vec![("response_type", Some("token"))],
                "unsupported_response_type",
            ),
            (
                vec![("response_type", Some("code id_token"))],
                "unsupported_response_type",
            ),
            (vec![("scope", Some("profile"))], "invalid_scope"),
            (vec![("audience", Some("vault"))], "invalid_request"),
            (vec![("request", Some("eyJ"))], "request_not_supported"),
            (vec![("response_mode", Some("fragment"))], "invalid_request"),
        ];
        for (overrides, code) in cases {
            let refusal = AuthorizationRequest::parse(&params(&overrides)).unwrap_err();
            let location = refusal.location(ISSUER).unwrap();
            assert!(
                location.starts_with("http://127.0.0.1:53124/callback?error="),
                "{location}"
            );
            assert!(location.contains("state=s1"), "{location}");
            assert_eq!(error_code(refusal), code, "{overrides:?}");
        }
    }

    #[test]
    fn oversized_or_control_state_is_not_echoed() {
        let long = "s".repeat(513);
        for state in [long.as_str(), "a\u{1b}[31m"] {
            let refusal =
                AuthorizationRequest::parse(&params(&[("state", Some(state))])).unwrap_err();
            assert_eq!(
                refusal,
                AuthorizeRefusal::Untrusted(UntrustedReason::MalformedState)
            );
        }
    }

    #[test]
    fn prompt_login_and_max_age_ask_for_a_fresh_sign_in() {
        let now = OffsetDateTime::now_utc();
        let request = AuthorizationRequest::parse(&params(&[])).unwrap();
        assert!(!request.requires_sign_in(now - time::Duration::hours(1), now));
        let login = AuthorizationRequest::parse(&params(&[("prompt", Some("login"))])).unwrap();
        assert!(login.requires_sign_in(now, now));
        let aged = AuthorizationRequest::parse(&params(&[("max_age", Some("60"))])).unwrap();
        assert!(!aged.requires_sign_in(now - time::Duration::seconds(30), now));
        assert!(aged.requires_sign_in(now - time::Duration::seconds(61), now));
    }

    #[test]
    fn repeated_parameters_are_refused() {
        let mut twice = params(&[]);
        twice.push(("scope".into(), "openid".into()));
        let refusal = AuthorizationRequest::parse(&twice).unwrap_err();
        assert_eq!(error_code(refusal), "invalid_request");
    }

    /// Found by fuzzing (`fuzz/`, oidc_authorize): the repeated name was echoed into
    /// `error_description`, whatever its characters.
    #[test]
    fn a_repeated_parameter_is_named_in_the_description_only_when_plain() {
        for (name, description) in [
            ("scope", "scope is given more than once"),
            (
                "sta\u{fffd}e\u{1b}[2J",
                "a parameter is given more than once",
            ),
        ] {
            let mut twice = params(&[]);
            twice.push((name.into(), "a".into()));
            twice.push((name.into(), "b".into()));
            let AuthorizeRefusal::Redirect { error, .. } =
                AuthorizationRequest::parse(&twice).unwrap_err()
            else {
                panic!("not sent back to the client");
            };
            assert_eq!(error.description, description);
        }
    }
}
