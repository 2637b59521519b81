//! The object store: every object keyed by group/resource/namespace/name, one global,
//! monotonically increasing `resourceVersion`, and a bounded event history that watches
//! replay from.
//!
//! Semantics of `resourceVersion` from
//! <https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions>: an
//! opaque string here holding a decimal counter shared by all kinds (as etcd's revision).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::feed::{Change, Feed, Subscriber, event_line};
use crate::resources::Registry;

/// `(group, plural, namespace, name)`; namespace is empty for cluster-scoped objects.
pub(crate) type ObjKey = (String, String, String, String);

/// An object with its JSON encoding, computed once per write (lists and watches copy
/// bytes instead of re-serialising).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The object.
    pub(crate) value: Value,
    /// `serde_json` encoding of `value`.
    pub(crate) json: bytes::Bytes,
}

impl Stored {
    fn new(value: Value) -> Self {
        let json = bytes::Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        Self { value, json }
    }
}

/// Retained changes since a point, and a subscriber for the changes after them.
pub(crate) type Subscription = (Vec<Arc<Change>>, Subscriber);

/// What a snapshot file holds.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// Last resourceVersion used.
    pub(crate) rv: u64,
    /// Every object with its `(group, plural)`.
    pub(crate) objects: Vec<(String, String, Value)>,
}

/// The store. Callers hold it behind one mutex, so every operation is atomic.
pub struct Store {
    rv: u64,
    objects: HashMap<(String, String), BTreeMap<(String, String), Stored>>,
    uids: HashMap<String, ObjKey>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Served types (built-ins and CRDs).
    pub registry: Registry,
    feed: Arc<Feed>,
    /// Set on every write; cleared by the snapshot writer.
    pub(crate) dirty: bool,
    removals: u64,
}

/// The watch start point asked for is older than the retained history (HTTP 410).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooOld {
    /// Oldest resourceVersion still replayable.
    pub(crate) oldest: u64,
}

/// `metadata.<field>` of an object as a string (empty when absent).
pub(crate) fn meta_str<'a>(o: &'a Value, field: &str) -> &'a str {
    o.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Store {
    /// An empty store with built-in types; `history_limit` events are kept for watches.
    pub fn new(history_limit: usize) -> Self {
        Self {
            rv: 1,
            objects: HashMap::new(),
            uids: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            registry: Registry::with_builtins(),
            feed: Arc::new(Feed::new()),
            dirty: false,
            removals: 0,
        }
    }

    /// The watch fan-out this store publishes its changes to (the server runs its
    /// dispatcher and closes it when stopping).
    pub(crate) fn feed(&self) -> Arc<Feed> {
        self.feed.clone()
    }

    /// How many objects have been removed so far (the garbage collector runs when it moves).
    pub(crate) fn removals(&self) -> u64 {
        self.removals
    }

    /// The current (latest) resourceVersion.
    pub(crate) fn current_rv(&self) -> u64 {
        self.rv
    }

    /// One object.
    pub fn get(&self, group: &str, plural: &str, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&(group.to_string(), plural.to_string()))
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .map(|s| &s.value)
    }

    /// Every object of a type, ordered by namespace then name.
    pub(crate) fn list_all(&self, group: &str, plural: &str) -> impl Iterator<Item = &Value> {
        self.objects
            .get(&(group.to_string(), plural.to_string()))
            .into_iter()
            .flat_map(|m| m.values().map(|s| &s.value))
    }

    /// Objects of a type in one namespace.
    pub(crate) fn list_ns<'a>(
        &'a self,
        group: &str,
        plural: &str,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Value> {
        self.objects
            .get(&(group.to_string(), plural.to_string()))
            .into_iter()
            .flat_map(move |m| {
                m.range((ns.to_string(), String::new())..)
                    .take_while(move |((n, _), _)| n == ns)
                    .map(|(_, v)| &v.value)
            })
    }

    /// Objects of a type after `(ns, name)` exclusive (for `continue` tokens), ordered.
    pub(crate) fn list_after<'a>(
        &'a self,
        group: &str,
        plural: &str,
        after: Option<(String, String)>,
    ) -> Box<dyn Iterator<Item = &'a Stored> + 'a> {
        let Some(m) = self.objects.get(&(group.to_string(), plural.to_string())) else {
            return Box::new(std::iter::empty());
        };
        match after {
            Some(k) => Box::new(
                m.range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded))
                    .map(|(_, v)| v),
            ),
            None => Box::new(m.values()),
        }
    }

    /// Every `(group, plural)` that holds objects.
    pub(crate) fn types(&self) -> Vec<(String, String)> {
        self.objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The key of the object with this uid, if it exists.
    pub(crate) fn by_uid(&self, uid: &str) -> Option<&ObjKey> {
        self.uids.get(uid)
    }

    fn record(&mut self, change: Change) {
        let change = Arc::new(change);
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            self.history.pop_front();
        }
        self.dirty = true;
        self.feed.publish(change);
    }

    /// Stores an object (new or replaced) with a fresh resourceVersion and emits `ADDED`
    /// or `MODIFIED`. Returns the stored object.
    pub(crate) fn put(&mut self, group: &str, plural: &str, mut object: Value) -> Value {
        self.rv += 1;
        let rv = self.rv;
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let ns = meta_str(&object, "namespace").to_string();
        let name = meta_str(&object, "name").to_string();
        let uid = meta_str(&object, "uid").to_string();
        let stored = Stored::new(object.clone());
        let line = OnceLock::new();
        let _ = line.set(event_line("MODIFIED", &stored.json));
        let added_line = event_line("ADDED", &stored.json);
        let prev = self
            .objects
            .entry((group.to_string(), plural.to_string()))
            .or_default()
            .insert((ns.clone(), name.clone()), stored)
            .map(|s| s.value);
        let line = if prev.is_some() {
            line
        } else {
            OnceLock::from(added_line)
        };
        self.uids
            .insert(uid, (group.to_string(), plural.to_string(), ns, name));
        self.record(Change {
            rv,
            group: group.into(),
            plural: plural.into(),
            kind: if prev.is_some() { "MODIFIED" } else { "ADDED" },
            object: object.clone(),
            prev,
            line,
        });
        object
    }

    /// Removes an object, emitting `DELETED` with a fresh resourceVersion. Returns its last state.
    pub(crate) fn remove(
        &mut self,
        group: &str,
        plural: &str,
        ns: &str,
        name: &str,
    ) -> Option<Value> {
        let mut object = self
            .objects
            .get_mut(&(group.to_string(), plural.to_string()))?
            .remove(&(ns.to_string(), name.to_string()))?
            .value;
        self.uids.remove(meta_str(&object, "uid"));
        self.removals += 1;
        self.rv += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        self.record(Change {
            rv: self.rv,
            group: group.into(),
            plural: plural.into(),
            kind: "DELETED",
            object: object.clone(),
            prev: None,
            line: OnceLock::new(),
        });
        Some(object)
    }

    /// Subscribes to changes of a type after `from` (exclusive): the retained changes
    /// since then (of every type; the caller filters them), and a subscriber for the
    /// type's changes that follow. Both are taken under the caller's lock, so nothing is
    /// missed or repeated.
    ///
    /// Errors: [`TooOld`] when `from` predates the retained history.
    pub(crate) fn subscribe_from(
        &self,
        group: &str,
        plural: &str,
        from: u64,
    ) -> Result<Subscription, TooOld> {
        if from >= self.rv {
            return Ok((Vec::new(), self.feed.subscribe(group, plural)));
        }
        let oldest = self.history.front().map(|c| c.rv).unwrap_or(self.rv + 1);
        if from + 1 < oldest {
            return Err(TooOld { oldest });
        }
        // The history is ordered by resourceVersion.
        let first = self.history.partition_point(|c| c.rv <= from);
        let backlog = self.history.range(first..).cloned().collect();
        Ok((backlog, self.feed.subscribe(group, plural)))
    }

    /// A snapshot of all objects.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut objects = Vec::new();
        for ((g, p), m) in &self.objects {
            for v in m.values() {
                objects.push((g.clone(), p.clone(), v.value.clone()));
            }
        }
        Snapshot {
            rv: self.rv,
            objects,
        }
    }

    /// Loads a snapshot into an empty store (no events are emitted; CRDs must be
    /// re-registered by the caller).
    pub(crate) fn restore(&mut self, snap: Snapshot) {
        self.rv = self.rv.max(snap.rv);
        for (g, p, v) in snap.objects {
            let ns = meta_str(&v, "namespace").to_string();
            let name = meta_str(&v, "name").to_string();
            let uid = meta_str(&v, "uid").to_string();
            self.uids
                .insert(uid, (g.clone(), p.clone(), ns.clone(), name.clone()));
            self.objects
                .entry((g, p))
                .or_default()
                .insert((ns, name), Stored::new(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns", "uid": name}})
    }

    #[test]
    fn rv_is_global_and_history_replays() {
        let mut s = Store::new(3);
        let a = s.put("", "configmaps", cm("a"));
        let b = s.put("", "configmaps", cm("b"));
        assert!(
            b["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                > a["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
        );
        let start = s.current_rv();
        s.put("", "configmaps", cm("c"));
        s.remove("", "configmaps", "ns", "a");
        let (backlog, _) = s.subscribe_from("", "configmaps", start).unwrap();
        let kinds: Vec<&str> = backlog.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, vec!["ADDED", "DELETED"]);
        assert!(
            s.subscribe_from("", "configmaps", 1).is_err(),
            "history of 3 cannot replay from the start"
        );
        assert_eq!(s.list_ns("", "configmaps", "ns").count(), 2);
        assert_eq!(s.list_ns("", "configmaps", "other").count(), 0);
    }
}
