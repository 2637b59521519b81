//! Authentication: static bearer tokens and JWT authenticators configured with the real
//! `AuthenticationConfiguration` (`apiserver.config.k8s.io/v1beta1`).
//!
//! See <https://kubernetes.io/docs/reference/access-authn-authz/authentication/#using-authentication-configuration>.
//! Anonymous requests are refused (as with `--anonymous-auth=false`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Mutex;

/// The authenticated (or impersonated) caller, as in `authentication.k8s.io/v1` `UserInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    /// User name, e.g. `console:alice` or `system:serviceaccount:ns:name`.
    pub username: String,
    /// Optional stable id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups, including `system:authenticated`.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Extra attributes (`Impersonate-Extra-*`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with the given name and groups (plus `system:authenticated`).
    pub fn new(username: &str, groups: &[&str]) -> Self {
        let mut u = Self {
            username: username.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Self::default()
        };
        u.add_authenticated();
        u
    }

    /// Adds `system:authenticated` unless present (done for every authenticated user).
    pub(crate) fn add_authenticated(&mut self) {
        if !self.groups.iter().any(|g| g == "system:authenticated") {
            self.groups.push("system:authenticated".into());
        }
    }
}

/// A static token, as in the real `--token-auth-file` (`token,user,uid,"group1,group2"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticToken {
    /// The bearer token.
    pub token: String,
    /// Who presents it.
    pub user: UserInfo,
}

/// `AuthenticationConfiguration` (only the `jwt` list is used).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationConfiguration {
    /// `apiserver.config.k8s.io/v1beta1` (v1alpha1 and v1 are accepted too).
    #[serde(default)]
    pub api_version: String,
    /// `AuthenticationConfiguration`.
    #[serde(default)]
    pub kind: String,
    /// JWT authenticators.
    #[serde(default)]
    pub jwt: Vec<JwtAuthenticatorConfig>,
}

/// One `jwt[]` entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtAuthenticatorConfig {
    /// Issuer settings.
    pub issuer: IssuerConfig,
    /// `claim`/`requiredValue` rules.
    #[serde(default)]
    pub claim_validation_rules: Vec<ClaimValidationRule>,
    /// How claims become a user.
    pub claim_mappings: ClaimMappings,
    /// CEL rules over the mapped user; a token whose user fails one is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_validation_rules: Vec<UserValidationRule>,
}

/// `jwt[].issuer`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuerConfig {
    /// Must equal the token's `iss`; discovery is fetched from `<url>/.well-known/openid-configuration`.
    pub url: String,
    /// Overrides where discovery is fetched from.
    #[serde(
        default,
        rename = "discoveryURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub discovery_url: Option<String>,
    /// Accepted audiences (any one must be in `aud`).
    pub audiences: Vec<String>,
    /// `MatchAny` (the only policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience_match_policy: Option<String>,
    /// PEM CA bundle used to reach the issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
}

/// `jwt[].claimValidationRules[]` (claim form only).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimValidationRule {
    /// Claim name.
    #[serde(default)]
    pub claim: String,
    /// Required string value.
    #[serde(default)]
    pub required_value: String,
}

/// `jwt[].userValidationRules[]`: a CEL `expression` over `user` (`username`, `uid`,
/// `groups`, `extra`) that must be true, and the `message` logged when it is not
/// (kube-apiserver's structured authentication configuration).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserValidationRule {
    /// The CEL expression, e.g. `!user.username.startsWith('system:')`.
    pub expression: String,
    /// Why a user is refused.
    #[serde(default)]
    pub message: String,
}

/// `jwt[].claimMappings`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimMappings {
    /// Username claim and prefix.
    pub username: PrefixedClaim,
    /// Groups claim (string or array) and prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<PrefixedClaim>,
    /// UID claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<PrefixedClaim>,
}

/// A claim name with an optional prefix.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefixedClaim {
    /// Claim name.
    #[serde(default)]
    pub claim: String,
    /// Prefix prepended to the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// Parses an `AuthenticationConfiguration` document (YAML or JSON).
///
/// Errors: a YAML error, or a wrong `kind`.
pub fn parse_authentication_configuration(
    text: &str,
) -> Result<AuthenticationConfiguration, String> {
    let cfg: AuthenticationConfiguration = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    if cfg.kind != "AuthenticationConfiguration" {
        return Err(format!(
            "kind must be AuthenticationConfiguration, got {:?}",
            cfg.kind
        ));
    }
    if !cfg.api_version.starts_with("apiserver.config.k8s.io/") {
        return Err(format!("unsupported apiVersion {:?}", cfg.api_version));
    }
    Ok(cfg)
}

/// Validates an `AuthenticationConfiguration` as kube-apiserver does when it loads one
/// (`k8s.io/kubernetes/pkg/apis/apiserver/validation`, `ValidateAuthenticationConfiguration`):
/// every `jwt[].issuer.url` and `discoveryURL` must be an `https` URL without user
/// information, query or fragment, issuer URLs must be unique, `audiences` must not be
/// empty, and `claimMappings.username.claim` must be set.
///
/// `allow_insecure_loopback_issuers` is an emulator-only relaxation (the real server has
/// none): it also accepts `http` URLs whose host is a loopback address (`127.0.0.0/8`,
/// `::1`) or `localhost`, because test suites run their OIDC issuer over plain HTTP on
/// loopback. `http` on any other host is still refused.
///
/// Errors: one line per problem, in the real server's `field.Error` form, e.g.
/// `jwt[0].issuer.url: Invalid value: "http://idp.example": URL scheme must be https`.
pub fn validate_authentication_configuration(
    cfg: &AuthenticationConfiguration,
    allow_insecure_loopback_issuers: bool,
) -> Result<(), String> {
    let mut errors = Vec::new();
    let mut issuers: Vec<&str> = Vec::new();
    for (i, j) in cfg.jwt.iter().enumerate() {
        let field = format!("jwt[{i}].issuer");
        let url = j.issuer.url.as_str();
        if url.is_empty() {
            errors.push(format!(
                "{field}.url: Required value: reference to OIDC issuer URL"
            ));
        } else {
            validate_url(
                &format!("{field}.url"),
                url,
                allow_insecure_loopback_issuers,
                &mut errors,
            );
            if issuers.contains(&url) {
                errors.push(format!("{field}.url: Duplicate value: \"{url}\""));
            }
            issuers.push(url);
        }
        if let Some(discovery) = &j.issuer.discovery_url {
            validate_url(
                &format!("{field}.discoveryURL"),
                discovery,
                allow_insecure_loopback_issuers,
                &mut errors,
            );
            if discovery.trim_end_matches('/') == url.trim_end_matches('/') {
                errors.push(format!(
                    "{field}.discoveryURL: Invalid value: \"{discovery}\": discoveryURL must be different from URL"
                ));
            }
        }
        if j.issuer.audiences.iter().all(String::is_empty) {
            errors.push(format!(
                "{field}.audiences: Required value: at least one {field}.audiences is required"
            ));
        }
        if j.claim_mappings.username.claim.is_empty() {
            errors.push(format!(
                "jwt[{i}].claimMappings.username: Required value: claim or expression is required"
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

fn validate_url(field: &str, value: &str, allow_loopback_http: bool, errors: &mut Vec<String>) {
    let mut invalid =
        |why: &str| errors.push(format!("{field}: Invalid value: \"{value}\": {why}"));
    let url = match url::Url::parse(value) {
        Ok(u) => u,
        Err(e) => return invalid(&e.to_string()),
    };
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => {}
        "http" if allow_loopback_http && loopback => {}
        "http" if allow_loopback_http => invalid(
            "URL scheme must be https (plain http is allowed by allow_insecure_loopback_issuers only for loopback hosts)",
        ),
        _ => invalid("URL scheme must be https"),
    }
    if !url.username().is_empty() || url.password().is_some() {
        invalid("URL must not contain a username or password");
    }
    if url.query().is_some() {
        invalid("URL must not contain a query");
    }
    if url.fragment().is_some() {
        invalid("URL must not contain a fragment");
    }
}

/// Verifies tokens of one issuer, fetching discovery and JWKS on demand.
pub(crate) struct JwtAuthenticator {
    cfg: JwtAuthenticatorConfig,
    client: reqwest::Client,
    keys: Mutex<Option<(Instant, JwkSet)>>,
}

impl std::fmt::Debug for JwtAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuthenticator")
            .field("issuer", &self.cfg.issuer.url)
            .finish()
    }
}

/// Minimum time between two JWKS refetches caused by an unknown `kid`.
const JWKS_REFETCH: Duration = Duration::from_secs(5);

impl JwtAuthenticator {
    /// Builds an authenticator.
    ///
    /// Errors: an unusable `certificateAuthority`.
    pub(crate) fn new(cfg: JwtAuthenticatorConfig) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
        if let Some(pem) = &cfg.issuer.certificate_authority {
            let cert = reqwest::Certificate::from_pem(pem.as_bytes()).map_err(|e| e.to_string())?;
            builder = builder.add_root_certificate(cert);
        }
        Ok(Self {
            cfg,
            client: builder.build().map_err(|e| e.to_string())?,
            keys: Mutex::new(None),
        })
    }

    /// The issuer URL this authenticator accepts.
    pub(crate) fn issuer(&self) -> &str {
        &self.cfg.issuer.url
    }

    async fn fetch_keys(&self) -> Result<JwkSet, String> {
        let discovery = self.cfg.issuer.discovery_url.clone().unwrap_or_else(|| {
            format!(
                "{}/.well-known/openid-configuration",
                self.cfg.issuer.url.trim_end_matches('/')
            )
        });
        let doc: Value = self
            .client
            .get(&discovery)
            .send()
            .await
            .map_err(|e| format!("discovery: {e}"))?
            .error_for_status()
            .map_err(|e| format!("discovery: {e}"))?
            .json()
            .await
            .map_err(|e| format!("discovery: {e}"))?;
        if self.cfg.issuer.discovery_url.is_none()
            && doc.get("issuer").and_then(Value::as_str) != Some(self.cfg.issuer.url.as_str())
        {
            return Err("discovery: issuer does not match".into());
        }
        let jwks_uri = doc
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or("discovery: no jwks_uri")?;
        self.client
            .get(jwks_uri)
            .send()
            .await
            .map_err(|e| format!("jwks: {e}"))?
            .error_for_status()
            .map_err(|e| format!("jwks: {e}"))?
            .json()
            .await
            .map_err(|e| format!("jwks: {e}"))
    }

    async fn key_for(&self, kid: Option<&str>) -> Result<jsonwebtoken::jwk::Jwk, String> {
        let mut guard = self.keys.lock().await;
        let find = |set: &JwkSet| match kid {
            Some(k) => set.find(k).cloned(),
            None => set.keys.first().cloned(),
        };
        if let Some((_, set)) = guard.as_ref()
            && let Some(k) = find(set)
        {
            return Ok(k);
        }
        let stale = guard
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= JWKS_REFETCH);
        if stale {
            let set = self.fetch_keys().await?;
            *guard = Some((Instant::now(), set));
        }
        guard
            .as_ref()
            .and_then(|(_, set)| find(set))
            .ok_or_else(|| "no matching key in JWKS".to_string())
    }

    /// Verifies a token and maps its claims to a user.
    ///
    /// Errors: the reason the token was refused (logged, never shown to the caller).
    pub(crate) async fn authenticate(&self, token: &str) -> Result<UserInfo, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| e.to_string())?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err("symmetric algorithms are not accepted".into());
        }
        let jwk = self.key_for(header.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string())?;
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&self.cfg.issuer.audiences);
        validation.set_issuer(&[&self.cfg.issuer.url]);
        validation.leeway = 0;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation)
            .map_err(|e| e.to_string())?;
        let claims = data.claims;
        for rule in &self.cfg.claim_validation_rules {
            if claims.get(&rule.claim).and_then(Value::as_str) != Some(rule.required_value.as_str())
            {
                return Err(format!(
                    "claim {} does not have the required value",
                    rule.claim
                ));
            }
        }
        let mapping = &self.cfg.claim_mappings;
        let name = claims
            .get(&mapping.username.claim)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("claim {} missing", mapping.username.claim))?;
        let mut user = UserInfo {
            username: format!(
                "{}{name}",
                mapping.username.prefix.as_deref().unwrap_or_default()
            ),
            ..UserInfo::default()
        };
        if let Some(g) = &mapping.groups {
            let prefix = g.prefix.as_deref().unwrap_or_default();
            match claims.get(&g.claim) {
                Some(Value::String(s)) => user.groups.push(format!("{prefix}{s}")),
                Some(Value::Array(a)) => user.groups.extend(
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|s| format!("{prefix}{s}")),
                ),
                _ => {}
            }
        }
        if let Some(u) = &mapping.uid
            && let Some(uid) = claims.get(&u.claim).and_then(Value::as_str)
        {
            user.uid = uid.to_string();
        }
        self.validate_user(&user)?;
        user.add_authenticated();
        Ok(user)
    }

    /// Applies `userValidationRules` to the mapped user, before `system:authenticated` is
    /// added, as kube-apiserver does.
    fn validate_user(&self, user: &UserInfo) -> Result<(), String> {
        let value = serde_json::json!({
            "username": user.username, "uid": user.uid,
            "groups": user.groups, "extra": user.extra,
        });
        for rule in &self.cfg.user_validation_rules {
            match crate::cel::eval(&rule.expression, &[("user", &value)]) {
                Ok(Value::Bool(true)) => {}
                Ok(_) => return Err(format!("user validation rule failed: {}", rule.message)),
                Err(e) => return Err(format!("user validation rule {}: {e}", rule.expression)),
            }
        }
        Ok(())
    }
}

/// All configured authenticators.
#[derive(Debug, Default)]
pub(crate) struct Authenticator {
    tokens: std::sync::RwLock<Vec<StaticToken>>,
    jwt: Vec<Arc<JwtAuthenticator>>,
}

impl Authenticator {
    /// Static tokens plus JWT authenticators.
    ///
    /// Errors: a JWT authenticator that cannot be built.
    pub(crate) fn new(
        tokens: Vec<StaticToken>,
        cfg: Option<&AuthenticationConfiguration>,
    ) -> Result<Self, String> {
        let mut jwt = Vec::new();
        if let Some(cfg) = cfg {
            for j in &cfg.jwt {
                jwt.push(Arc::new(JwtAuthenticator::new(j.clone())?));
            }
        }
        Ok(Self {
            tokens: std::sync::RwLock::new(tokens),
            jwt,
        })
    }

    /// Adds a static token (replacing one with the same value).
    pub(crate) fn add_token(&self, token: StaticToken) {
        let mut tokens = self.tokens.write().unwrap_or_else(|e| e.into_inner());
        tokens.retain(|t| t.token != token.token);
        tokens.push(token);
    }

    /// Authenticates a bearer token; `None` means 401.
    pub(crate) async fn authenticate(&self, token: &str) -> Option<UserInfo> {
        let found = self
            .tokens
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|t| t.token == token)
            .map(|t| t.user.clone());
        if let Some(mut u) = found {
            u.add_authenticated();
            return Some(u);
        }
        if token.split('.').count() == 3 {
            let claims: serde_json::Map<String, Value> =
                jsonwebtoken::dangerous::insecure_decode_claims(token).ok()?;
            let iss = claims.get("iss").and_then(Value::as_str)?;
            for j in self.jwt.iter().filter(|j| j.issuer() == iss) {
                match j.authenticate(token).await {
                    Ok(u) => return Some(u),
                    Err(e) => tracing::info!(issuer = iss, error = %e, "JWT refused"),
                }
            }
        }
        None
    }
}

/// Parses a static token file: one `token,user,uid,"group1,group2"` per line (the
/// `--token-auth-file` CSV format).
///
/// Errors: the line number of a malformed line.
pub fn parse_token_file(text: &str) -> Result<Vec<StaticToken>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (head, groups) = match line.find(",\"") {
            Some(idx) => (&line[..idx], line[idx + 2..].trim_end_matches('"')),
            None => (line, ""),
        };
        let fields: Vec<&str> = head.split(',').collect();
        if fields.len() < 2 {
            return Err(format!(
                "line {}: expected token,user[,uid[,groups]]",
                i + 1
            ));
        }
        let mut groups: Vec<String> = groups
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect();
        if fields.len() > 3 && groups.is_empty() {
            groups = fields[3..].iter().map(|s| s.to_string()).collect();
        }
        out.push(StaticToken {
            token: fields[0].to_string(),
            user: UserInfo {
                username: fields[1].to_string(),
                uid: fields.get(2).map(|s| s.to_string()).unwrap_or_default(),
                groups,
                extra: BTreeMap::new(),
            },
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file() {
        let t = parse_token_file("abc,alice,1,\"g1,g2\"\n# c\ndef,bob\n").unwrap();
        assert_eq!(t[0].user.groups, vec!["g1", "g2"]);
        assert_eq!(t[1].user.username, "bob");
        assert!(parse_token_file("nope").is_err());
    }

    #[test]
    fn authentication_configuration_parses() {
        let cfg = parse_authentication_configuration(
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: https://issuer.example\n    audiences: [kubernetes]\n  claimMappings:\n    username: {claim: sub, prefix: 'console:'}\n    groups: {claim: groups, prefix: 'console:'}\n",
        )
        .unwrap();
        assert_eq!(
            cfg.jwt[0].claim_mappings.username.prefix.as_deref(),
            Some("console:")
        );
        assert!(parse_authentication_configuration("kind: Other\n").is_err());
    }

    fn with_issuer(url: &str) -> AuthenticationConfiguration {
        parse_authentication_configuration(&format!(
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {url}\n    audiences: [kubernetes]\n  claimMappings:\n    username: {{claim: sub}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn issuer_urls_must_be_https_unless_loopback_http_is_allowed() {
        assert!(
            validate_authentication_configuration(&with_issuer("https://idp.example"), false)
                .is_ok()
        );
        let err =
            validate_authentication_configuration(&with_issuer("http://127.0.0.1:5556"), false)
                .unwrap_err();
        assert_eq!(
            err,
            "jwt[0].issuer.url: Invalid value: \"http://127.0.0.1:5556\": URL scheme must be https"
        );
        for loopback in [
            "http://127.0.0.1:5556",
            "http://[::1]:80/dex",
            "http://localhost:8080",
        ] {
            assert!(
                validate_authentication_configuration(&with_issuer(loopback), true).is_ok(),
                "{loopback}"
            );
        }
        for remote in ["http://idp.example", "http://10.0.0.1", "ftp://127.0.0.1"] {
            assert!(
                validate_authentication_configuration(&with_issuer(remote), true).is_err(),
                "{remote}"
            );
        }
        assert!(
            validate_authentication_configuration(
                &with_issuer("https://u:p@idp.example?x=1"),
                false
            )
            .unwrap_err()
            .contains("must not contain a username or password")
        );
    }

    #[test]
    fn duplicate_issuers_and_missing_audiences_are_refused() {
        let mut cfg = with_issuer("https://idp.example");
        cfg.jwt.push(cfg.jwt[0].clone());
        cfg.jwt[1].issuer.audiences.clear();
        let err = validate_authentication_configuration(&cfg, false).unwrap_err();
        assert!(err.contains("jwt[1].issuer.url: Duplicate value"), "{err}");
        assert!(
            err.contains("jwt[1].issuer.audiences: Required value"),
            "{err}"
        );
    }
}
