//! What the console's pages and API show about the cluster: the views the use cases
//! return (built on the server, rendered by the pages and sent in live snapshots).
//! Instants are formatted by [`format_instant`].

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::claim::{ClaimPhase, ClaimReason};

/// An instant as every page writes it: `YYYY-MM-DD HH:MM UTC`.
pub fn format_instant(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute()
    )
}

/// One resource of the "What can I do?" matrix: verb → allowed, in every namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRow {
    /// The plural resource name, e.g. `virtualmachineclaims`.
    pub resource: String,
    pub verbs: Vec<(String, bool)>,
}

/// The dashboard: the pools the person may see and their own claims (SPEC §6).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardView {
    /// Whether the console is connected to a cluster at all.
    pub cluster: bool,
    pub pools: Vec<PoolRow>,
    pub claims: Vec<ClaimRow>,
    /// Every claim the person may list, for operators and admins (SPEC §6); empty for
    /// others.
    pub all_claims: Vec<ClaimRow>,
    /// Lifetimes offered when claiming, in seconds.
    pub ttl_choices: Vec<u32>,
    /// The lifetime the claim forms start with: the one this browser claimed with last,
    /// or the one a refused claim asked for. Set by the page's handler; live snapshots
    /// leave it out (the page keeps what was chosen).
    pub ttl_chosen: Option<u32>,
}

/// A VirtualMachinePool as the dashboard shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRow {
    pub namespace: String,
    pub name: String,
    /// Ready, unclaimed members.
    pub ready: u32,
    pub claimed: u32,
    pub max: u32,
    /// Whether Kubernetes lets this person create claims in the namespace
    /// (SelfSubjectAccessReview).
    pub can_claim: bool,
}

/// A VirtualMachineClaim as the dashboard shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRow {
    pub namespace: String,
    pub name: String,
    /// `spec.subject.id`: whom the sandbox is for.
    pub subject: String,
    pub pool: String,
    /// `Pending`, `Bound`, `Releasing`, `Failed`, or empty before the controller saw it.
    /// `status.phase`; `None` before the claim controller has seen the claim.
    pub phase: Option<ClaimPhase>,
    /// `status.reason`, typed where the claim controller wrote it.
    pub reason: Option<ClaimReason>,
    /// `status.message`: the controller's explanation, in English.
    pub message: String,
    /// When the lifetime ends ([`format_instant`]).
    pub expires_at: Option<String>,
    /// Seconds left when the page was rendered.
    pub remaining_secs: Option<i64>,
    pub addresses: Vec<String>,
    /// Whether to offer Release: Kubernetes RBAC allows the person to delete claims in
    /// the namespace (SelfSubjectAccessReview), and the claim is theirs or they oversee
    /// claims. The release admission policy still decides.
    pub can_release: bool,
}

/// One claim's page (SPEC §8): the dashboard's row and what only the detail shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimView {
    pub claim: ClaimRow,
    /// `spec.subject.issuer`: the identity provider of the subject.
    pub issuer: String,
    /// The issuer is this console's own (its `BANLIEUE_EXTERNAL_URL`): the subject signed
    /// in here, not through a tenant's identity provider.
    pub issued_here: bool,
    pub ttl_seconds: u32,
    /// [`format_instant`].
    pub created_at: Option<String>,
    /// When the claim became Bound ([`format_instant`]) (the lifetime counts from here).
    pub bound_at: Option<String>,
    /// `status.virtualMachineRef`: the member VM bound to the claim.
    pub virtual_machine: Option<String>,
    /// The bound VM's EK certificates (`status.tpmEndorsementCertificates`), each checked
    /// against its provider's trust bundle as the person can read it.
    pub endorsement_certificates: Vec<EndorsementCertificateView>,
    /// The claim controller's verdict (condition `EndorsementVerified`), what a broker
    /// reads; `None` until the claim is Bound.
    pub endorsement_verified: Option<EndorsementVerdict>,
    /// The claim no longer exists: released or expired while the page was open.
    pub gone: bool,
}

/// One EK certificate of a claim's VM, as the claim page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndorsementCertificateView {
    /// SHA-256 of the DER certificate, `AB:CD:…`; empty when the PEM is unreadable.
    pub fingerprint_sha256: String,
    /// The issuer's distinguished name (RFC 4514).
    pub issuer: String,
    /// URI subject alternative names: the VM's identity.
    pub identities: Vec<String>,
    /// Whether it chains to the provider's `ekTrustBundle`.
    pub trust: EndorsementTrust,
}

/// What the console found checking one EK certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndorsementTrust {
    /// Chains to a CA of the provider's trust bundle.
    Trusted,
    /// Unreadable, or does not chain; `detail` is the X.509 reason (English).
    Untrusted { detail: String },
    /// Not checked: the provider or its bundle is missing or not readable with the
    /// person's roles; `detail` says which (English).
    Unchecked { detail: String },
}

/// A claim's `EndorsementVerified` condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndorsementVerdict {
    /// `status: True`.
    pub verified: bool,
    /// The condition's reason (`ChainsToTrustBundle`, `UntrustedCertificate`, …).
    pub reason: String,
    /// The controller's explanation (English).
    pub message: String,
}

impl ClaimView {
    /// What the page shows once the claim `namespace/name` has been deleted.
    pub fn gone(namespace: &str, name: &str) -> Self {
        Self {
            claim: ClaimRow {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                ..ClaimRow::default()
            },
            gone: true,
            ..Self::default()
        }
    }
}

/// The Roles page: each role's Kubernetes rules, read as the admin, and who holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolesView {
    pub builtin: Vec<RoleRow>,
    pub custom: Vec<RoleRow>,
    /// The banlieue.io resources and verbs a custom role may grant (the form's grid).
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    /// The custom role being edited (`?edit=<name>`), whose grants pre-fill the form.
    pub editing: Option<RoleRow>,
}

/// A role as the Roles page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleRow {
    pub name: String,
    /// The ClusterRole's `resourceVersion`: what an edit of the role is made from.
    pub version: String,
    /// One line per rule, e.g. `get, list, watch — virtualmachineclaims (banlieue.io)`.
    pub rules: Vec<String>,
    /// (resource, verb) pairs granted on banlieue.io, for the edit form.
    pub grants: Vec<(String, String)>,
    /// Console users holding the role.
    pub holders: Vec<String>,
}

/// The Pools page (operators): every pool the person may list, and the form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolsView {
    pub pools: Vec<PoolForm>,
    /// What the form shows: the pool being edited (`?edit=<ns>/<name>`), or defaults.
    pub form: PoolForm,
    /// Whether Kubernetes lets the person create pools in every namespace
    /// (SelfSubjectAccessReview): only then the form and the Edit / Delete buttons show.
    pub can_manage: bool,
    /// The VirtualMachineProviders that exist, by name, for the form's choice; `None`
    /// when Kubernetes does not let the person list them (the form then takes a name).
    pub providers: Option<Vec<String>>,
}

/// A VirtualMachinePool's settings, as listed and as edited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolForm {
    pub namespace: String,
    pub name: String,
    pub warm_replicas: u32,
    pub max_replicas: u32,
    pub image_revision: String,
    pub cpu: u32,
    /// A Kubernetes quantity, e.g. `4Gi`.
    pub memory: String,
    pub image: String,
    pub provider: String,
    /// Ready / claimed / all members, when listed.
    pub ready: u32,
    pub claimed: u32,
    pub total: u32,
    /// Why the pool is not reaching `warmReplicas`, when listed and it is not: its
    /// `Progressing=False` condition.
    pub stalled: Option<PoolStall>,
}

/// A pool's `Progressing=False` condition, as the pool controller wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStall {
    /// The condition's `reason`, e.g. [`PoolStall::PROVIDER_NOT_FOUND`].
    pub reason: String,
    /// Its `message`, in English, for a reason the page does not translate.
    pub message: String,
}

impl PoolStall {
    /// The reason for a `providerRef` naming no VirtualMachineProvider.
    pub const PROVIDER_NOT_FOUND: &str = "ProviderNotFound";
}
