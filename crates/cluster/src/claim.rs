//! The claim controller (SPEC §6, claim design seed sections 3–5): binds a Ready member to
//! each `VirtualMachineClaim`, holds it, and releases it on deletion or expiry.
//!
//! Each pass reads a snapshot, asks [`banlieue_domain::claim::next_step`] what to do, and
//! does exactly that one thing. Every write is safe to repeat: the member patch carries a
//! `resourceVersion` precondition (the API server is the only serialisation point), a bind
//! interrupted between the member patch and the status write is finished from the member
//! (its `banlieue.io/bound-at` annotation keeps the original bind instant), and status is
//! written only when it differs.

use std::sync::Arc;
use std::time::Duration;

use banlieue_domain::claim::{
    ClaimPhase, ClaimSnapshot, ClaimStep, Member, ReleaseReason, WaitReason, next_step,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::attestation;
use crate::convert::{self, from_time, parse_rfc3339, rfc3339, to_time};
use crate::crd::{
    BOUND_AT_ANNOTATION, CLAIM_FINALIZER, CLAIM_LABEL, ENDORSEMENT_VERIFIED_CONDITION,
    SUBJECT_ID_ANNOTATION, SUBJECT_ISSUER_ANNOTATION, VirtualMachine, VirtualMachineAddress,
    VirtualMachineClaim, VirtualMachineClaimStatus, VirtualMachinePool, VirtualMachineProvider,
};
use crate::error::{Error, is_status};
use crate::member_index::MemberIndex;
use crate::metrics::Metrics;

/// Requeue after losing a bind race (409 on the member patch): pick again.
pub const BIND_CONFLICT_REQUEUE: Duration = Duration::from_secs(1);
/// Requeue of a Pending claim: the shortest in the controller, a human is waiting.
pub const PENDING_REQUEUE: Duration = Duration::from_secs(3);
/// Requeue while a released member is still terminating.
pub const RELEASE_REQUEUE: Duration = Duration::from_secs(1);
/// Longest sleep of a Bound claim between passes (it also wakes at `expiresAt`).
pub const HOLD_REQUEUE_MAX: Duration = Duration::from_secs(300);

/// What a claim reconcile may touch.
#[derive(Clone)]
pub struct ClaimContext {
    /// API client (the controller's own identity).
    pub client: Client,
    /// Cache of `VirtualMachine`s: candidates for binding (stale reads are safe, the bind
    /// carries a resourceVersion precondition).
    pub members: Store<VirtualMachine>,
    /// Cache of `VirtualMachinePool`s: the current image revision.
    pub pools: Store<VirtualMachinePool>,
    /// Cache of `VirtualMachineProvider`s: the trust bundles a bound member's EK
    /// certificates are checked against.
    pub providers: Store<VirtualMachineProvider>,
    /// The members a bind may take, by pool, in pick order; fed by the member watch
    /// ([`MemberIndex`]).
    pub members_index: Arc<MemberIndex>,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

fn missing(field: &'static str) -> Error {
    Error::MissingField {
        kind: "VirtualMachineClaim",
        field,
    }
}

/// One reconcile pass of a claim. Public so tests can drive passes directly, e.g. with a
/// stale claim object and a frozen cache.
///
/// Errors: API failures other than the expected 404/409, which are turned into requeues.
pub async fn reconcile_claim(
    claim: Arc<VirtualMachineClaim>,
    ctx: Arc<ClaimContext>,
) -> Result<Action, Error> {
    ctx.metrics.reconciles.claim.inc();
    let namespace = claim.namespace().ok_or_else(|| missing("namespace"))?;
    let name = claim.name_any();
    let uid = claim.uid().ok_or_else(|| missing("uid"))?;
    let claims: Api<VirtualMachineClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let vms: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let has_finalizer =
        |c: &VirtualMachineClaim| c.finalizers().iter().any(|f| f == CLAIM_FINALIZER);
    let mut claim = claim;
    if !has_finalizer(&claim) {
        // The cache may only be missing the finalizer an earlier pass added: read the live
        // object first, so a stale copy costs a read instead of a refused write.
        let Some(live) = claims.get_opt(&name).await? else {
            return Ok(Action::await_change());
        };
        if live.uid().as_deref() != Some(uid.as_str()) {
            return Ok(Action::await_change());
        }
        claim = Arc::new(live);
    }
    let deleting = claim.metadata.deletion_timestamp.is_some();
    if deleting && !has_finalizer(&claim) {
        return Ok(Action::await_change());
    }
    // Binds happen only in passes that found the finalizer on the live claim: when this
    // pass adds it (with the live object's resourceVersion as precondition), no member was
    // bound to this claim unless someone removed the finalizer by hand, which leaves the
    // member labelled in the cache (checked below before skipping the API read for it).
    let first_pass = !has_finalizer(&claim);
    if first_pass {
        let mut finalizers = claim.finalizers().to_vec();
        finalizers.push(CLAIM_FINALIZER.to_owned());
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": claim.resource_version(),
        }});
        ctx.metrics.writes.claim.inc();
        match claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => claim = Arc::new(patched),
            Err(e) if is_status(&e, 409) => return Ok(Action::requeue(BIND_CONFLICT_REQUEUE)),
            Err(e) if is_status(&e, 404) => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
    }

    // A pass queued while the previous one bound often sees the claim from before that
    // bind's status: one read of the live claim then names the member, where looking for
    // it would list every member.
    let recorded = |c: &VirtualMachineClaim| {
        c.status
            .as_ref()
            .is_some_and(|s| s.virtual_machine_ref.is_some())
    };
    if !first_pass && !recorded(&claim) {
        match claims.get_opt(&name).await? {
            Some(live) if live.uid().as_deref() == Some(uid.as_str()) => claim = Arc::new(live),
            _ => return Ok(Action::await_change()),
        }
    }
    let status = claim.status.clone().unwrap_or_default();
    let reference = status.virtual_machine_ref.as_deref();
    let nothing_held =
        first_pass && reference.is_none() && !ctx.members_index.holds_any(&namespace, &name);
    let held_vm = if nothing_held {
        None
    } else {
        find_held(&vms, &ctx.members, &namespace, &name, &uid, reference).await?
    };
    let held = held_vm.as_ref().map(convert::member);
    let pool = ctx
        .pools
        .get(&ObjectRef::new(&claim.spec.pool_ref).within(&namespace));
    let now = convert::now();
    let mut snapshot = ClaimSnapshot {
        uid: &uid,
        deleting,
        phase: parse_phase(status.phase.as_deref()),
        expires_at: status.expires_at.as_ref().map(from_time),
        virtual_machine_ref: reference,
        held: held.as_ref(),
        pool_image_revision: pool.as_ref().map(|p| p.spec.image_revision.as_str()),
        members: &[],
    };
    let mut step = next_step(&snapshot, now);
    // Only a pass that would pick needs the members: the index's best candidates (one
    // critical section from reading them to reserving the pick, so two concurrent passes
    // of this process never pick the same member).
    let members: Vec<Member>;
    if matches!(
        step,
        ClaimStep::Wait {
            reason: WaitReason::NoReadyMember
        }
    ) {
        let mut pick = ctx.members_index.pick();
        members = pick
            .candidates(
                &namespace,
                &claim.spec.pool_ref,
                snapshot.pool_image_revision,
                |member| {
                    ctx.members
                        .get(&ObjectRef::new(member).within(&namespace))
                        .is_some_and(|vm| convert::member(&vm).is_available())
                },
            )
            .iter()
            .filter_map(|member| ctx.members.get(&ObjectRef::new(member).within(&namespace)))
            .map(|vm| convert::member(&vm))
            .collect();
        snapshot.members = &members;
        step = next_step(&snapshot, now);
        if let ClaimStep::Bind {
            member,
            already_taken: false,
        } = &step
            && let Some(vm) = ctx
                .members
                .get(&ObjectRef::new(&member.name).within(&namespace))
        {
            pick.reserve(
                &namespace,
                &member.name,
                vm.resource_version().as_deref().unwrap_or_default(),
            );
        }
    }
    tracing::debug!(claim = %name, %namespace, ?step, "claim step");
    let writer = Writer {
        claims: &claims,
        claim: &claim,
        status: &status,
        providers: &ctx.providers,
        metrics: &ctx.metrics,
    };
    match step {
        ClaimStep::Release { reason } => release(&writer, &vms, held_vm.as_ref(), reason).await,
        ClaimStep::Fail => {
            let message = format!(
                "VirtualMachine {} is gone; a claim is never rebound to another VM: delete \
                 this claim and create a new one",
                reference.unwrap_or("?")
            );
            writer
                .status(
                    ClaimPhase::Failed,
                    Some(banlieue_domain::claim::ClaimReason::VIRTUAL_MACHINE_GONE),
                    Some(&message),
                )
                .await?;
            Ok(Action::await_change())
        }
        ClaimStep::Hold { member } => {
            let vm = held_vm.as_ref().filter(|vm| vm.name_any() == member.name);
            let mirror = writer.mirror(vm, now);
            if status.phase.as_deref() != Some("Bound") || !mirror.matches(&status) {
                let mut patch = mirror.to_json();
                patch["phase"] = json!("Bound");
                writer.patch_status(patch).await?;
            }
            Ok(hold_requeue(snapshot.expires_at, now))
        }
        ClaimStep::Bind {
            member,
            already_taken,
        } => {
            let vm = if already_taken {
                held_vm.clone()
            } else {
                ctx.members
                    .get(&ObjectRef::new(&member.name).within(&namespace))
                    .map(|vm| (*vm).clone())
            };
            let Some(vm) = vm else {
                return Ok(Action::requeue(BIND_CONFLICT_REQUEUE));
            };
            let result = bind(&writer, &vms, vm, already_taken, now).await;
            if result.is_err() && !already_taken {
                // Not a race: later passes consider the member again, as the cache has it
                // now (the member patch may have landed before the failure).
                let now = ctx
                    .members
                    .get(&ObjectRef::new(&member.name).within(&namespace));
                ctx.members_index
                    .release(&namespace, &member.name, now.as_deref());
            }
            result
        }
        ClaimStep::Wait { reason } => {
            // Nothing free, and the pool says why it makes none: the claim says so too.
            let stalled = pool.as_ref().and_then(|pool| {
                pool.status
                    .as_ref()?
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Progressing" && c.status == "False")
            });
            let (reason, message) = match (reason, stalled) {
                (WaitReason::PoolNotFound, _) => (
                    reason,
                    format!(
                        "VirtualMachinePool {} does not exist in namespace {namespace}",
                        claim.spec.pool_ref
                    ),
                ),
                (_, Some(condition)) => (
                    WaitReason::PoolNotProgressing,
                    format!(
                        "no Ready VirtualMachine is free in pool {}, and it is not making \
                         any ({}): {}",
                        claim.spec.pool_ref, condition.reason, condition.message
                    ),
                ),
                (_, None) => (
                    WaitReason::NoReadyMember,
                    format!(
                        "no Ready VirtualMachine is free in pool {}; waiting for the pool to \
                         provide one",
                        claim.spec.pool_ref
                    ),
                ),
            };
            writer
                .status(ClaimPhase::Pending, Some(reason.as_str()), Some(&message))
                .await?;
            Ok(Action::requeue(PENDING_REQUEUE))
        }
    }
}

/// Error policy of the claim controller: count and retry soon.
pub(crate) fn claim_error_policy(
    _claim: Arc<VirtualMachineClaim>,
    error: &Error,
    ctx: Arc<ClaimContext>,
) -> Action {
    ctx.metrics.reconcile_errors.claim.inc();
    tracing::warn!(%error, "claim reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

fn parse_phase(phase: Option<&str>) -> Option<ClaimPhase> {
    match phase? {
        "Pending" => Some(ClaimPhase::Pending),
        "Bound" => Some(ClaimPhase::Bound),
        "Releasing" => Some(ClaimPhase::Releasing),
        "Failed" => Some(ClaimPhase::Failed),
        _ => None,
    }
}

/// What a Bound claim's status mirrors from its member: addresses, EK certificates, and
/// the verdict on those certificates.
#[derive(Debug, PartialEq)]
struct Mirror {
    addresses: Vec<VirtualMachineAddress>,
    certificates: Vec<String>,
    conditions: Vec<Condition>,
}

impl Mirror {
    /// Whether `status` already shows this.
    fn matches(&self, status: &VirtualMachineClaimStatus) -> bool {
        status.addresses == self.addresses
            && status.tpm_endorsement_certificates == self.certificates
            && status.conditions == self.conditions
    }

    /// The status fields as a merge patch (empty lists written as `null`: removed).
    fn to_json(&self) -> Value {
        let list = |value: Value| match value {
            Value::Array(items) if items.is_empty() => Value::Null,
            value => value,
        };
        json!({
            "addresses": list(json!(self.addresses)),
            "tpmEndorsementCertificates": list(json!(self.certificates)),
            "conditions": list(json!(self.conditions)),
        })
    }
}

fn hold_requeue(expires_at: Option<OffsetDateTime>, now: OffsetDateTime) -> Action {
    let until = expires_at
        .map(|at| (at - now).unsigned_abs())
        .unwrap_or(HOLD_REQUEUE_MAX);
    Action::requeue(until.clamp(Duration::from_millis(200), HOLD_REQUEUE_MAX))
}

/// The member this claim holds: the one named by `status.virtualMachineRef` when set, else
/// any member whose ownerReference is this claim (a bind whose status write has not landed
/// or is not visible yet). Read from the API server, except that a recorded member the
/// cache shows still owned by this claim, publishing no EK certificate, is taken from the
/// cache: a cache a moment behind may only keep a claim Bound until the member's deletion
/// reaches it, never fail it or bind another member.
async fn find_held(
    vms: &Api<VirtualMachine>,
    cache: &Store<VirtualMachine>,
    namespace: &str,
    name: &str,
    uid: &str,
    reference: Option<&str>,
) -> Result<Option<VirtualMachine>, Error> {
    if let Some(reference) = reference {
        // A member publishing EK certificates is read from the API server: the verdict on
        // them must not rest on a cache behind the change that woke this pass.
        let cached = cache
            .get(&ObjectRef::new(reference).within(namespace))
            .filter(|vm| {
                convert::owning_claim_uid(vm).as_deref() == Some(uid)
                    && vm.metadata.deletion_timestamp.is_none()
                    && vm
                        .status
                        .as_ref()
                        .is_none_or(|s| s.tpm_endorsement_certificates.is_empty())
            });
        if let Some(vm) = cached {
            return Ok(Some((*vm).clone()));
        }
        return Ok(vms.get_opt(reference).await?);
    }
    let selector = format!("{CLAIM_LABEL}={name}");
    let list = vms.list(&ListParams::default().labels(&selector)).await?;
    Ok(list
        .items
        .into_iter()
        .find(|vm| convert::owning_claim_uid(vm).as_deref() == Some(uid)))
}

struct Writer<'a> {
    claims: &'a Api<VirtualMachineClaim>,
    claim: &'a VirtualMachineClaim,
    status: &'a VirtualMachineClaimStatus,
    providers: &'a Store<VirtualMachineProvider>,
    metrics: &'a Metrics,
}

impl Writer<'_> {
    /// What the claim mirrors from `vm` (its bound member; `None`: nothing, as once it is
    /// released): its addresses and each of its EK certificates that is one PEM
    /// certificate, as PEM encoded again from its DER (so nothing else in the entry is
    /// ever copied), checked against the trust bundle of `vm`'s provider at
    /// `now`. The `EndorsementVerified` condition keeps its `lastTransitionTime` while its
    /// status holds; conditions of other types are kept as they are.
    fn mirror(&self, vm: Option<&VirtualMachine>, now: OffsetDateTime) -> Mirror {
        let mut conditions: Vec<Condition> = self
            .status
            .conditions
            .iter()
            .filter(|c| c.type_ != ENDORSEMENT_VERIFIED_CONDITION)
            .cloned()
            .collect();
        let Some(vm) = vm else {
            return Mirror {
                addresses: Vec::new(),
                certificates: Vec::new(),
                conditions,
            };
        };
        let vm_status = vm.status.clone().unwrap_or_default();
        let provider_name = &vm.spec.provider_ref;
        let provider = self.providers.get(&ObjectRef::new(provider_name));
        let bundle = provider
            .as_ref()
            .and_then(|p| p.spec.attestation.as_ref())
            .map(|a| a.ek_trust_bundle.as_str());
        let identity = attestation::vm_identity(
            &vm.namespace().unwrap_or_default(),
            &vm.name_any(),
            vm.uid().as_deref().unwrap_or_default(),
        );
        let (trusted, reason, message) = attestation::verdict(
            &vm_status.tpm_endorsement_certificates,
            &identity,
            provider_name,
            provider.is_some(),
            bundle,
            now,
        );
        let status = if trusted { "True" } else { "False" };
        let since = self
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == ENDORSEMENT_VERIFIED_CONDITION && c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| to_time(now));
        conditions.push(Condition {
            type_: ENDORSEMENT_VERIFIED_CONDITION.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: since,
            observed_generation: self.claim.metadata.generation,
        });
        Mirror {
            addresses: vm_status.addresses,
            certificates: vm_status
                .tpm_endorsement_certificates
                .iter()
                .filter_map(|pem| attestation::EndorsementCertificate::from_pem(pem).ok())
                .map(|certificate| certificate.to_pem())
                .collect(),
            conditions,
        }
    }

    /// Merge-patches the claim's status. Returns whether it was written (`false`: the claim
    /// is gone).
    async fn patch_status(&self, status: Value) -> Result<bool, Error> {
        self.metrics.writes.claim.inc();
        match self
            .claims
            .patch_status(
                &self.claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_status(&e, 404) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes phase, reason and message of a claim that is not Bound, and removes what a
    /// Bound claim mirrors (addresses, EK certificates, their condition), unless the status
    /// already is so.
    async fn status(
        &self,
        phase: ClaimPhase,
        reason: Option<&str>,
        message: Option<&str>,
    ) -> Result<(), Error> {
        let cleared = self.mirror(None, OffsetDateTime::UNIX_EPOCH);
        if self.status.phase.as_deref() == Some(phase.as_str())
            && self.status.reason.as_deref() == reason
            && self.status.message.as_deref() == message
            && cleared.matches(self.status)
        {
            return Ok(());
        }
        let mut patch = cleared.to_json();
        patch["phase"] = json!(phase.as_str());
        patch["reason"] = json!(reason);
        patch["message"] = json!(message);
        self.patch_status(patch).await.map(drop)
    }
}

/// Takes `vm` for the claim (unless `already_taken`), then records the bind in the claim's
/// status with `boundAt` and `expiresAt = boundAt + ttlSeconds`.
async fn bind(
    writer: &Writer<'_>,
    vms: &Api<VirtualMachine>,
    vm: VirtualMachine,
    already_taken: bool,
    now: OffsetDateTime,
) -> Result<Action, Error> {
    let claim = writer.claim;
    let member_name = vm.name_any();
    let (vm, bound_at) = if already_taken {
        let bound_at = vm
            .annotations()
            .get(BOUND_AT_ANNOTATION)
            .and_then(|t| parse_rfc3339(t))
            .unwrap_or(now);
        // Usually only our cached copy of the claim is behind: a read spares a write.
        let recorded = writer
            .claims
            .get_opt(&claim.name_any())
            .await?
            .and_then(|c| c.status)
            .and_then(|s| s.virtual_machine_ref);
        if recorded.as_deref() == Some(member_name.as_str()) {
            return Ok(Action::requeue(BIND_CONFLICT_REQUEUE));
        }
        (vm, bound_at)
    } else {
        let owner = OwnerReference {
            api_version: VirtualMachineClaim::api_version(&()).into_owned(),
            kind: VirtualMachineClaim::kind(&()).into_owned(),
            name: claim.name_any(),
            uid: claim.uid().ok_or_else(|| missing("uid"))?,
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let patch = json!({"metadata": {
            "resourceVersion": vm.resource_version(),
            "labels": {CLAIM_LABEL: claim.name_any()},
            "annotations": {
                SUBJECT_ISSUER_ANNOTATION: claim.spec.subject.issuer,
                SUBJECT_ID_ANNOTATION: claim.spec.subject.id,
                BOUND_AT_ANNOTATION: rfc3339(now),
            },
            "ownerReferences": [owner],
        }});
        writer.metrics.writes.claim.inc();
        match vms
            .patch(&member_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => {
                writer.metrics.binds.inc();
                (patched, now)
            }
            Err(e) if is_status(&e, 409) || is_status(&e, 404) => {
                writer.metrics.bind_conflicts.inc();
                tracing::debug!(claim = %claim.name_any(), member = %member_name, "lost the bind race");
                return Ok(Action::requeue(BIND_CONFLICT_REQUEUE));
            }
            Err(e) => return Err(e.into()),
        }
    };
    let expires_at = bound_at + time::Duration::seconds(i64::from(claim.spec.ttl_seconds));
    let mut patch = writer.mirror(Some(&vm), now).to_json();
    for (field, value) in [
        ("phase", json!("Bound")),
        ("reason", Value::Null),
        ("message", Value::Null),
        ("virtualMachineRef", json!(member_name)),
        ("boundAt", json!(to_time(bound_at))),
        ("expiresAt", json!(to_time(expires_at))),
    ] {
        patch[field] = value;
    }
    let written = writer.patch_status(patch).await?;
    // The first `phase: Bound` of this claim (an interrupted bind whose status already
    // landed returned above): what the person waiting sees. The end is read to the
    // nanosecond; the start has whole seconds, so the span is long by less than a second.
    if written && let Some(created) = &claim.metadata.creation_timestamp {
        writer
            .metrics
            .observe_bind_latency(from_time(created), OffsetDateTime::now_utc());
    }
    Ok(hold_requeue(Some(expires_at), now))
}

/// Destroys the held member, waits until it is gone from the API server, then lets the
/// claim go: drops the finalizer of a deleted claim, deletes an expired one (seed section
/// 5: the ordering is the guarantee).
async fn release(
    writer: &Writer<'_>,
    vms: &Api<VirtualMachine>,
    held: Option<&VirtualMachine>,
    reason: ReleaseReason,
) -> Result<Action, Error> {
    let claim = writer.claim;
    let uid = claim.uid().ok_or_else(|| missing("uid"))?;
    let ours = held.filter(|vm| convert::owning_claim_uid(vm).as_deref() == Some(uid.as_str()));
    let gone = match ours {
        None => true,
        Some(vm) if vm.metadata.deletion_timestamp.is_some() => false,
        Some(vm) => {
            let params = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                preconditions: Some(Preconditions {
                    uid: vm.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            writer.metrics.writes.claim.inc();
            match vms.delete(&vm.name_any(), &params).await {
                // What DELETE answers for a custom resource does not say whether it is
                // gone yet (a provider finalizer may hold it): ask.
                Ok(_) => vms
                    .get_opt(&vm.name_any())
                    .await?
                    .is_none_or(|now| now.uid() != vm.uid()),
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => true,
                Err(e) => return Err(e.into()),
            }
        }
    };
    let message = match reason {
        ReleaseReason::Released => "the claim was deleted; its VirtualMachine is being destroyed",
        ReleaseReason::Expired => {
            "ttlSeconds elapsed since the bind; the VirtualMachine is being destroyed"
        }
    };
    let claim_deleted = claim.metadata.deletion_timestamp.is_some();
    if !gone {
        writer
            .status(ClaimPhase::Releasing, Some(reason.as_str()), Some(message))
            .await?;
        return Ok(Action::requeue(RELEASE_REQUEUE));
    }
    if !claim_deleted {
        // Expired: an expired claim must not look like a live hold on a VM that is gone.
        writer
            .status(ClaimPhase::Releasing, Some(reason.as_str()), Some(message))
            .await?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        writer.metrics.writes.claim.inc();
        match writer.claims.delete(&claim.name_any(), &params).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
            Err(e) => return Err(e.into()),
        }
        // The deletion comes back as a watch event; the pass that sees it drops the finalizer.
        return Ok(Action::requeue(RELEASE_REQUEUE));
    }
    let finalizers: Vec<&String> = claim
        .finalizers()
        .iter()
        .filter(|f| f.as_str() != CLAIM_FINALIZER)
        .collect();
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": claim.resource_version(),
    }});
    writer.metrics.writes.claim.inc();
    match writer
        .claims
        .patch(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if is_status(&e, 404) => Ok(Action::await_change()),
        Err(e) if is_status(&e, 409) => Ok(Action::requeue(RELEASE_REQUEUE)),
        Err(e) => Err(e.into()),
    }
}
