//! The pool controller (SPEC §6): keeps `warmReplicas` Ready unclaimed members per
//! `VirtualMachinePool`, never more than `maxReplicas` members in all.
//!
//! A pass first tallies the members in the watch cache; only when that tally calls for a
//! change (a member to create, replace or remove) does it read them again with a fresh
//! LIST from the API server and decide from that, so members it created in an earlier
//! pass are always counted. A pass with nothing to change (most of them: every bind wakes
//! its pool) costs no API read. Members are named by
//! ordinal, `<pool>-<n>` with `n < maxReplicas`, so even two overlapping passes working from
//! stale views cannot exceed `maxReplicas`: the second create of a name gets 409.
//! Claimed members keep their `banlieue.io/pool` label and count against `maxReplicas`
//! only; terminating ones count until they are gone. Members that never become Ready are
//! not replaced (that would loop): the pool reports `Progressing=False` instead, as it does
//! while its `providerRef` names no `VirtualMachineProvider`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use banlieue_domain::claim::MemberPhase;
use banlieue_domain::views::PoolStall;

use crate::convert::{self, from_time, member_phase, to_time};
use crate::crd::{
    CLAIM_LABEL, POOL_LABEL, VirtualMachine, VirtualMachinePool, VirtualMachinePoolSpec,
    VirtualMachinePoolStatus, VirtualMachineProvider, VirtualMachineSpec,
};
use crate::error::{Error, is_status};
use crate::metrics::Metrics;

/// How soon a pass that decided from the member cache runs again.
const CACHED_PASS_RECHECK: Duration = Duration::from_secs(1);

/// Default of `spec.progressDeadlineSeconds`.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: u32 = 600;

/// What a pool reconcile may touch.
#[derive(Clone)]
pub struct PoolContext {
    /// API client.
    pub client: Client,
    /// Longest interval between two passes of one pool.
    pub resync: Duration,
    /// The member cache, for passes with nothing to change; `None`: every pass lists.
    pub members: Option<Store<VirtualMachine>>,
    /// Cache of `VirtualMachineProvider`s: a pool naming none that exists says so.
    pub providers: Store<VirtualMachineProvider>,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

/// One reconcile pass of a pool. Public so tests can drive passes directly.
///
/// Errors: API failures other than the expected 404/409.
pub async fn reconcile_pool(
    pool: Arc<VirtualMachinePool>,
    ctx: Arc<PoolContext>,
) -> Result<Action, Error> {
    ctx.metrics.reconciles.pool.inc();
    if pool.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = pool.namespace().ok_or(Error::MissingField {
        kind: "VirtualMachinePool",
        field: "namespace",
    })?;
    let name = pool.name_any();
    let vms: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let spec = &pool.spec;
    let now = convert::now();
    let deadline = i64::from(
        spec.progress_deadline_seconds
            .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS),
    );
    let cached = ctx.members.as_ref().map(|store| {
        store.state_filter(|vm| {
            vm.namespace().as_deref() == Some(namespace.as_str())
                && vm.labels().get(POOL_LABEL) == Some(&name)
        })
    });
    let (members, from_cache) = match cached {
        Some(members)
            if !Tally::of(&members, spec, now, deadline, ctx.resync).calls_for_change(spec) =>
        {
            (members, true)
        }
        _ => (
            vms.list(&ListParams::default().labels(&format!("{POOL_LABEL}={name}")))
                .await?
                .items
                .into_iter()
                .map(Arc::new)
                .collect(),
            false,
        ),
    };
    let Tally {
        ready,
        claimed,
        in_flight,
        stuck,
        failed,
        outdated,
        mut ready_members,
        terminating,
        next_wake,
        ..
    } = Tally::of(&members, spec, now, deadline, ctx.resync);

    // Replace unclaimed members of another image revision. The resourceVersion
    // precondition loses against a concurrent bind (409), so a claimed member is never
    // deleted here.
    for vm in &outdated {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: None,
                resource_version: vm.resource_version(),
            }),
            ..DeleteParams::default()
        };
        ctx.metrics.writes.pool.inc();
        match vms.delete(&vm.name_any(), &params).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
            Err(e) => return Err(e.into()),
        }
    }

    // Scale down: Ready unclaimed members beyond warmReplicas, or beyond maxReplicas
    // counting everyone alive, are deleted (highest slot first). The resourceVersion
    // precondition loses against a concurrent bind, so a member being claimed survives.
    let alive = u32::try_from(members.len()).unwrap_or(u32::MAX) - terminating;
    let surplus = ready
        .saturating_sub(spec.warm_replicas)
        .max(alive.saturating_sub(spec.max_replicas))
        .min(ready);
    ready_members.sort_by_key(|vm| std::cmp::Reverse(vm.name_any()));
    let mut removed = 0u32;
    for vm in ready_members.iter().take(surplus as usize) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: None,
                resource_version: vm.resource_version(),
            }),
            ..DeleteParams::default()
        };
        ctx.metrics.writes.pool.inc();
        match vms.delete(&vm.name_any(), &params).await {
            Ok(_) => removed += 1,
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let ready = ready - removed;

    let total = u32::try_from(members.len()).unwrap_or(u32::MAX);
    let want = spec.warm_replicas.saturating_sub(ready + in_flight);
    let room = spec.max_replicas.saturating_sub(total);
    let taken: BTreeSet<String> = members.iter().map(|vm| vm.name_any()).collect();
    let free_slots = (0..spec.max_replicas)
        .map(|n| format!("{name}-{n}"))
        .filter(|slot| !taken.contains(slot));
    let mut created = 0u32;
    for slot in free_slots.take(want.min(room) as usize) {
        let vm = new_member(&pool, slot);
        ctx.metrics.writes.pool.inc();
        match vms.create(&PostParams::default(), &vm).await {
            Ok(_) => created += 1,
            Err(e) if is_status(&e, 409) => {}
            Err(e) => return Err(e.into()),
        }
    }

    let provider_found = ctx
        .providers
        .get(&ObjectRef::new(&spec.provider_ref))
        .is_some();
    let (progressing, reason, message) = if !provider_found {
        // The root cause of members that never become Ready: said first, with them.
        (
            "False",
            PoolStall::PROVIDER_NOT_FOUND,
            format!(
                "VirtualMachineProvider {} does not exist: install the provider, or name one \
                 that exists in providerRef ({stuck} members not Ready after {deadline}s, \
                 {failed} Failed)",
                spec.provider_ref
            ),
        )
    } else if stuck > 0 || failed > 0 {
        (
            "False",
            if failed > 0 {
                "MembersFailed"
            } else {
                "ProgressDeadlineExceeded"
            },
            format!(
                "{stuck} members not Ready after {deadline}s and {failed} Failed; they are not \
                 replaced automatically: check provider {} and delete them",
                spec.provider_ref
            ),
        )
    } else if ready >= spec.warm_replicas {
        (
            "True",
            "WarmReplicasReady",
            format!("{ready} Ready members"),
        )
    } else if in_flight + created > 0 {
        (
            "True",
            "Provisioning",
            format!(
                "{} members provisioning, {ready} of {} Ready",
                in_flight + created,
                spec.warm_replicas
            ),
        )
    } else {
        (
            "False",
            "MaxReplicasReached",
            format!(
                "maxReplicas {} members exist ({claimed} claimed); no room for more warm members",
                spec.max_replicas
            ),
        )
    };
    let old = pool.status.clone().unwrap_or_default();
    let old_condition = old.conditions.iter().find(|c| c.type_ == "Progressing");
    let transition = match old_condition {
        Some(c) if c.status == progressing => c.last_transition_time.clone(),
        _ => to_time(now),
    };
    let status = VirtualMachinePoolStatus {
        ready_replicas: ready,
        claimed_replicas: claimed,
        replicas: total + created,
        observed_generation: pool.metadata.generation,
        conditions: vec![Condition {
            type_: "Progressing".into(),
            status: progressing.into(),
            reason: reason.into(),
            message,
            last_transition_time: transition,
            observed_generation: pool.metadata.generation,
        }],
    };
    if status != old {
        ctx.metrics.writes.pool.inc();
        let patch = Patch::Merge(json!({ "status": status }));
        match Api::<VirtualMachinePool>::namespaced(ctx.client.clone(), &namespace)
            .patch_status(&name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // The cache may be a moment behind the event that woke this pass: look again soon.
    let next_wake = if from_cache {
        next_wake.min(CACHED_PASS_RECHECK)
    } else {
        next_wake
    };
    Ok(Action::requeue(next_wake.max(Duration::from_millis(100))))
}

/// What a pool's members are, for one pass.
struct Tally<'a> {
    ready: u32,
    claimed: u32,
    in_flight: u32,
    stuck: u32,
    failed: u32,
    /// Unclaimed members of another image revision.
    outdated: Vec<&'a VirtualMachine>,
    ready_members: Vec<&'a VirtualMachine>,
    terminating: u32,
    /// When a member still provisioning reaches its progress deadline, or the resync.
    next_wake: Duration,
    /// All members, terminating ones included.
    total: u32,
}

impl<'a> Tally<'a> {
    fn of(
        members: &'a [Arc<VirtualMachine>],
        spec: &VirtualMachinePoolSpec,
        now: time::OffsetDateTime,
        deadline: i64,
        resync: Duration,
    ) -> Self {
        let mut ready = 0u32;
        let mut claimed = 0u32;
        let mut in_flight = 0u32;
        let mut stuck = 0u32;
        let mut failed = 0u32;
        let mut outdated = Vec::new();
        let mut ready_members = Vec::new();
        let mut terminating = 0u32;
        let mut next_wake = resync;
        for vm in members.iter().map(|vm| &**vm) {
            let phase = member_phase(vm.status.as_ref().and_then(|s| s.phase.as_deref()));
            if vm.labels().contains_key(CLAIM_LABEL) {
                claimed += 1;
                continue;
            }
            if vm.metadata.deletion_timestamp.is_some() {
                terminating += 1;
                continue;
            }
            if vm.spec.image_revision != spec.image_revision {
                outdated.push(vm);
                continue;
            }
            match phase {
                Some(MemberPhase::Ready) => {
                    ready += 1;
                    ready_members.push(vm);
                }
                Some(MemberPhase::Failed) => failed += 1,
                _ => {
                    in_flight += 1;
                    let age = vm
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| (now - from_time(t)).whole_seconds())
                        .unwrap_or(0);
                    if age >= deadline {
                        stuck += 1;
                    } else {
                        let left = Duration::from_secs((deadline - age).unsigned_abs());
                        next_wake = next_wake.min(left);
                    }
                }
            }
        }

        Self {
            ready,
            claimed,
            in_flight,
            stuck,
            failed,
            outdated,
            ready_members,
            terminating,
            next_wake,
            total: u32::try_from(members.len()).unwrap_or(u32::MAX),
        }
    }

    /// Whether the pass would create, replace or remove a member.
    fn calls_for_change(&self, spec: &VirtualMachinePoolSpec) -> bool {
        let alive = self.total - self.terminating;
        let surplus = self
            .ready
            .saturating_sub(spec.warm_replicas)
            .max(alive.saturating_sub(spec.max_replicas))
            .min(self.ready);
        let want = spec
            .warm_replicas
            .saturating_sub(self.ready + self.in_flight);
        let room = spec.max_replicas.saturating_sub(self.total);
        !self.outdated.is_empty() || surplus > 0 || want.min(room) > 0
    }
}

/// Error policy of the pool controller: count and retry soon.
pub(crate) fn pool_error_policy(
    _pool: Arc<VirtualMachinePool>,
    error: &Error,
    ctx: Arc<PoolContext>,
) -> Action {
    ctx.metrics.reconcile_errors.pool.inc();
    tracing::warn!(%error, "pool reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

fn new_member(pool: &VirtualMachinePool, name: String) -> VirtualMachine {
    let owner = OwnerReference {
        api_version: VirtualMachinePool::api_version(&()).into_owned(),
        kind: VirtualMachinePool::kind(&()).into_owned(),
        name: pool.name_any(),
        uid: pool.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    VirtualMachine {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: pool.namespace(),
            labels: Some([(POOL_LABEL.to_owned(), pool.name_any())].into()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: VirtualMachineSpec {
            template: pool.spec.template.clone(),
            image_revision: pool.spec.image_revision.clone(),
            provider_ref: pool.spec.provider_ref.clone(),
        },
        status: None,
    }
}
