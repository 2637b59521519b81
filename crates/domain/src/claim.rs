//! The claim path's pure rules: what one reconcile pass of a `VirtualMachineClaim` does
//! ([`next_step`]) and which pool member a bind takes ([`pick_member`]).
//!
//! Source: SPEC §6 and the claim design seed (section 4, "the claim state machine" and its
//! precedence diagram). Both functions read a snapshot and a clock and return a decision;
//! every API call lives around them in the `cluster` crate.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `status.phase` of a `VirtualMachineClaim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClaimPhase {
    /// Waiting for a Ready member; never times out (a pool may be filling).
    Pending,
    /// Holding a member until the TTL runs out or the claim is deleted.
    Bound,
    /// Deleted or expired: the member is being destroyed.
    Releasing,
    /// The bound member disappeared. Terminal: a claim is never rebound.
    Failed,
}

impl ClaimPhase {
    /// The phase as written in `status.phase`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Bound => "Bound",
            Self::Releasing => "Releasing",
            Self::Failed => "Failed",
        }
    }

    /// The phase `status.phase` names; `None` for anything else.
    pub fn parse(phase: &str) -> Option<Self> {
        [Self::Pending, Self::Bound, Self::Releasing, Self::Failed]
            .into_iter()
            .find(|p| p.as_str() == phase)
    }
}

impl fmt::Display for ClaimPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `status.phase` of a `VirtualMachine`, written by its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemberPhase {
    /// The provider is creating the VM.
    Provisioning,
    /// The VM runs and can be handed out.
    Ready,
    /// The provider gave up on the VM.
    Failed,
}

/// What the claim rules need to know about one `VirtualMachine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `metadata.name`.
    pub name: String,
    /// `status.phase`; `None` before the provider has seen the VM.
    pub phase: Option<MemberPhase>,
    /// `status.readySince`: when the VM last became Ready.
    pub ready_since: Option<OffsetDateTime>,
    /// `status.imageRevision`: the image revision the VM actually runs.
    pub image_revision: Option<String>,
    /// The `banlieue.io/claim` label: the name of the claim holding the VM, if any.
    pub claim: Option<String>,
    /// `metadata.uid` of the claim named in this VM's ownerReferences, if any.
    pub claim_uid: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl Member {
    /// Free to hand out: Ready, not claimed by anyone, not being deleted.
    pub fn is_available(&self) -> bool {
        self.phase == Some(MemberPhase::Ready) && self.claim.is_none() && !self.deleting
    }
}

/// Why a claim is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReleaseReason {
    /// The claim was deleted (`metadata.deletionTimestamp` set).
    Released,
    /// `status.expiresAt` has passed.
    Expired,
}

impl ReleaseReason {
    /// The value written to `status.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Released => "Released",
            Self::Expired => "Expired",
        }
    }
}

/// Why a claim waits in Pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitReason {
    /// The pool named by `spec.poolRef` does not exist (yet).
    PoolNotFound,
    /// The pool has no Ready unclaimed member right now.
    NoReadyMember,
    /// As [`WaitReason::NoReadyMember`], and the pool is not making any: its
    /// `Progressing=False` condition (a provider that does not exist, members that never
    /// become Ready, no room under `maxReplicas`), whose message the claim repeats.
    PoolNotProgressing,
}

impl WaitReason {
    /// The value written to `status.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PoolNotFound => "PoolNotFound",
            Self::NoReadyMember => "NoReadyMember",
            Self::PoolNotProgressing => "PoolNotProgressing",
        }
    }
}

/// `status.reason` of a claim, as the claim controller writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClaimReason {
    /// Pending, and why.
    Waiting(WaitReason),
    /// Releasing, and why.
    Released(ReleaseReason),
    /// Failed: the bound member disappeared.
    VirtualMachineGone,
    /// A reason this version does not know (another controller's), kept as written.
    Other(String),
}

impl ClaimReason {
    /// The value written to `status.reason`.
    pub const VIRTUAL_MACHINE_GONE: &str = "VirtualMachineGone";

    /// The reason `status.reason` names.
    pub fn parse(reason: &str) -> Self {
        let waiting = [
            WaitReason::PoolNotFound,
            WaitReason::NoReadyMember,
            WaitReason::PoolNotProgressing,
        ];
        let released = [ReleaseReason::Released, ReleaseReason::Expired];
        if let Some(wait) = waiting.into_iter().find(|r| r.as_str() == reason) {
            Self::Waiting(wait)
        } else if let Some(release) = released.into_iter().find(|r| r.as_str() == reason) {
            Self::Released(release)
        } else if reason == Self::VIRTUAL_MACHINE_GONE {
            Self::VirtualMachineGone
        } else {
            Self::Other(reason.to_owned())
        }
    }

    /// The value as written in `status.reason`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Waiting(wait) => wait.as_str(),
            Self::Released(release) => release.as_str(),
            Self::VirtualMachineGone => Self::VIRTUAL_MACHINE_GONE,
            Self::Other(reason) => reason,
        }
    }
}

/// One reconcile pass's view of a claim and what surrounds it.
#[derive(Debug, Clone)]
pub struct ClaimSnapshot<'a> {
    /// `metadata.uid` of the claim.
    pub uid: &'a str,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.phase`.
    pub phase: Option<ClaimPhase>,
    /// `status.expiresAt` (bind instant + `spec.ttlSeconds`).
    pub expires_at: Option<OffsetDateTime>,
    /// `status.virtualMachineRef`: the name of the member the claim was bound to.
    pub virtual_machine_ref: Option<&'a str>,
    /// The member carrying this claim's label, read fresh from the API server (not from a
    /// cache): the one named by `virtual_machine_ref`, or any VM whose ownerReference is
    /// this claim when no reference is recorded yet.
    pub held: Option<&'a Member>,
    /// `spec.imageRevision` of the pool, or `None` when the pool does not exist.
    pub pool_image_revision: Option<&'a str>,
    /// The pool's members (a cache is fine: a bind carries a resourceVersion precondition).
    pub members: &'a [Member],
}

/// The one thing a reconcile pass does, in the seed's precedence order
/// Release > Fail > Hold > Bind > Wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimStep<'a> {
    /// Destroy the held member (if any), then let the claim go: drop the finalizer of a
    /// deleted claim, delete an expired one.
    Release {
        /// Deleted or expired.
        reason: ReleaseReason,
    },
    /// The bound member vanished: phase Failed, terminal, never rebound — even when
    /// another member is Ready, because the consumer believes it holds that one VM.
    Fail,
    /// Keep the member and mirror its addresses.
    Hold {
        /// The bound member.
        member: &'a Member,
    },
    /// Take this member: label, annotate and re-parent it, then record the bind. When
    /// `already_taken` is set the member patch landed in an earlier pass whose status write
    /// did not (or is not visible yet): only the status is written, from the member.
    Bind {
        /// The member to take (or already taken).
        member: &'a Member,
        /// The member already carries this claim's label and ownerReference.
        already_taken: bool,
    },
    /// Nothing to take: phase Pending with a reason; retry in 3 s, forever.
    Wait {
        /// Why.
        reason: WaitReason,
    },
}

/// `true` when `expires_at` is set and not later than `now` (a deadline, never extended).
pub fn is_expired(expires_at: Option<OffsetDateTime>, now: OffsetDateTime) -> bool {
    expires_at.is_some_and(|at| at <= now)
}

/// Decides one reconcile pass of a claim (seed section 4, "precedence is the interesting
/// part"):
///
/// 1. deleting, or `expiresAt` passed → [`ClaimStep::Release`];
/// 2. a recorded `virtualMachineRef` whose member is gone, being deleted, or no longer
///    owned by this claim — or a claim already Failed → [`ClaimStep::Fail`];
/// 3. a recorded reference whose member is still held → [`ClaimStep::Hold`];
/// 4. a member already carrying this claim (an interrupted bind) → [`ClaimStep::Bind`]
///    with `already_taken`, so a claim never owns two members;
/// 5. [`pick_member`] found one → [`ClaimStep::Bind`];
/// 6. otherwise → [`ClaimStep::Wait`].
pub fn next_step<'a>(snapshot: &ClaimSnapshot<'a>, now: OffsetDateTime) -> ClaimStep<'a> {
    if snapshot.deleting {
        return ClaimStep::Release {
            reason: ReleaseReason::Released,
        };
    }
    if is_expired(snapshot.expires_at, now) {
        return ClaimStep::Release {
            reason: ReleaseReason::Expired,
        };
    }
    let held = snapshot
        .held
        .filter(|m| m.claim_uid.as_deref() == Some(snapshot.uid) && !m.deleting);
    if snapshot.phase == Some(ClaimPhase::Failed) {
        return ClaimStep::Fail;
    }
    if let Some(reference) = snapshot.virtual_machine_ref {
        return match held.filter(|m| m.name == reference) {
            Some(member) => ClaimStep::Hold { member },
            None => ClaimStep::Fail,
        };
    }
    if let Some(member) = held {
        return ClaimStep::Bind {
            member,
            already_taken: true,
        };
    }
    let Some(revision) = snapshot.pool_image_revision else {
        return ClaimStep::Wait {
            reason: WaitReason::PoolNotFound,
        };
    };
    match pick_member(snapshot.members, Some(revision)) {
        Some(member) => ClaimStep::Bind {
            member,
            already_taken: false,
        },
        None => ClaimStep::Wait {
            reason: WaitReason::NoReadyMember,
        },
    }
}

/// Picks the member a bind takes (SPEC §6): only Ready, unclaimed, not deleting members;
/// those running `current_revision` first, then the one Ready longest (earliest
/// `readySince`, unknown last), then by name. `None` when nothing is available.
///
/// A claimed member is never offered again: the invariant the lock-free bind rests on.
pub fn pick_member<'a>(
    members: &'a [Member],
    current_revision: Option<&str>,
) -> Option<&'a Member> {
    members
        .iter()
        .filter(|m| m.is_available())
        .min_by(|a, b| rank(a, b, current_revision))
}

fn rank(a: &Member, b: &Member, current: Option<&str>) -> Ordering {
    let stale = |m: &Member| current.is_some() && m.image_revision.as_deref() != current;
    stale(a)
        .cmp(&stale(b))
        .then_with(|| match (a.ready_since, b.ready_since) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.name.cmp(&b.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-29 12:00 UTC);
    const UID: &str = "claim-uid";

    fn member(name: &str) -> Member {
        Member {
            name: name.into(),
            phase: Some(MemberPhase::Ready),
            ready_since: Some(datetime!(2026-11-29 11:00 UTC)),
            image_revision: Some("r2".into()),
            claim: None,
            claim_uid: None,
            deleting: false,
        }
    }

    fn ours(name: &str) -> Member {
        Member {
            claim: Some("c".into()),
            claim_uid: Some(UID.into()),
            ..member(name)
        }
    }

    fn snapshot<'a>(members: &'a [Member]) -> ClaimSnapshot<'a> {
        ClaimSnapshot {
            uid: UID,
            deleting: false,
            phase: None,
            expires_at: None,
            virtual_machine_ref: None,
            held: None,
            pool_image_revision: Some("r2"),
            members,
        }
    }

    /// One row of the seed's decision diagram per case, plus the idempotency rows.
    #[test]
    fn decision_table() {
        let ready = [member("vm-a")];
        let held = ours("vm-h");
        let held_deleting = Member {
            deleting: true,
            ..ours("vm-h")
        };
        let someone_elses = Member {
            claim_uid: Some("other".into()),
            ..ours("vm-h")
        };
        let past = Some(datetime!(2026-11-29 11:59 UTC));
        let future = Some(datetime!(2026-11-29 13:00 UTC));
        type Row<'a> = (&'static str, ClaimSnapshot<'a>, ClaimStep<'a>);
        let release = ClaimStep::Release {
            reason: ReleaseReason::Released,
        };
        let expired = ClaimStep::Release {
            reason: ReleaseReason::Expired,
        };
        let rows: Vec<Row> = vec![
            (
                "deleting before it ever bound",
                ClaimSnapshot {
                    deleting: true,
                    ..snapshot(&ready)
                },
                release.clone(),
            ),
            (
                "deleting outranks a healthy binding",
                ClaimSnapshot {
                    deleting: true,
                    virtual_machine_ref: Some("vm-h"),
                    held: Some(&held),
                    expires_at: future,
                    phase: Some(ClaimPhase::Bound),
                    ..snapshot(&ready)
                },
                release.clone(),
            ),
            (
                "deleting a Failed claim",
                ClaimSnapshot {
                    deleting: true,
                    phase: Some(ClaimPhase::Failed),
                    virtual_machine_ref: Some("vm-h"),
                    ..snapshot(&ready)
                },
                release.clone(),
            ),
            (
                "deleted and expired: deletion wins the reason",
                ClaimSnapshot {
                    deleting: true,
                    expires_at: past,
                    ..snapshot(&ready)
                },
                release,
            ),
            (
                "expiry outranks a healthy binding",
                ClaimSnapshot {
                    virtual_machine_ref: Some("vm-h"),
                    held: Some(&held),
                    expires_at: past,
                    ..snapshot(&ready)
                },
                expired.clone(),
            ),
            (
                "expiry at exactly now",
                ClaimSnapshot {
                    virtual_machine_ref: Some("vm-h"),
                    held: Some(&held),
                    expires_at: Some(NOW),
                    ..snapshot(&ready)
                },
                expired.clone(),
            ),
            (
                "expiry outranks a vanished member",
                ClaimSnapshot {
                    virtual_machine_ref: Some("vm-h"),
                    expires_at: past,
                    ..snapshot(&ready)
                },
                expired,
            ),
            (
                "bound member gone, another Ready: Fail, never rebind",
                ClaimSnapshot {
                    virtual_machine_ref: Some("vm-h"),
                    expires_at: future,
                    ..snapshot(&ready)
                },
                ClaimStep::Fail,
            ),
            (
                "bound member being deleted counts as gone",
                ClaimSnapshot {
                    virtual_machine_ref: Some("vm-h"),
                    held: Some(&held_deleting),
                    expires_at: future,
                    ..snapshot(&ready)
                },
                ClaimStep::Fail,
            ),
            (
                "a same-named member owned by someone else is not ours",
                ClaimSnapshot {
                    virtual_machine_ref: Some("vm-h"),
                    held: Some(&someone_elses),
                    expires_at: future,
                    ..snapshot(&ready)
                },
                ClaimStep::Fail,
            ),
            (
                "Failed is terminal even if a member shows up again",
                ClaimSnapshot {
                    phase: Some(ClaimPhase::Failed),
                    virtual_machine_ref: Some("vm-h"),
                    held: Some(&held),
                    ..snapshot(&ready)
                },
                ClaimStep::Fail,
            ),
            (
                "bound member exists: Hold",
                ClaimSnapshot {
                    virtual_machine_ref: Some("vm-h"),
                    held: Some(&held),
                    expires_at: future,
                    phase: Some(ClaimPhase::Bound),
                    ..snapshot(&ready)
                },
                ClaimStep::Hold { member: &held },
            ),
            (
                "interrupted bind: finish it with the same member",
                ClaimSnapshot {
                    held: Some(&held),
                    ..snapshot(&ready)
                },
                ClaimStep::Bind {
                    member: &held,
                    already_taken: true,
                },
            ),
            (
                "a Ready member: Bind",
                snapshot(&ready),
                ClaimStep::Bind {
                    member: &ready[0],
                    already_taken: false,
                },
            ),
            (
                "nothing Ready: Wait",
                snapshot(&[]),
                ClaimStep::Wait {
                    reason: WaitReason::NoReadyMember,
                },
            ),
            (
                "no pool: Wait",
                ClaimSnapshot {
                    pool_image_revision: None,
                    ..snapshot(&ready)
                },
                ClaimStep::Wait {
                    reason: WaitReason::PoolNotFound,
                },
            ),
        ];
        for (name, snap, want) in rows {
            assert_eq!(next_step(&snap, NOW), want, "{name}");
        }
    }

    #[test]
    fn pending_never_times_out() {
        let snap = ClaimSnapshot {
            phase: Some(ClaimPhase::Pending),
            ..snapshot(&[])
        };
        let years_later = NOW + time::Duration::days(3650);
        assert_eq!(
            next_step(&snap, years_later),
            ClaimStep::Wait {
                reason: WaitReason::NoReadyMember
            }
        );
    }

    #[test]
    fn pick_member_order() {
        let t = |h| Some(datetime!(2026-11-29 0:00 UTC) + time::Duration::hours(h));
        let m = |name: &str, rev: &str, since| Member {
            image_revision: Some(rev.into()),
            ready_since: since,
            ..member(name)
        };
        // Current revision beats an older one that has been Ready longer.
        let members = [m("old", "r1", t(1)), m("new", "r2", t(5))];
        assert_eq!(pick_member(&members, Some("r2")).unwrap().name, "new");
        // Same revision: Ready longest first.
        let members = [m("b", "r2", t(5)), m("a", "r2", t(6)), m("c", "r2", t(2))];
        assert_eq!(pick_member(&members, Some("r2")).unwrap().name, "c");
        // Tie: by name.
        let members = [m("b", "r2", t(1)), m("a", "r2", t(1))];
        assert_eq!(pick_member(&members, Some("r2")).unwrap().name, "a");
        // Unknown readySince sorts last.
        let members = [m("a", "r2", None), m("b", "r2", t(9))];
        assert_eq!(pick_member(&members, Some("r2")).unwrap().name, "b");
        // Only old revisions: still handed out (a pool rolling forward keeps serving).
        let members = [m("x", "r1", t(1))];
        assert_eq!(pick_member(&members, Some("r2")).unwrap().name, "x");
        // Not Ready, claimed, deleting: never.
        let members = [
            Member {
                phase: Some(MemberPhase::Provisioning),
                ..member("p")
            },
            Member {
                phase: None,
                ..member("n")
            },
            Member {
                phase: Some(MemberPhase::Failed),
                ..member("f")
            },
            Member {
                claim: Some("other".into()),
                ..member("c")
            },
            Member {
                deleting: true,
                ..member("d")
            },
        ];
        assert_eq!(pick_member(&members, Some("r2")), None);
    }

    fn arb_member() -> impl Strategy<Value = Member> {
        (
            0u8..7,
            prop_oneof![
                Just(None),
                Just(Some(MemberPhase::Provisioning)),
                Just(Some(MemberPhase::Ready)),
                Just(Some(MemberPhase::Ready)),
                Just(Some(MemberPhase::Failed)),
            ],
            proptest::option::of(0i64..100),
            0u8..3,
            proptest::option::of(0u8..4),
            proptest::bool::weighted(0.15),
        )
            .prop_map(|(name, phase, age, revision, claim, deleting)| Member {
                name: format!("vm-{name}"),
                phase,
                ready_since: age.map(|s| NOW - time::Duration::seconds(s)),
                image_revision: Some(format!("r{revision}")),
                claim: claim.map(|c| format!("c{c}")),
                claim_uid: None,
                deleting,
            })
    }

    proptest! {
        /// Binding whatever `pick_member` returns and picking again never yields a Claimed
        /// member, and the pool runs dry after at most one pick per member.
        #[test]
        fn a_claimed_member_is_never_picked_again(
            mut members in proptest::collection::vec(arb_member(), 0..12),
            revision in 0u8..3,
        ) {
            let revision = format!("r{revision}");
            let n = members.len();
            let mut taken = 0;
            while let Some(picked) = pick_member(&members, Some(&revision)) {
                prop_assert!(picked.claim.is_none(), "picked a Claimed member");
                let index = members
                    .iter()
                    .position(|m| std::ptr::eq(m, picked))
                    .expect("picked from the slice");
                members[index].claim = Some(format!("bound-{taken}"));
                taken += 1;
                prop_assert!(taken <= n);
            }
            prop_assert!(members.iter().all(|m| !m.is_available()));
        }
    }
}
