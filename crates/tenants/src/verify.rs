//! A tenant person's token, verified into who they are (SPEC §7).
//!
//! The token's `iss` selects the candidate tenants (every tenant with that issuer,
//! suspended ones included). The signature is checked once per JWK Set endpoint those
//! candidates name ([`crate::jwks`]), with the token's `exp`, `nbf` and `iss`; then each
//! candidate of a verifying endpoint checks its audience and whether its tenant claim
//! equals its `tenantId`. Exactly one candidate must match, so one tenant's provider
//! cannot mint for another that shares its issuer. A suspended tenant's people get
//! [`VerifyError::Suspended`] (403); roles are the token's roles that the tenant allows,
//! or its default role when none remain.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use banlieue_domain::{RoleName, Roles};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::{DecodeSliceError, Engine};

use crate::document::{JwksLocation, Tenant};
use crate::jwks::{ALGORITHMS, JwksCache, KeyError};
use crate::metrics::{NO_TENANT, TenantMetrics, VerificationLabels};
use crate::registry::{Snapshot, Stale, TenantRegistry};
use crate::token::{ClaimValue, Claims, HEADER_BYTES, Parts};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Seconds of clock difference allowed with a provider for `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 60;

/// The most bytes of a signature decoded on the stack: an RSA-8192 one, the longest of any
/// key accepted.
const SIGNATURE_BYTES: usize = 1024;

/// The most bytes of a subject or user name (as Kubernetes user names go, with room for
/// the `oidc:<tenant>:` prefix).
const MAX_NAME_BYTES: usize = 255;

/// Who a verified tenant token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantIdentity {
    /// The tenant's id.
    pub tenant: String,
    /// The tenant's issuer (the token's `iss`): the `spec.subject.issuer` of this
    /// person's claims.
    pub issuer: String,
    /// The token's `sub`.
    pub subject: String,
    /// The tenant's username claim.
    pub username: String,
    /// `name`, when the token has one.
    pub name: Option<String>,
    /// `email`, when the token has one.
    pub email: Option<String>,
    /// The token's roles the tenant allows, or its default role.
    pub roles: Roles,
    /// Where the tenant's people may claim (shared with the tenant: verifying copies
    /// nothing of it).
    pub namespaces: Arc<[String]>,
    /// The token's `exp`, in seconds since the Unix epoch.
    pub expires_at: u64,
}

impl TenantIdentity {
    /// The prefix the API server gives this tenant's identities (`oidc:<tenant>:`), as
    /// the chart's AuthenticationConfiguration and the console's impersonation spell it.
    pub fn prefix(tenant: &str) -> String {
        format!("{}{tenant}:", cluster::TENANT_PREFIX)
    }

    /// The `spec.subject.id` of this person's claims: `<tenant>:<sub>`. Under the issuer
    /// prefix `oidc:` (the chart maps every tenant's issuer to it in
    /// `claimSubjectPolicy.issuerPrefixes`) it is [`TenantIdentity::kubernetes_user`], so
    /// the subject policy binds the claim to its author even when tenants share an issuer.
    pub fn claim_subject_id(&self) -> String {
        format!("{}:{}", self.tenant, self.subject)
    }

    /// The Kubernetes user name: `oidc:<tenant>:<sub>`.
    pub fn kubernetes_user(&self) -> String {
        format!("{}{}", Self::prefix(&self.tenant), self.subject)
    }

    /// The Kubernetes identity: [`TenantIdentity::kubernetes_user`] with the groups
    /// `console:<role>` of the roles, then `system:authenticated` (the groups a console
    /// user of those roles has, so the roles' RBAC applies alike).
    pub fn kubernetes_identity(&self) -> cluster::KubernetesIdentity {
        let console =
            cluster::KubernetesIdentity::console("", self.roles.iter().map(RoleName::as_str));
        cluster::KubernetesIdentity {
            user: self.kubernetes_user(),
            groups: console.groups,
        }
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Not a JWS compact serialization with a readable header and claims.
    #[error("not a signed token: {0}")]
    Malformed(String),
    /// No tenant has the token's issuer.
    #[error("no tenant has the issuer {issuer:?}")]
    UnknownIssuer {
        /// The token's `iss`.
        issuer: String,
    },
    /// No key verifies it, or its provider's keys are unavailable.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The signature, algorithm, `typ`, expiry, not-before time or issuer is wrong.
    #[error("the token does not verify: {0}")]
    Invalid(String),
    /// It verifies, but not exactly one tenant of its issuer is named by its tenant claim
    /// (with its audience).
    #[error("the token names no tenant of {issuer:?} exactly ({reason})")]
    NoTenant {
        /// The token's `iss`.
        issuer: String,
        /// Which tenants were tried.
        reason: String,
    },
    /// The tenant is suspended (`enabled: false`).
    #[error("tenant {0} is suspended")]
    Suspended(String),
    /// The tenant set is too old to trust.
    #[error(transparent)]
    Stale(#[from] Stale),
    /// A claim the tenant needs is missing or unusable.
    #[error("the claim {claim} {reason}")]
    Claim {
        /// The claim's name.
        claim: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl VerifyError {
    /// The result code `/metrics` and the audit log record for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::UnknownIssuer { .. } => "unknown-issuer",
            Self::Key(KeyError::Unavailable { .. }) => "keys-unavailable",
            Self::Key(KeyError::NoKey { .. }) => "unknown-key",
            Self::Invalid(_) => "invalid",
            Self::NoTenant { .. } => "no-tenant",
            Self::Suspended(_) => "suspended",
            Self::Stale(_) => "tenants-stale",
            Self::Claim { .. } => "claim",
        }
    }

    /// The HTTP status a bearer-token caller gets: 403 for a suspended tenant, 503 when
    /// the console cannot decide (a stale tenant set, a provider's keys unavailable),
    /// else 401.
    pub fn status(&self) -> u16 {
        match self {
            Self::Suspended(_) => 403,
            Self::Stale(_) | Self::Key(KeyError::Unavailable { .. }) => 503,
            _ => 401,
        }
    }
}

/// A refused tenant token: why, and the tenant it was held to (its provider verified it
/// and its tenant claim named that tenant) when it got that far.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Refusal {
    /// Why.
    #[source]
    pub error: VerifyError,
    /// The tenant's id, if the token was held to one.
    pub tenant: Option<String>,
}

/// Verifies tenant tokens against the registry's current tenants and their providers'
/// keys.
pub struct TenantVerifier {
    registry: Arc<TenantRegistry>,
    keys: JwksCache,
    /// `banlieue_tenant_token_verifications_total` ([`TenantMetrics::verifications`]).
    verifications: Family<VerificationLabels, Counter>,
    /// The read whose endpoints the cache was last pruned to.
    pruned_for: Mutex<Option<Instant>>,
}

impl TenantVerifier {
    /// A verifier of `registry`'s tenants, fetching keys into `keys`.
    pub fn new(registry: Arc<TenantRegistry>, keys: JwksCache) -> Self {
        Self {
            registry,
            keys,
            verifications: Family::default(),
            pruned_for: Mutex::new(None),
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<TenantRegistry> {
        &self.registry
    }

    /// The key cache.
    pub fn keys(&self) -> &JwksCache {
        &self.keys
    }

    /// The counters of verifications and key fetches.
    pub fn metrics(&self) -> TenantMetrics {
        TenantMetrics {
            verifications: self.verifications.clone(),
            jwks_fetches: self.keys.fetches().clone(),
        }
    }

    /// Who `token` names, at `now` (the registry's and the key cache's clock; the
    /// token's times are checked against the system clock), counted by tenant and result
    /// ([`TenantMetrics`]).
    ///
    /// Errors: [`VerifyError`]; [`VerifyError::status`] gives the HTTP status and
    /// [`Refusal::tenant`] the tenant it was held to, if any.
    pub async fn verify(&self, token: &str, now: Instant) -> Result<TenantIdentity, Refusal> {
        let mut tenant = None;
        let outcome = self.check(token, now, &mut tenant).await;
        let result = outcome
            .as_ref()
            .map_or_else(VerifyError::code, |_| "success");
        self.verifications
            .get_or_create(&VerificationLabels {
                tenant: tenant.clone().unwrap_or_else(|| NO_TENANT.to_owned()),
                result,
            })
            .inc();
        outcome.map_err(|error| Refusal { error, tenant })
    }

    /// [`TenantVerifier::verify`], uncounted; `tenant` is set once the token is held to
    /// one.
    async fn check(
        &self,
        token: &str,
        now: Instant,
        held_to: &mut Option<String>,
    ) -> Result<TenantIdentity, VerifyError> {
        let snapshot = self.registry.current(now)?;
        self.prune(&snapshot);
        let malformed = |e: jsonwebtoken::errors::Error| VerifyError::Malformed(e.to_string());
        let parts = Parts::split(token).map_err(malformed)?;
        let mut header = [0; HEADER_BYTES];
        let header = parts.header(&mut header).map_err(malformed)?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(VerifyError::Invalid(format!(
                "the algorithm {:?} is not accepted",
                header.alg
            )));
        }
        if let Some(typ) = header
            .typ
            .as_deref()
            .filter(|t| !t.eq_ignore_ascii_case("JWT"))
        {
            return Err(VerifyError::Invalid(format!(
                "the type {typ:?} is not an ID token's (JWT)"
            )));
        }
        // Read before the signature is checked, to choose the keys; trusted only after.
        let payload = parts.payload().map_err(malformed)?;
        let claims = Claims::parse(&payload).map_err(malformed)?;
        let issuer = claims
            .get("iss")
            .and_then(ClaimValue::as_str)
            .ok_or_else(|| VerifyError::Claim {
                claim: "iss".into(),
                reason: "is missing or not a string".into(),
            })?;
        let candidates: Vec<&Tenant> = snapshot
            .tenants
            .values()
            .filter(|tenant| tenant.issuer == issuer)
            .collect();
        if candidates.is_empty() {
            return Err(VerifyError::UnknownIssuer {
                issuer: issuer.to_owned(),
            });
        }
        let mut endpoints: Vec<&JwksLocation> = Vec::new();
        for tenant in &candidates {
            if !endpoints.contains(&&tenant.jwks) {
                endpoints.push(&tenant.jwks);
            }
        }
        let mut matched: Vec<&Tenant> = Vec::new();
        let mut tried = Vec::new();
        let mut failure = None;
        for endpoint in endpoints {
            let key = match self
                .keys
                .key(endpoint, header.kid.as_deref(), header.alg, now)
                .await
            {
                Ok(key) => key,
                Err(error) => {
                    failure = Some(VerifyError::Key(error));
                    continue;
                }
            };
            if let Err(error) = check_signature(&parts, &key, header.alg) {
                failure = Some(error);
                continue;
            }
            // Signed by this endpoint's key: the claims are the provider's. Each candidate
            // checks its own audience below, on this one verification.
            check_times(&claims)?;
            for tenant in candidates.iter().filter(|t| &t.jwks == endpoint) {
                if !has_audience(&claims, tenant.audience.as_deref()) {
                    tried.push(format!("{}: not its audience", tenant.id));
                } else if claims
                    .get(&tenant.tenant_claim)
                    .and_then(ClaimValue::as_str)
                    != Some(tenant.id.as_str())
                {
                    tried.push(format!(
                        "{}: {} is not {}",
                        tenant.id, tenant.tenant_claim, tenant.id
                    ));
                } else {
                    matched.push(tenant);
                }
            }
        }
        let tenant = match matched.len() {
            1 => matched.remove(0),
            0 if tried.is_empty() => {
                return Err(failure.unwrap_or_else(|| {
                    VerifyError::Invalid("no key of its issuer verifies it".into())
                }));
            }
            0 => {
                return Err(VerifyError::NoTenant {
                    issuer: issuer.to_owned(),
                    reason: tried.join("; "),
                });
            }
            _ => {
                let names: Vec<&str> = matched.iter().map(|t| t.id.as_str()).collect();
                return Err(VerifyError::NoTenant {
                    issuer: issuer.to_owned(),
                    reason: format!("it names several: {}", names.join(", ")),
                });
            }
        };
        *held_to = Some(tenant.id.clone());
        if !tenant.enabled {
            return Err(VerifyError::Suspended(tenant.id.clone()));
        }
        identity(tenant, &claims)
    }

    /// Drops the key caches no current tenant names, once per read of the registry.
    fn prune(&self, snapshot: &Snapshot) {
        let mut pruned_for = self.pruned_for.lock().unwrap_or_else(|p| p.into_inner());
        if *pruned_for != Some(snapshot.read_at) {
            self.keys
                .retain(snapshot.tenants.values().map(|tenant| &tenant.jwks));
            *pruned_for = Some(snapshot.read_at);
        }
    }
}

/// Whether `key` verifies the signature of `parts` under `algorithm`.
///
/// Errors: [`VerifyError::Invalid`].
fn check_signature(
    parts: &Parts,
    key: &crate::jwks::VerifyingKey,
    algorithm: jsonwebtoken::Algorithm,
) -> Result<(), VerifyError> {
    let invalid = |why: &str| VerifyError::Invalid(why.to_owned());
    let mut buffer = [0; SIGNATURE_BYTES];
    let signature = match URL_SAFE_NO_PAD.decode_slice(parts.signature, &mut buffer) {
        Ok(length) => Ok(Cow::Borrowed(&buffer[..length])),
        Err(DecodeSliceError::OutputSliceTooSmall) => {
            URL_SAFE_NO_PAD.decode(parts.signature).map(Cow::Owned)
        }
        Err(DecodeSliceError::DecodeError(error)) => Err(error),
    }
    .map_err(|_| invalid("the signature is not base64url"))?;
    if !key.verifies(algorithm, parts.message.as_bytes(), &signature) {
        return Err(invalid("the signature does not verify"));
    }
    Ok(())
}

/// `exp` ahead and `nbf` (if any) behind by the system clock, give or take
/// [`LEEWAY_SECONDS`], and a `sub`.
///
/// Errors: [`VerifyError::Invalid`] saying which.
fn check_times(claims: &Claims) -> Result<(), VerifyError> {
    let invalid = |why: &str| Err(VerifyError::Invalid(why.to_owned()));
    let now = jsonwebtoken::get_current_timestamp();
    match claims.get("exp").map(ClaimValue::as_u64) {
        None => return invalid("no expiry (exp)"),
        Some(None) => return invalid("exp is not a time"),
        Some(Some(exp)) if exp.saturating_add(LEEWAY_SECONDS) <= now => {
            return invalid("the token has expired (exp)");
        }
        Some(Some(_)) => {}
    }
    match claims.get("nbf").map(ClaimValue::as_u64) {
        Some(None) => return invalid("nbf is not a time"),
        Some(Some(nbf)) if nbf > now.saturating_add(LEEWAY_SECONDS) => {
            return invalid("the token is not valid yet (nbf)");
        }
        _ => {}
    }
    if claims.get("sub").is_none() {
        return invalid("no subject (sub)");
    }
    Ok(())
}

/// The `iss` of `token`, read before anything is verified: which verifier (the console's
/// own issuer, or the tenants') and which keys to try. Never a reason to trust it.
///
/// Errors: [`VerifyError::Malformed`], or [`VerifyError::Claim`] without an `iss`.
pub fn unverified_issuer(token: &str) -> Result<String, VerifyError> {
    #[derive(serde::Deserialize)]
    struct Issuer {
        iss: Option<String>,
    }
    let claims: Issuer = jsonwebtoken::dangerous::insecure_decode_claims(token)
        .map_err(|e| VerifyError::Malformed(e.to_string()))?;
    claims.iss.ok_or_else(|| VerifyError::Claim {
        claim: "iss".into(),
        reason: "is missing".into(),
    })
}

/// Whether `claims`' `aud` (a string or a list) holds `audience`; any when `None`.
fn has_audience(claims: &Claims, audience: Option<&str>) -> bool {
    let Some(audience) = audience else {
        return true;
    };
    match claims.get("aud") {
        Some(ClaimValue::Text(aud)) => aud == audience,
        Some(ClaimValue::List(auds)) => auds.iter().any(|aud| aud.as_str() == Some(audience)),
        _ => false,
    }
}

/// The identity `claims` give in `tenant`.
fn identity(tenant: &Tenant, claims: &Claims) -> Result<TenantIdentity, VerifyError> {
    let name_claim = |claim: &str| -> Result<String, VerifyError> {
        let refuse = |reason: &str| VerifyError::Claim {
            claim: claim.to_owned(),
            reason: reason.to_owned(),
        };
        let value = claims
            .get(claim)
            .ok_or_else(|| refuse("is missing"))?
            .as_str()
            .ok_or_else(|| refuse("is not a string"))?;
        if value.is_empty() || value.len() > MAX_NAME_BYTES {
            return Err(refuse("must be 1-255 bytes"));
        }
        if value.chars().any(char::is_control) {
            return Err(refuse("holds control characters"));
        }
        Ok(value.to_owned())
    };
    let subject = name_claim("sub")?;
    let username = name_claim(&tenant.username_claim)?;
    let token_roles: &[ClaimValue] = match claims.get(&tenant.roles_claim) {
        None | Some(ClaimValue::Null) => &[],
        Some(role @ ClaimValue::Text(_)) => std::slice::from_ref(role),
        Some(ClaimValue::List(roles)) => roles,
        Some(_) => {
            return Err(VerifyError::Claim {
                claim: tenant.roles_claim.clone(),
                reason: "is neither a string nor a list of strings".into(),
            });
        }
    };
    let mut roles: Vec<RoleName> = tenant
        .allowed_roles
        .iter()
        .filter(|role| {
            token_roles
                .iter()
                .any(|token_role| token_role.as_str() == Some(role.as_str()))
        })
        .cloned()
        .collect();
    if roles.is_empty() {
        roles.push(tenant.default_role.clone());
    }
    // At most `MAX_TENANT_ROLES` = `Roles::MAX` allowed roles, so never too many.
    let roles = Roles::new(roles).map_err(|e| VerifyError::Claim {
        claim: tenant.roles_claim.clone(),
        reason: e.to_string(),
    })?;
    let text = |claim: &str| {
        claims
            .get(claim)
            .and_then(ClaimValue::as_str)
            .map(str::to_owned)
    };
    Ok(TenantIdentity {
        tenant: tenant.id.clone(),
        issuer: tenant.issuer.clone(),
        subject,
        username,
        name: text("name"),
        email: text("email"),
        roles,
        namespaces: tenant.namespaces.clone(),
        expires_at: claims
            .get("exp")
            .and_then(ClaimValue::as_u64)
            .unwrap_or_default(),
    })
}
