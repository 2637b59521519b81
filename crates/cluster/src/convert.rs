//! Between the API types and the pure rules' view of them.

use banlieue_domain::claim::{Member, MemberPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use time::OffsetDateTime;

use crate::crd::{CLAIM_LABEL, VirtualMachine};

/// `OffsetDateTime` → Kubernetes `Time` (whole seconds, as the API server stores it).
pub(crate) fn to_time(at: OffsetDateTime) -> Time {
    Time(Timestamp::from_second(at.unix_timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Kubernetes `Time` → `OffsetDateTime`.
pub(crate) fn from_time(at: &Time) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(at.0.as_second()).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// Now, truncated to whole seconds.
pub(crate) fn now() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(0).unwrap_or(now)
}

/// RFC 3339 text of a whole-second instant (annotations).
pub(crate) fn rfc3339(at: OffsetDateTime) -> String {
    to_time(at).0.to_string()
}

/// Parses what [`rfc3339`] wrote.
pub(crate) fn parse_rfc3339(text: &str) -> Option<OffsetDateTime> {
    text.parse::<Timestamp>().ok().map(|t| from_time(&Time(t)))
}

/// `status.phase` text → [`MemberPhase`].
pub(crate) fn member_phase(phase: Option<&str>) -> Option<MemberPhase> {
    match phase? {
        "Provisioning" => Some(MemberPhase::Provisioning),
        "Ready" => Some(MemberPhase::Ready),
        "Failed" => Some(MemberPhase::Failed),
        _ => None,
    }
}

/// The uid of the `VirtualMachineClaim` named in `vm`'s ownerReferences, if any.
pub(crate) fn owning_claim_uid(vm: &VirtualMachine) -> Option<String> {
    vm.owner_references()
        .iter()
        .find(|o| o.kind == "VirtualMachineClaim" && o.api_version.starts_with("banlieue.io/"))
        .map(|o| o.uid.clone())
}

/// The rules' view of a `VirtualMachine`.
pub(crate) fn member(vm: &VirtualMachine) -> Member {
    let status = vm.status.as_ref();
    Member {
        name: vm.name_any(),
        phase: member_phase(status.and_then(|s| s.phase.as_deref())),
        ready_since: status.and_then(|s| s.ready_since.as_ref()).map(from_time),
        image_revision: status.and_then(|s| s.image_revision.clone()),
        claim: vm.labels().get(CLAIM_LABEL).cloned(),
        claim_uid: owning_claim_uid(vm),
        deleting: vm.metadata.deletion_timestamp.is_some(),
    }
}
