//! Counters of tenant token verification for `/metrics` (SPEC §9): verifications by
//! tenant and result, and JWK Set fetches by endpoint and result. Their labels come from
//! the tenant registry and fixed codes, never from a token, so a stream of forged tokens
//! cannot grow the number of series.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The `tenant` label of a verification no tenant could be held to (a malformed token,
/// an issuer no tenant has, a signature no key of the issuer's tenants verifies, …): not
/// an RFC 1123 label, so no tenant id.
pub const NO_TENANT: &str = "-";

/// Label set of `banlieue_tenant_token_verifications_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerificationLabels {
    /// The tenant whose provider verified the token and whose claim it names, or
    /// [`NO_TENANT`].
    pub tenant: String,
    /// `success`, or the refusal's [`crate::VerifyError::code`].
    pub result: &'static str,
}

/// Label set of `banlieue_tenant_jwks_fetches_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FetchLabels {
    /// The JWK Set URL, or the issuer's discovery URL when the tenant names none.
    pub endpoint: String,
    /// `success` or `failure` (the reason goes to the log).
    pub result: &'static str,
}

/// The tenants' counters, monotonic since the process started; cheap to clone (the
/// counters are shared).
#[derive(Debug, Clone, Default)]
pub struct TenantMetrics {
    /// `banlieue_tenant_token_verifications_total{tenant,result}`.
    pub verifications: Family<VerificationLabels, Counter>,
    /// `banlieue_tenant_jwks_fetches_total{endpoint,result}`.
    pub jwks_fetches: Family<FetchLabels, Counter>,
}

impl TenantMetrics {
    /// Adds the counters to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "banlieue_tenant_token_verifications",
            "Tenant ID tokens verified, by tenant (- when none could be held to) and result",
            self.verifications.clone(),
        );
        registry.register(
            "banlieue_tenant_jwks_fetches",
            "Fetches of tenant providers' JWK Sets, by endpoint and result",
            self.jwks_fetches.clone(),
        );
    }
}
