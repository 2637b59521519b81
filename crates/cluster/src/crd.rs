//! The `banlieue.io/v1alpha1` custom resources (SPEC §6): `VirtualMachineProvider` (who
//! makes VMs, and the anchors their EK certificates chain to), `VirtualMachinePool`,
//! `VirtualMachine` (a pool member) and `VirtualMachineClaim`; and the console's own
//! `console.banlieue.io/v1alpha1` `ConsoleTenant` (SPEC §7).
//!
//! The CRD manifests in `charts/banlieue-console/crds/` are generated from these types by
//! the `crdgen` binary ([`crd_manifests`]); a test fails when they are stale.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of every banlieue resource.
pub const GROUP: &str = "banlieue.io";
/// Label on a member naming its pool.
pub const POOL_LABEL: &str = "banlieue.io/pool";
/// Label on a member naming the claim that holds it (set by a bind).
pub const CLAIM_LABEL: &str = "banlieue.io/claim";
/// Annotation on a bound member: the claim subject's issuer.
pub const SUBJECT_ISSUER_ANNOTATION: &str = "banlieue.io/claim-subject-issuer";
/// Annotation on a bound member: the claim subject's id (raw, unprefixed).
pub const SUBJECT_ID_ANNOTATION: &str = "banlieue.io/claim-subject-id";
/// Annotation on a bound member: the bind instant (RFC 3339), so a bind finished in a
/// later pass keeps its original `boundAt` and the TTL is never extended.
pub const BOUND_AT_ANNOTATION: &str = "banlieue.io/bound-at";
/// The claim controller's finalizer.
pub const CLAIM_FINALIZER: &str = "banlieue.io/claim-protection";

/// A positive memory quantity as Kubernetes writes them (`512Mi`, `4Gi`, `1.5G`): the
/// decimal and binary suffixes of the resource.Quantity format, without exponents or signs.
pub const MEMORY_QUANTITY_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$";

/// An RFC 1123 label, as Kubernetes names objects (here: providers).
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The most members a pool may keep warm or hold (`warmReplicas`, `maxReplicas`).
pub const MAX_POOL_REPLICAS: u32 = 10_000;
/// The longest `imageRevision`, in bytes.
pub const MAX_IMAGE_REVISION_LEN: usize = 128;
/// The longest `template.image`, in bytes.
pub const MAX_IMAGE_LEN: usize = 512;
/// The most virtual CPUs of a member.
pub const MAX_CPU: u32 = 1_024;
/// Upper bound of a claim's `spec.ttlSeconds`: 30 days, in seconds.
pub const MAX_CLAIM_TTL_SECONDS: u32 = 2_592_000;
/// The longest `template.memory`, in bytes.
pub const MAX_MEMORY_LEN: usize = 32;

/// Whether `memory` is a quantity the pool schema accepts ([`MEMORY_QUANTITY_PATTERN`]).
pub fn is_memory_quantity(memory: &str) -> bool {
    static PATTERN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(MEMORY_QUANTITY_PATTERN).expect("a valid pattern")
    });
    memory.len() <= MAX_MEMORY_LEN && PATTERN.is_match(memory)
}

/// A pool of warm sandbox VMs of one template.
// `printcolumn(...)` repeats keys such as `type_ = "string"` by design of kube's derive.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VirtualMachinePool",
    doc = "A pool of warm sandbox VMs of one template.",
    namespaced,
    status = "VirtualMachinePoolStatus",
    shortname = "vmpool",
    category = "banlieue",
    printcolumn(name = "Warm", type_ = "integer", json_path = ".spec.warmReplicas"),
    printcolumn(name = "Max", type_ = "integer", json_path = ".spec.maxReplicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Claimed",
        type_ = "integer",
        json_path = ".status.claimedReplicas"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolSpec {
    /// How many Ready, unclaimed members to keep.
    #[schemars(range(max = MAX_POOL_REPLICAS))]
    pub warm_replicas: u32,
    /// Upper bound on members, counting claimed, provisioning and terminating ones.
    #[schemars(range(max = MAX_POOL_REPLICAS))]
    pub max_replicas: u32,
    /// The image revision new members run; unclaimed members of another revision are
    /// replaced.
    #[schemars(length(min = 1, max = MAX_IMAGE_REVISION_LEN))]
    pub image_revision: String,
    /// What each member looks like.
    pub template: VirtualMachineTemplate,
    /// Name of the [`VirtualMachineProvider`] that creates the VMs (e.g. `simulated`): an
    /// RFC 1123 label.
    #[schemars(length(max = 63), pattern(DNS_LABEL_PATTERN))]
    pub provider_ref: String,
    /// Seconds a member may stay not Ready before the pool reports that it is not
    /// progressing (condition `Progressing=False`). Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<u32>,
}

impl VirtualMachinePoolSpec {
    /// Checks the spec against the bounds its schema declares (the constants above), and
    /// that `warmReplicas` ≤ `maxReplicas` ≥ 1, so a person reads which field is wrong
    /// before the API server is asked.
    ///
    /// Errors: `(field, reason)` of the first field out of bounds, `field` as the form
    /// names it (`warm_replicas`, `max_replicas`, `image_revision`, `provider`, `cpu`,
    /// `memory`, `image`).
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        let template = &self.template;
        let checks = [
            (
                self.max_replicas >= 1 && self.max_replicas <= MAX_POOL_REPLICAS,
                "max_replicas",
                "between 1 and 10,000",
            ),
            (
                self.warm_replicas <= self.max_replicas,
                "warm_replicas",
                "at most the maximum",
            ),
            (
                (1..=MAX_IMAGE_REVISION_LEN).contains(&self.image_revision.len()),
                "image_revision",
                "1 to 128 characters",
            ),
            (
                banlieue_domain::object_names::is_dns_label(&self.provider_ref),
                "provider",
                "an RFC 1123 label",
            ),
            ((1..=MAX_CPU).contains(&template.cpu), "cpu", "1 to 1,024"),
            (
                is_memory_quantity(&template.memory),
                "memory",
                "a quantity such as 512Mi or 4Gi",
            ),
            (
                (1..=MAX_IMAGE_LEN).contains(&template.image.len()),
                "image",
                "1 to 512 characters",
            ),
        ];
        match checks.into_iter().find(|(ok, _, _)| !ok) {
            Some((_, field, reason)) => Err((field, reason)),
            None => Ok(()),
        }
    }
}

/// The shape of a member VM.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineTemplate {
    /// Virtual CPUs.
    #[schemars(range(min = 1, max = MAX_CPU))]
    pub cpu: u32,
    /// Memory as a Kubernetes quantity with an optional decimal or binary suffix, e.g.
    /// `4Gi`.
    #[schemars(length(max = MAX_MEMORY_LEN), pattern(MEMORY_QUANTITY_PATTERN))]
    pub memory: String,
    /// Image reference the provider boots.
    #[schemars(length(min = 1, max = MAX_IMAGE_LEN))]
    pub image: String,
}

/// Observed state of a pool.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolStatus {
    /// Ready, unclaimed members.
    #[serde(default)]
    pub ready_replicas: u32,
    /// Members held by a claim.
    #[serde(default)]
    pub claimed_replicas: u32,
    /// All members, including provisioning and terminating ones.
    #[serde(default)]
    pub replicas: u32,
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Progressing`: whether the pool is reaching `warmReplicas`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A sandbox VM: a pool member, later held by a claim.
// `printcolumn(...)` repeats keys such as `type_ = "string"` by design of kube's derive.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VirtualMachine",
    doc = "A sandbox VM: a pool member, later held by a claim.",
    namespaced,
    status = "VirtualMachineStatus",
    shortname = "vm",
    category = "banlieue",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Pool",
        type_ = "string",
        json_path = ".metadata.labels.banlieue\\.io/pool"
    ),
    printcolumn(
        name = "Claim",
        type_ = "string",
        json_path = ".metadata.labels.banlieue\\.io/claim"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// Copied from the pool's template when the member is created.
    pub template: VirtualMachineTemplate,
    /// The pool's `imageRevision` when the member was created.
    pub image_revision: String,
    /// Name of the [`VirtualMachineProvider`] that owns the VM.
    pub provider_ref: String,
}

/// Observed state of a VM, written by its provider.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    /// `Provisioning`, `Ready` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// When the VM last became Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<Time>,
    /// Network addresses of the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<VirtualMachineAddress>,
    /// The image revision the VM actually runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_revision: Option<String>,
    /// EK certificates of the VM's vTPM, one PEM `CERTIFICATE` each, issued by a CA of its
    /// provider's `spec.attestation.ekTrustBundle`. Published before any claim exists, so
    /// nothing in them is subject-specific. At most 8, of at most 16 KiB each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_EK_CERTIFICATES), inner(length(max = MAX_EK_CERTIFICATE_LEN)))]
    pub tpm_endorsement_certificates: Vec<String>,
    /// Human-readable detail from the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One address of a VM (same shape as a Node's `status.addresses` entries).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct VirtualMachineAddress {
    /// `InternalIP`, `ExternalIP` or `Hostname`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}

/// A request for one sandbox VM from a pool, for a subject, for `ttlSeconds` from bind.
// `printcolumn(...)` repeats keys such as `type_ = "string"` by design of kube's derive.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VirtualMachineClaim",
    doc = "A request for one sandbox VM from a pool, for a subject, for ttlSeconds from bind.",
    namespaced,
    status = "VirtualMachineClaimStatus",
    shortname = "vmclaim",
    category = "banlieue",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.poolRef"),
    printcolumn(name = "Subject", type_ = "string", json_path = ".spec.subject.id"),
    printcolumn(name = "VM", type_ = "string", json_path = ".status.virtualMachineRef"),
    printcolumn(
        name = "Expires",
        type_ = "string",
        description = "When the claim and its VM are released (RFC 3339)",
        json_path = ".status.expiresAt"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineClaimSpec {
    /// Name of the `VirtualMachinePool` in the claim's namespace. Immutable (admission).
    pub pool_ref: String,
    /// Lifetime in seconds, counted from the bind instant, never extended. Immutable.
    /// At most 30 days (2,592,000 s): sandboxes are short-lived.
    #[schemars(range(min = 1, max = MAX_CLAIM_TTL_SECONDS))]
    pub ttl_seconds: u32,
    /// Whom the sandbox is handed to. Immutable; checked against the caller at creation.
    pub subject: ClaimSubject,
}

/// The identity a sandbox is attributed to: the raw subject as a token of `issuer`
/// carries it (no Kubernetes username prefix).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimSubject {
    /// OIDC issuer URL.
    pub issuer: String,
    /// The subject's id at that issuer.
    pub id: String,
}

/// Observed state of a claim, written by the claim controller.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineClaimStatus {
    /// `Pending`, `Bound`, `Releasing` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Machine-readable cause of the phase (`NoReadyMember`, `Expired`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Name of the bound `VirtualMachine`; never changes once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_ref: Option<String>,
    /// The bind instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_at: Option<Time>,
    /// `boundAt + spec.ttlSeconds`: when the claim and its VM are released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    /// The bound VM's addresses, mirrored; cleared on release.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<VirtualMachineAddress>,
    /// The bound VM's `status.tpmEndorsementCertificates` (PEM), mirrored so a broker
    /// reading the claim finds them; cleared on release.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_EK_CERTIFICATES), inner(length(max = MAX_EK_CERTIFICATE_LEN)))]
    pub tpm_endorsement_certificates: Vec<String>,
    /// While Bound, `EndorsementVerified`: whether every EK certificate of the member is its
    /// own and chains to its provider's `ekTrustBundle`. One condition per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Claim condition type: `True` when the bound member publishes EK certificates and each
/// chains to a CA of its provider's `spec.attestation.ekTrustBundle` (checked by the claim
/// controller with the X.509 path rules of RFC 5280); `False` with one of the
/// `ENDORSEMENT_*` reasons otherwise. A broker opens an attested channel only when `True`.
pub const ENDORSEMENT_VERIFIED_CONDITION: &str = "EndorsementVerified";

/// The most EK certificates a VM publishes (a vTPM has an RSA and an ECC EK, and
/// perhaps a few more).
pub const MAX_EK_CERTIFICATES: usize = 8;
/// The longest EK certificate entry, in bytes of PEM.
pub const MAX_EK_CERTIFICATE_LEN: usize = 16 * 1024;

/// The most bytes of `spec.attestation.ekTrustBundle`.
pub const MAX_TRUST_BUNDLE_LEN: usize = 256 * 1024;

/// Who makes a pool's VMs, named by the pools' `providerRef`, and what a broker needs to
/// check the VMs' vTPMs: the CA certificates their EK certificates chain to.
/// Cluster-scoped: one provider serves pools of every namespace. Its name must be an RFC
/// 1123 label to be named by a pool.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VirtualMachineProvider",
    doc = "Who makes a pool's VMs, and the CA certificates their vTPMs' EK certificates chain to.",
    shortname = "vmprovider",
    category = "banlieue",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineProviderSpec {
    /// What the provider's VMs prove about themselves; absent for a provider whose VMs
    /// have no vTPM (their claims are never `EndorsementVerified`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<ProviderAttestation>,
}

/// The trust anchors of a provider's vTPMs.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderAttestation {
    /// PEM `CERTIFICATE` blocks: the hypervisor EK CAs that issue the EK certificates of
    /// this provider's VMs (several while a CA is rotated, or one per host).
    #[schemars(length(max = MAX_TRUST_BUNDLE_LEN))]
    pub ek_trust_bundle: String,
}

/// API group of the console's own resources.
pub const CONSOLE_GROUP: &str = "console.banlieue.io";

/// The most roles a tenant may allow: as many as one person may hold
/// ([`banlieue_domain::Roles::MAX`]), so any of its people's sets of roles is one.
pub const MAX_TENANT_ROLES: usize = banlieue_domain::Roles::MAX;
/// The most namespaces a tenant's people may claim in.
pub const MAX_TENANT_NAMESPACES: usize = 64;

/// A tenant of the console (SPEC §7): an organisation whose people sign in through their
/// own OpenID Connect provider. The console verifies a tenant's tokens with that
/// provider's keys, issuer and audience, and only when the token's tenant claim names
/// this tenant. Namespaced: the console reads the ConsoleTenants of its own namespace.
// `printcolumn(...)` repeats keys such as `type_ = "string"` by design of kube's derive.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "console.banlieue.io",
    version = "v1alpha1",
    kind = "ConsoleTenant",
    doc = "A tenant of the console: who its people are, through which OpenID Connect provider, with which roles, claiming where.",
    namespaced,
    shortname = "tenant",
    category = "banlieue",
    printcolumn(name = "Tenant", type_ = "string", json_path = ".spec.tenantId"),
    printcolumn(name = "Enabled", type_ = "boolean", json_path = ".spec.enabled"),
    printcolumn(name = "Issuer", type_ = "string", json_path = ".spec.oidc.issuer"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsoleTenantSpec {
    /// The tenant's identifier: an RFC 1123 label, unique among the console's tenants. Its
    /// people are `oidc:<tenantId>:<username>` to Kubernetes, and a token is this tenant's
    /// only when its tenant claim (`oidc.tenantClaim`) equals it.
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL_PATTERN))]
    pub tenant_id: String,
    /// Whether its people may sign in and call the API; `false` suspends the tenant (its
    /// tokens are refused with 403). Default true.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// The name people see ("Sign in with …"); default: `tenantId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub display_name: Option<String>,
    /// The tenant's OpenID Connect provider and where its tokens say who and what.
    pub oidc: TenantOidc,
    /// The role of a person whose token names none of `allowedRoles`; one of them.
    #[schemars(length(min = 1, max = 31))]
    pub default_role: String,
    /// The console roles this tenant's tokens may give (`console:<role>` in Kubernetes):
    /// roles a token names outside this list are dropped.
    #[schemars(length(min = 1, max = MAX_TENANT_ROLES), inner(length(min = 1, max = 31)))]
    pub allowed_roles: Vec<String>,
    /// The namespaces this tenant's people may claim sandboxes in.
    #[schemars(
        length(min = 1, max = MAX_TENANT_NAMESPACES),
        inner(length(max = 63), pattern(DNS_LABEL_PATTERN))
    )]
    pub namespaces: Vec<String>,
}

fn enabled_by_default() -> bool {
    true
}

/// A tenant's OpenID Connect provider, and the claims of its ID tokens the console reads.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantOidc {
    /// The provider's issuer URL, as its tokens' `iss` spells it, byte for byte: https, or
    /// http to a loopback address.
    #[schemars(length(min = 1, max = 2048))]
    pub issuer: String,
    /// Where the provider publishes its JWK Set (https, or http to a loopback address);
    /// default: the `jwks_uri` of its discovery document
    /// (`<issuer>/.well-known/openid-configuration`).
    #[serde(default, rename = "jwksURL", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub jwks_url: Option<String>,
    /// The `aud` the console requires (its client id at the provider). Without one, any
    /// audience is accepted, and the console warns at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub audience: Option<String>,
    /// The claim naming the person's tenant; it must equal `tenantId`.
    #[schemars(length(min = 1, max = 128))]
    pub tenant_claim: String,
    /// The claim naming the person (a string), e.g. `sub` or `preferred_username`.
    #[schemars(length(min = 1, max = 128))]
    pub username_claim: String,
    /// The claim listing the person's roles (an array of strings, or one string).
    #[schemars(length(min = 1, max = 128))]
    pub roles_claim: String,
}

/// The CRD manifests as YAML documents, keyed by file name
/// (`<plural>.<group>.yaml`), in a stable order.
///
/// Errors: YAML serialization (not expected for these types).
pub fn crd_manifests() -> Result<Vec<(String, String)>, serde_yaml::Error> {
    let crds = [
        VirtualMachineProvider::crd(),
        VirtualMachinePool::crd(),
        VirtualMachine::crd(),
        VirtualMachineClaim::crd(),
        ConsoleTenant::crd(),
    ];
    crds.into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let yaml = serde_yaml::to_string(&crd)?;
            Ok((
                format!("{name}.yaml"),
                format!("# Generated by `cargo run -p banlieue-cluster --bin crdgen`; do not edit.\n{yaml}"),
            ))
        })
        .collect()
}
