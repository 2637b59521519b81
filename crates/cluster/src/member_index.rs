//! The members a bind may take, by pool, kept in the order [`pick_member`] ranks them, so
//! a pick costs O(log N) instead of a scan of every member per pass (O(N²) per burst).
//!
//! The index follows the member cache: the runner feeds it every watch event of
//! `VirtualMachine`s ([`MemberIndex::apply_event`]); a pick reserves the member it hands
//! out ([`Pick::reserve`]) so that concurrent passes of this process never pick it again,
//! until the cache shows the member at another `resourceVersion` (the bind landed, or
//! someone else changed it). Only a throughput aid: correctness rests on the bind's
//! resourceVersion precondition, and the rule itself stays [`pick_member`]'s, which runs on
//! the index's best candidates.
//!
//! [`pick_member`]: banlieue_domain::claim::pick_member

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use banlieue_domain::claim::Member;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;

use crate::convert;
use crate::crd::{CLAIM_LABEL, POOL_LABEL, VirtualMachine};

/// `(namespace, name)`.
type Key = (String, String);

/// The rank of an available member within its pool, as `pick_member` orders members of
/// the same revision class: Ready longest first (unknown `readySince` last), then name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    ready_since_unknown: bool,
    ready_since: i64,
    name: String,
}

/// Where an indexed member sits.
#[derive(Debug, Clone)]
struct Entry {
    pool: String,
    revision: Option<String>,
    rank: Rank,
}

/// One pool's available members: all of them, and by image revision.
#[derive(Debug, Default)]
struct PoolMembers {
    all: BTreeSet<Rank>,
    by_revision: HashMap<String, BTreeSet<Rank>>,
}

#[derive(Debug, Default)]
struct Inner {
    pools: HashMap<(String, String), PoolMembers>,
    entries: HashMap<Key, Entry>,
    /// Members handed out, with the `resourceVersion` they had: kept out of the index
    /// until the cache shows another version.
    reserved: HashMap<Key, String>,
    /// The members of a relist in progress (between `Init` and `InitDone`).
    relist: Option<Vec<VirtualMachine>>,
    /// Members labelled for a claim: member → `(namespace, claim)`, and the reverse.
    labelled: HashMap<Key, Key>,
    holders: HashMap<Key, BTreeSet<String>>,
}

/// The index of available members (see the module docs).
#[derive(Debug, Default)]
pub struct MemberIndex(Mutex<Inner>);

impl MemberIndex {
    /// An index of what `store` holds now (for passes driven by hand over a frozen cache).
    pub fn of(store: &Store<VirtualMachine>) -> Self {
        let index = Self::default();
        {
            let mut inner = index.lock();
            for vm in store.state() {
                inner.upsert(&vm);
            }
        }
        index
    }

    /// Follows one event of the member watch (after the cache applied it).
    pub fn apply_event(&self, event: &watcher::Event<VirtualMachine>) {
        let mut inner = self.lock();
        match event {
            watcher::Event::Apply(vm) => inner.upsert(vm),
            watcher::Event::Delete(vm) => {
                let key = key(vm);
                inner.remove(&key);
                inner.unlabel(&key);
                inner.reserved.remove(&key);
            }
            watcher::Event::Init => inner.relist = Some(Vec::new()),
            watcher::Event::InitApply(vm) => {
                if let Some(relist) = inner.relist.as_mut() {
                    relist.push(vm.clone());
                }
            }
            watcher::Event::InitDone => {
                let members = inner.relist.take().unwrap_or_default();
                let reserved = std::mem::take(&mut inner.reserved);
                *inner = Inner {
                    reserved,
                    ..Inner::default()
                };
                for vm in &members {
                    inner.upsert(vm);
                }
            }
        }
    }

    /// The index for one pick: read the candidates, decide, reserve, under one lock.
    pub fn pick(&self) -> Pick<'_> {
        Pick(self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The index held for one pick (see [`MemberIndex::pick`]).
pub struct Pick<'a>(MutexGuard<'a, Inner>);

impl Pick<'_> {
    /// The names of the members [`pick_member`] may choose from in `pool`: the best
    /// member running `revision`, and the best of all. The best of all available members
    /// under `pick_member`'s rule is always one of these two.
    ///
    /// [`pick_member`]: banlieue_domain::claim::pick_member
    ///
    /// `available` says whether the cache agrees that a member is free; one it does not
    /// (the index is a moment behind or ahead of the cache) is passed over.
    pub fn candidates(
        &self,
        namespace: &str,
        pool: &str,
        revision: Option<&str>,
        available: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let Some(members) = self.0.pools.get(&(namespace.to_owned(), pool.to_owned())) else {
            return Vec::new();
        };
        let first = |ranks: &BTreeSet<Rank>| ranks.iter().find(|r| available(&r.name)).cloned();
        let current = revision
            .and_then(|r| members.by_revision.get(r))
            .and_then(first);
        let mut names: Vec<String> = current
            .into_iter()
            .chain(first(&members.all))
            .map(|rank| rank.name)
            .collect();
        names.dedup();
        names
    }

    /// Hands out `namespace/name`, seen at `resource_version`: no later pick offers it
    /// until the cache shows it at another version.
    pub fn reserve(&mut self, namespace: &str, name: &str, resource_version: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        self.0.remove(&key);
        self.0.reserved.insert(key, resource_version.to_owned());
    }
}

impl MemberIndex {
    /// How many members of `namespace/pool` are available now.
    pub fn available(&self, namespace: &str, pool: &str) -> usize {
        self.lock()
            .pools
            .get(&(namespace.to_owned(), pool.to_owned()))
            .map_or(0, |members| members.all.len())
    }

    /// Takes back the reservation of `namespace/name` after a bind that failed without
    /// a race; `now` is the member as the cache has it now (`None`: gone), indexed again
    /// as that copy says.
    pub fn release(&self, namespace: &str, name: &str, now: Option<&VirtualMachine>) {
        let mut inner = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        inner.reserved.remove(&key);
        match now {
            Some(vm) => inner.upsert(vm),
            None => inner.remove(&key),
        }
    }

    /// Whether the cache shows a member labelled for the claim `namespace/claim`.
    pub fn holds_any(&self, namespace: &str, claim: &str) -> bool {
        self.lock()
            .holders
            .contains_key(&(namespace.to_owned(), claim.to_owned()))
    }
}

impl Inner {
    /// Puts `vm` where its state says: indexed when available and not reserved at this
    /// version, else out.
    fn upsert(&mut self, vm: &VirtualMachine) {
        let key = key(vm);
        self.remove(&key);
        self.unlabel(&key);
        if let Some(claim) = vm.labels().get(CLAIM_LABEL) {
            let holder = (key.0.clone(), claim.clone());
            self.holders
                .entry(holder.clone())
                .or_default()
                .insert(key.1.clone());
            self.labelled.insert(key.clone(), holder);
        }
        let version = vm.resource_version().unwrap_or_default();
        match self.reserved.get(&key) {
            Some(reserved) if *reserved == version => return,
            Some(_) => {
                self.reserved.remove(&key);
            }
            None => {}
        }
        let Some(pool) = vm.labels().get(POOL_LABEL).cloned() else {
            return;
        };
        let member: Member = convert::member(vm);
        if !member.is_available() {
            return;
        }
        let rank = Rank {
            ready_since_unknown: member.ready_since.is_none(),
            ready_since: member.ready_since.map_or(0, |t| t.unix_timestamp()),
            name: member.name,
        };
        let members = self.pools.entry((key.0.clone(), pool.clone())).or_default();
        members.all.insert(rank.clone());
        if let Some(revision) = &member.image_revision {
            members
                .by_revision
                .entry(revision.clone())
                .or_default()
                .insert(rank.clone());
        }
        self.entries.insert(
            key,
            Entry {
                pool,
                revision: member.image_revision,
                rank,
            },
        );
    }

    fn unlabel(&mut self, key: &Key) {
        let Some(holder) = self.labelled.remove(key) else {
            return;
        };
        if let Some(members) = self.holders.get_mut(&holder) {
            members.remove(&key.1);
            if members.is_empty() {
                self.holders.remove(&holder);
            }
        }
    }

    fn remove(&mut self, key: &Key) {
        let Some(entry) = self.entries.remove(key) else {
            return;
        };
        let pool_key = (key.0.clone(), entry.pool);
        if let Some(members) = self.pools.get_mut(&pool_key) {
            members.all.remove(&entry.rank);
            if let Some(revision) = entry.revision
                && let Some(ranks) = members.by_revision.get_mut(&revision)
            {
                ranks.remove(&entry.rank);
                if ranks.is_empty() {
                    members.by_revision.remove(&revision);
                }
            }
            if members.all.is_empty() {
                self.pools.remove(&pool_key);
            }
        }
    }
}

fn key(vm: &VirtualMachine) -> Key {
    (vm.namespace().unwrap_or_default(), vm.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{VirtualMachineSpec, VirtualMachineStatus, VirtualMachineTemplate};
    use banlieue_domain::claim::pick_member;
    use proptest::prelude::*;

    /// A member of pool `p`: `(ready since, revision, phase Ready, claimed, deleting)`.
    type Shape = (Option<i64>, Option<u8>, bool, bool, bool);

    fn vm(i: usize, (ready, revision, is_ready, claimed, deleting): Shape) -> VirtualMachine {
        let mut labels = std::collections::BTreeMap::from([(POOL_LABEL.into(), "p".into())]);
        if claimed {
            labels.insert(CLAIM_LABEL.into(), "c".into());
        }
        let mut vm = VirtualMachine::new(
            &format!("m-{i:02}"),
            VirtualMachineSpec {
                template: VirtualMachineTemplate {
                    cpu: 1,
                    memory: "1Gi".into(),
                    image: "i".into(),
                },
                image_revision: "r1".into(),
                provider_ref: "simulated".into(),
            },
        );
        vm.metadata.namespace = Some("ns".into());
        vm.metadata.labels = Some(labels);
        vm.metadata.resource_version = Some(format!("{i}"));
        if deleting {
            vm.metadata.deletion_timestamp =
                Some(convert::to_time(time::OffsetDateTime::UNIX_EPOCH));
        }
        vm.status = Some(VirtualMachineStatus {
            phase: Some(if is_ready { "Ready" } else { "Provisioning" }.into()),
            ready_since: ready
                .map(|s| convert::to_time(time::OffsetDateTime::from_unix_timestamp(s).unwrap())),
            image_revision: revision.map(|r| format!("r{r}")),
            ..VirtualMachineStatus::default()
        });
        vm
    }

    fn shape() -> impl Strategy<Value = Shape> {
        (
            proptest::option::of(0i64..5),
            proptest::option::of(1u8..3),
            proptest::bool::weighted(0.8),
            proptest::bool::weighted(0.2),
            proptest::bool::weighted(0.1),
        )
    }

    proptest! {
        /// Through the index, `pick_member` picks exactly what it picks from every member,
        /// and a reserved member is not offered again.
        #[test]
        fn the_index_picks_what_pick_member_picks(
            shapes in proptest::collection::vec(shape(), 0..30),
            current in proptest::option::of(1u8..3),
            reserve_first in proptest::bool::ANY,
        ) {
            let vms: Vec<VirtualMachine> =
                shapes.into_iter().enumerate().map(|(i, s)| vm(i, s)).collect();
            let index = MemberIndex::default();
            index.apply_event(&watcher::Event::Init);
            for vm in &vms {
                index.apply_event(&watcher::Event::InitApply(vm.clone()));
            }
            index.apply_event(&watcher::Event::InitDone);
            let current = current.map(|r| format!("r{r}"));
            let mut all: Vec<Member> = vms.iter().map(convert::member).collect();
            let by_name = |names: Vec<String>, all: &[Member]| -> Vec<Member> {
                all.iter().filter(|m| names.contains(&m.name)).cloned().collect()
            };
            let mut pick = index.pick();
            let candidates = by_name(pick.candidates("ns", "p", current.as_deref(), |_| true), &all);
            let expected = pick_member(&all, current.as_deref()).map(|m| m.name.clone());
            prop_assert_eq!(
                pick_member(&candidates, current.as_deref()).map(|m| m.name.clone()),
                expected.clone()
            );
            if let (true, Some(name)) = (reserve_first, expected) {
                let version = vms.iter().find(|v| v.name_any() == name).unwrap().resource_version().unwrap();
                pick.reserve("ns", &name, &version);
                all.retain(|m| m.name != name);
                let candidates = by_name(pick.candidates("ns", "p", current.as_deref(), |_| true), &all);
                prop_assert_eq!(
                    pick_member(&candidates, current.as_deref()).map(|m| m.name.clone()),
                    pick_member(&all, current.as_deref()).map(|m| m.name.clone())
                );
                drop(pick);
                // The same version again (a relist) stays out; another version comes back.
                let mut again = vms.iter().find(|v| v.name_any() == name).unwrap().clone();
                index.apply_event(&watcher::Event::Apply(again.clone()));
                let key = ("ns".to_owned(), name.clone());
                prop_assert!(!index.lock().entries.contains_key(&key));
                again.metadata.resource_version = Some("changed".into());
                index.apply_event(&watcher::Event::Apply(again));
                prop_assert!(index.lock().entries.contains_key(&key));
            }
        }
    }
}
