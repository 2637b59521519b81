//! Server-side apply and `metadata.managedFields`, following
//! <https://kubernetes.io/docs/reference/using-api/server-side-apply/> and the
//! structured-merge-diff rules the real server uses:
//!
//! * field sets are kept per manager in the `FieldsV1` form (`f:<field>`, `k:<keys>` for
//!   elements of `x-kubernetes-list-type: map` lists, `v:<value>` for `set` lists, `.` for
//!   an owned list element);
//! * lists merge according to their schema: `map` lists by their
//!   `x-kubernetes-list-map-keys`, `set` lists by value, other lists are atomic. Built-in
//!   metadata follows `ObjectMeta` (`finalizers` is a set, `ownerReferences` a map keyed by
//!   `uid`); built-in kinds key `status.conditions` by `type`; custom resources follow the
//!   markers of their CRD schema (unmarked lists are atomic, as on the real server);
//! * an apply that changes a field another manager (apply or update) owns is a 409
//!   `Conflict` naming the manager, unless forced, which transfers the field;
//! * fields an applier applied before and no longer applies are removed unless another
//!   manager owns them;
//! * non-apply writes (create, update, patch) with a field manager (the `fieldManager`
//!   parameter or the `User-Agent` prefix) take ownership of the fields they change, as
//!   `operation: Update` entries.
//!
//! Not modelled: `x-kubernetes-map-type: atomic`, version conversion of field sets,
//! `managedFields` given explicitly in a request other than as a whole.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use crate::clock::now;
use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause};

/// A field path as `FieldsV1` keys (`["f:status", "f:conditions", "k:{\"type\":\"Ready\"}",
/// "f:status"]`). A path ending in a `k:` or `v:` key is the list element itself.
pub(crate) type FieldPath = Vec<String>;

type FieldSet = BTreeSet<FieldPath>;

/// `ObjectMeta`'s list types (`+listType` markers of `k8s.io/apimachinery`).
static METADATA: LazyLock<Value> = LazyLock::new(|| {
    json!({"type": "object", "properties": {
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"], "items": {"type": "object"}},
    }})
});

/// The list types of the built-in kinds we serve (conditions keyed by `type`; RBAC rules
/// and subjects are atomic).
static BUILTIN: LazyLock<Value> = LazyLock::new(|| {
    json!({"type": "object", "properties": {
        "status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"], "items": {"type": "object"}},
        }},
    }})
});

/// A position in the schema while walking an object.
#[derive(Clone, Copy)]
struct Schema<'a> {
    node: Option<&'a Value>,
    root: bool,
}

enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

impl<'a> Schema<'a> {
    fn root(def: &'a ResourceDef) -> Self {
        let node = match &def.schema {
            Some(s) if def.custom => Some(&s.raw),
            _ if def.custom => None,
            _ => Some(&*BUILTIN),
        };
        Self { node, root: true }
    }

    fn field(self, key: &str) -> Self {
        if self.root && key == "metadata" {
            return Self {
                node: Some(&*METADATA),
                root: false,
            };
        }
        let node = self.node.and_then(|n| {
            n.get("properties")
                .and_then(|p| p.get(key))
                .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
        });
        Self { node, root: false }
    }

    fn items(self) -> Self {
        Self {
            node: self.node.and_then(|n| n.get("items")),
            root: false,
        }
    }

    fn list_type(self) -> ListType {
        let Some(n) = self.node else {
            return ListType::Atomic;
        };
        match n.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => {
                let mut keys: Vec<String> = n
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|k| k.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                keys.sort();
                if keys.is_empty() {
                    ListType::Atomic
                } else {
                    ListType::Map(keys)
                }
            }
            _ => ListType::Atomic,
        }
    }
}

/// The `k:` key of a map-list element (its key fields, sorted, as JSON), or `None` when
/// a key field is missing.
fn key_of(item: &Value, keys: &[String]) -> Option<String> {
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), item.get(k)?.clone());
    }
    // Map keys are inserted in sorted order; serialise in that order whatever Map is.
    let parts: Vec<String> = keys
        .iter()
        .map(|k| format!("{}:{}", Value::String(k.clone()), m[k]))
        .collect();
    Some(format!("k:{{{}}}", parts.join(",")))
}

fn value_key(v: &Value) -> String {
    format!("v:{v}")
}

/// Fields that identify an object or are set by the server; never owned.
fn ignored(path: &[String]) -> bool {
    match path {
        [one] => one == "f:apiVersion" || one == "f:kind",
        [m, f, ..] if m == "f:metadata" => matches!(
            f.as_str(),
            "f:name"
                | "f:namespace"
                | "f:uid"
                | "f:resourceVersion"
                | "f:generation"
                | "f:creationTimestamp"
                | "f:deletionTimestamp"
                | "f:deletionGracePeriodSeconds"
                | "f:managedFields"
                | "f:selfLink"
        ),
        _ => false,
    }
}

/// The owned paths of a (partial) object: its leaves, and the elements of `map` and
/// `set` lists.
fn fields_of(v: &Value, schema: Schema) -> FieldSet {
    fn walk(v: &Value, schema: Schema, path: &mut FieldPath, out: &mut FieldSet) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    path.push(format!("f:{k}"));
                    if !ignored(path) {
                        walk(x, schema.field(k), path, out);
                    }
                    path.pop();
                }
            }
            Value::Array(items) if !items.is_empty() => match schema.list_type() {
                ListType::Atomic => {
                    out.insert(path.clone());
                }
                ListType::Set => {
                    for item in items {
                        path.push(value_key(item));
                        out.insert(path.clone());
                        path.pop();
                    }
                }
                ListType::Map(keys) => {
                    if items.iter().any(|i| key_of(i, &keys).is_none()) {
                        out.insert(path.clone());
                        return;
                    }
                    for item in items {
                        path.push(key_of(item, &keys).expect("checked"));
                        out.insert(path.clone());
                        walk(item, schema.items(), path, out);
                        path.pop();
                    }
                }
            },
            _ => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
        }
    }
    let mut out = FieldSet::new();
    walk(v, schema, &mut Vec::new(), &mut out);
    out
}

/// The containers of an object: the paths of its non-empty maps and of its non-empty
/// `map` and `set` lists, and the elements of `map` lists (not `metadata` itself, nor
/// identifying metadata). A write that brings one in owns it, as structured-merge-diff's
/// comparison adds it (`"f:data": {".": {}, …}`).
fn containers_of(v: &Value, schema: Schema) -> FieldSet {
    fn walk(v: &Value, schema: Schema, path: &mut FieldPath, out: &mut FieldSet) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                if !path.is_empty() && path.as_slice() != ["f:metadata"] {
                    out.insert(path.clone());
                }
                for (k, x) in m {
                    path.push(format!("f:{k}"));
                    if !ignored(path) {
                        walk(x, schema.field(k), path, out);
                    }
                    path.pop();
                }
            }
            Value::Array(items) if !items.is_empty() => match schema.list_type() {
                ListType::Atomic => {}
                ListType::Set => {
                    out.insert(path.clone());
                }
                ListType::Map(keys) => {
                    if items.iter().any(|i| key_of(i, &keys).is_none()) {
                        return;
                    }
                    out.insert(path.clone());
                    for item in items {
                        path.push(key_of(item, &keys).expect("checked"));
                        out.insert(path.clone());
                        walk(item, schema.items(), path, out);
                        path.pop();
                    }
                }
            },
            _ => {}
        }
    }
    let mut out = FieldSet::new();
    walk(v, schema, &mut Vec::new(), &mut out);
    out
}

/// The maps every object of a built-in kind has, as its Go type's struct fields (empty
/// when unset): never added by a write, so never owned as containers.
fn zero_maps(def: &ResourceDef) -> Vec<FieldPath> {
    if def.custom {
        return Vec::new();
    }
    let mut maps = vec!["f:spec", "f:status"];
    match (def.group.as_str(), def.kind.as_str()) {
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            maps.push("f:roleRef")
        }
        ("", "Event") => maps.extend(["f:involvedObject", "f:source"]),
        ("events.k8s.io", "Event") => maps.extend(["f:regarding", "f:deprecatedSource"]),
        _ => {}
    }
    maps.into_iter().map(|m| vec![m.to_string()]).collect()
}

fn find_in_list(items: &[Value], key: &str) -> Option<usize> {
    if let Some(k) = key.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        items
            .iter()
            .position(|i| want.iter().all(|(f, v)| i.get(f) == Some(v)))
    } else if let Some(v) = key.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        items.iter().position(|i| *i == want)
    } else {
        key.strip_prefix("i:")?.parse().ok()
    }
}

fn step<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match key.strip_prefix("f:") {
        Some(f) => v.get(f),
        None => v
            .as_array()
            .and_then(|a| find_in_list(a, key).and_then(|i| a.get(i))),
    }
}

fn value_at<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |cur, k| step(cur, k))
}

fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        let next = match k.strip_prefix("f:") {
            Some(f) => cur.get_mut(f),
            None => match cur.as_array_mut() {
                Some(a) => match find_in_list(a, k) {
                    Some(i) => a.get_mut(i),
                    None => None,
                },
                None => None,
            },
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match last.strip_prefix("f:") {
        Some(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        None => {
            if let Some(a) = cur.as_array_mut()
                && let Some(i) = find_in_list(a, last)
            {
                a.remove(i);
            }
        }
    }
}

/// Whether `path` is a key field of a `map`-list element (it stays while the element does).
fn is_key_field(path: &[String]) -> bool {
    let [.., parent, field] = path else {
        return false;
    };
    let (Some(keys), Some(field)) = (parent.strip_prefix("k:"), field.strip_prefix("f:")) else {
        return false;
    };
    serde_json::from_str::<Map<String, Value>>(keys).is_ok_and(|m| m.contains_key(field))
}

/// Whether the leaf at `path` differs between two objects. List elements themselves
/// (`k:`/`v:` paths) differ only by presence.
fn differs(a: &Value, b: &Value, path: &[String]) -> bool {
    let (x, y) = (value_at(a, path), value_at(b, path));
    let element = path
        .last()
        .is_some_and(|k| k.starts_with("k:") || k.starts_with("v:"));
    if element {
        x.is_some() != y.is_some()
    } else {
        x != y
    }
}

/// A path in the form conflicts are reported in (`.status.conditions[type="Ready"].status`).
pub(crate) fn path_string(path: &[String]) -> String {
    let mut out = String::new();
    for k in path {
        if let Some(f) = k.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(keys) = k.strip_prefix("k:") {
            let m: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
            let parts: Vec<String> = m.iter().map(|(f, v)| format!("{f}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = k.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        } else if let Some(i) = k.strip_prefix("i:") {
            out.push_str(&format!("[{i}]"));
        }
    }
    out
}

/// `FieldsV1` encoding of a set (`{"f:spec":{"f:x":{}}}`, `.` marks an owned map, list or
/// element that has owned children).
fn encode(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for k in p {
            cur = cur
                .entry(k.clone())
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("object");
        }
    }
    // A path both owned and with owned children gets ".".
    for p in set {
        let node = p.iter().try_fold(&mut root, |cur, k| {
            cur.get_mut(k).and_then(Value::as_object_mut)
        });
        if let Some(node) = node
            && !node.is_empty()
        {
            node.insert(".".into(), json!({}));
        }
    }
    Value::Object(root)
}

fn decode(v: &Value) -> FieldSet {
    fn walk(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
        let Some(m) = v.as_object() else { return };
        if !path.is_empty() && (m.is_empty() || m.contains_key(".")) {
            out.insert(path.clone());
        }
        for (k, x) in m.iter().filter(|(k, _)| *k != ".") {
            path.push(k.clone());
            walk(x, path, out);
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
    time: Value,
    fields: FieldSet,
    changed: bool,
}

impl Entry {
    /// How the real server names a manager in conflicts (`"kubectl-edit" using v1`).
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut e = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": if self.changed { json!(now()) } else { self.time.clone() },
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(&self.fields),
        });
        if !self.subresource.is_empty() {
            e["subresource"] = json!(self.subresource);
        }
        e
    }
}

fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                    Entry {
                        manager: s("manager"),
                        operation: s("operation"),
                        api_version: s("apiVersion"),
                        subresource: s("subresource"),
                        time: e["time"].clone(),
                        fields: decode(&e["fieldsV1"]),
                        changed: false,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Stores the entries that own something, in kube-apiserver's order: by operation
/// (`Apply` before `Update`), then time (in seconds), manager, API version, subresource.
fn store_entries(obj: &mut Value, entries: Vec<Entry>) {
    let mut list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    list.sort_by(|a, b| {
        let key = |e: &Value| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            let time = s("time");
            // RFC 3339 in UTC: the first 19 characters are the time to the second.
            let seconds = time.get(..19).unwrap_or(&time).to_string();
            (
                s("operation"),
                seconds,
                s("manager"),
                s("apiVersion"),
                s("subresource"),
            )
        };
        key(a).cmp(&key(b))
    });
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Keeps the part of a field set a write to `subresource` may own: `status` only for the
/// status subresource; everything but `status` for the main resource when the kind has a
/// status subresource.
fn scope(set: &mut FieldSet, def: &ResourceDef, subresource: &str) {
    let is_status = |p: &FieldPath| p.first().is_some_and(|k| k == "f:status");
    if subresource == "status" {
        set.retain(is_status);
    } else if def.status_subresource {
        set.retain(|p| !is_status(p));
    }
}

/// Merges an applied configuration into an object: maps merge, `map` lists merge by key,
/// `set` lists by value, other lists and scalars are replaced; `null` removes.
fn merge(doc: &mut Value, cfg: &Value, schema: Schema) {
    match cfg {
        Value::Object(cm) => {
            if !doc.is_object() {
                *doc = json!({});
            }
            let target = doc.as_object_mut().expect("object");
            for (k, x) in cm {
                if x.is_null() {
                    target.remove(k);
                    continue;
                }
                let entry = target.entry(k.clone()).or_insert(Value::Null);
                merge(entry, x, schema.field(k));
            }
        }
        Value::Array(items) => match schema.list_type() {
            ListType::Atomic => *doc = cfg.clone(),
            ListType::Set => {
                if !doc.is_array() {
                    *doc = json!([]);
                }
                let list = doc.as_array_mut().expect("array");
                for item in items {
                    if !list.contains(item) {
                        list.push(item.clone());
                    }
                }
            }
            ListType::Map(keys) => {
                if !doc.is_array() || items.iter().any(|i| key_of(i, &keys).is_none()) {
                    *doc = cfg.clone();
                    return;
                }
                let list = doc.as_array_mut().expect("array");
                for item in items {
                    let key = key_of(item, &keys);
                    match list.iter().position(|x| key_of(x, &keys) == key) {
                        Some(i) => merge(&mut list[i], item, schema.items()),
                        None => list.push(item.clone()),
                    }
                }
            }
        },
        _ => *doc = cfg.clone(),
    }
}

/// Sets `metadata.managedFields` of an applied configuration that creates its object:
/// `manager` owns every field it applies.
pub(crate) fn apply_new(def: &ResourceDef, config: &mut Value, manager: &str) {
    let mut set = fields_of(config, Schema::root(def));
    scope(&mut set, def, "");
    let entry = Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: def.api_version(),
        subresource: String::new(),
        time: Value::Null,
        fields: set,
        changed: true,
    };
    store_entries(config, vec![entry]);
}

/// Server-side apply of `config` by `manager` onto `doc` (the live object, in the served
/// version), for the main resource or the `status` subresource.
///
/// Errors: 409 `Conflict` with one `FieldManagerConflict` cause per field another manager
/// owns with a different value (the real server's message:
/// `Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.a`), unless
/// `force`, which takes those fields from their managers.
pub(crate) fn apply(
    def: &ResourceDef,
    subresource: &str,
    doc: &mut Value,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<(), ApiError> {
    let schema = Schema::root(def);
    let mut applied = fields_of(config, schema);
    scope(&mut applied, def, subresource);
    let mut all = entries(doc);
    let is_me =
        |e: &Entry| e.manager == manager && e.operation == "Apply" && e.subresource == subresource;
    let mut conflicts: Vec<(usize, FieldPath)> = Vec::new();
    for (i, e) in all.iter().enumerate().filter(|(_, e)| !is_me(e)) {
        for p in e.fields.intersection(&applied) {
            // An applied empty map merges into a live map: it changes no one's field.
            let live_map =
                value_at(doc, p).is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()));
            if differs(doc, config, p) && !live_map {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&all, &conflicts));
    }
    // The losers' entries keep their time (only the writer's entry gets a new one).
    for (i, p) in &conflicts {
        all[*i].fields.remove(p);
    }
    let previous = all
        .iter()
        .find(|e| is_me(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    // A field stays while another manager owns it, something under it, or the list
    // element it is in (owning a map is no claim on its fields).
    let element = |q: &FieldPath| {
        q.last()
            .is_some_and(|k| k.starts_with("k:") || k.starts_with("v:"))
    };
    let related =
        |p: &FieldPath, q: &FieldPath| q.starts_with(p) || (p.starts_with(q) && element(q));
    let gone: Vec<&FieldPath> = previous
        .iter()
        .filter(|p| !applied.iter().any(|q| q.starts_with(p)))
        .filter(|p| {
            !all.iter()
                .filter(|e| !is_me(e))
                .any(|e| e.fields.iter().any(|q| related(p, q)))
        })
        .filter(|p| !is_key_field(p))
        .collect();
    // Removing an element removes its fields: drop paths under another removed path.
    let gone: Vec<&FieldPath> = gone
        .iter()
        .filter(|p| !gone.iter().any(|q| q.len() < p.len() && p.starts_with(q)))
        .copied()
        .collect();
    let mut cfg = config.clone();
    if let Some(m) = cfg.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    merge(doc, &cfg, schema);
    for p in gone {
        remove_at(doc, p);
    }
    match all.iter_mut().find(|e| is_me(e)) {
        Some(e) => {
            if e.fields != applied {
                e.fields = applied;
                e.changed = true;
            }
        }
        None => all.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: def.api_version(),
            subresource: subresource.to_string(),
            time: Value::Null,
            fields: applied,
            changed: true,
        }),
    }
    store_entries(doc, all);
    Ok(())
}

fn conflict_error(all: &[Entry], conflicts: &[(usize, FieldPath)]) -> ApiError {
    let n = conflicts.len();
    let message = if n == 1 {
        let (i, p) = &conflicts[0];
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            all[*i].describe(),
            path_string(p)
        )
    } else {
        let mut by_manager: Vec<(String, Vec<String>)> = Vec::new();
        for (i, p) in conflicts {
            let who = all[*i].describe();
            match by_manager.iter_mut().find(|(m, _)| *m == who) {
                Some((_, paths)) => paths.push(path_string(p)),
                None => by_manager.push((who, vec![path_string(p)])),
            }
        }
        by_manager.sort();
        let lines: Vec<String> = by_manager
            .iter()
            .flat_map(|(m, paths)| {
                std::iter::once(format!("conflicts with {m}:"))
                    .chain(paths.iter().map(|p| format!("- {p}")))
            })
            .collect();
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    };
    let mut err = ApiError::custom(409, "Conflict", message);
    err.causes = conflicts
        .iter()
        .map(|(i, p)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {}", all[*i].describe()),
            field: path_string(p),
        })
        .collect();
    err
}

/// Records a non-apply write (create, update, patch) by `manager`: the fields it added or
/// changed become its own (`operation: Update`) and leave other managers; fields it
/// removed leave every manager. A write without a manager (empty name) owns nothing but
/// still frees what it removed. `new` carries the `managedFields` to start from.
pub(crate) fn track_update(
    def: &ResourceDef,
    subresource: &str,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
) {
    let schema = Schema::root(def);
    let new_fields = fields_of(new, schema);
    let null = Value::Null;
    let before = old.unwrap_or(&null);
    let zero = zero_maps(def);
    let is_map = |v: Option<&Value>| v.is_some_and(Value::is_object);
    let mut changed: FieldSet = new_fields
        .iter()
        .filter(|p| differs(before, new, p))
        // A map emptied is not a new empty map, nor is a kind's own empty struct.
        .filter(|p| {
            !(is_map(value_at(new, p)) && (is_map(value_at(before, p)) || zero.contains(p)))
        })
        .cloned()
        .collect();
    // Maps and lists the write brought in are its own too.
    changed.extend(
        containers_of(new, schema)
            .into_iter()
            .filter(|p| value_at(before, p).is_none() && !zero.contains(p)),
    );
    scope(&mut changed, def, subresource);
    let removed: Vec<FieldPath> = old
        .map(|o| {
            let mut all = fields_of(o, schema);
            all.extend(containers_of(o, schema));
            all
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|p| value_at(new, p).is_none())
        .collect();
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    let api_version = def.api_version();
    let mut all = entries(new);
    // Other entries lose what the write changed or removed, and keep their time.
    for e in &mut all {
        e.fields
            .retain(|p| !changed.contains(p) && !removed.iter().any(|r| p.starts_with(r)));
    }
    let is_me = |e: &Entry| {
        e.manager == manager
            && e.operation == "Update"
            && e.subresource == subresource
            && e.api_version == api_version
    };
    match all.iter_mut().find(|e| is_me(e)) {
        Some(e) if !changed.is_subset(&e.fields) => {
            e.fields.extend(changed);
            e.changed = true;
        }
        Some(_) => {}
        None if !changed.is_empty() && !manager.is_empty() => all.push(Entry {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version,
            subresource: subresource.to_string(),
            time: Value::Null,
            fields: changed,
            changed: true,
        }),
        None => {}
    }
    store_entries(new, all);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def_with(schema: Value) -> ResourceDef {
        let crd = json!({
            "metadata": {"name": "things.example.io"},
            "spec": {"group": "example.io", "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema}}]}
        });
        crate::resources::from_crd(&crd)
            .expect("crd")
            .into_iter()
            .next()
            .expect("one version")
    }

    fn thing_def() -> ResourceDef {
        def_with(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "protocol": {"type": "string"}, "port": {"type": "integer"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}}}},
            "status": {"type": "object", "properties": {
                "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object"}}}}}}))
    }

    #[test]
    fn fields_v1_round_trip_with_keys_values_and_elements() {
        let def = thing_def();
        let obj = json!({"apiVersion": "example.io/v1", "kind": "Thing",
            "metadata": {"name": "t", "labels": {"a": "b"}, "finalizers": ["x"],
                "ownerReferences": [{"uid": "u1", "name": "o", "kind": "K", "apiVersion": "v1"}]},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}], "tags": ["t1"], "args": ["a"]}});
        let set = fields_of(&obj, Schema::root(&def));
        let encoded = encode(&set);
        assert_eq!(
            encoded["f:spec"]["f:ports"][r#"k:{"name":"http","protocol":"TCP"}"#],
            json!({".": {}, "f:name": {}, "f:protocol": {}, "f:port": {}})
        );
        assert_eq!(encoded["f:spec"]["f:tags"], json!({r#"v:"t1""#: {}}));
        assert_eq!(encoded["f:spec"]["f:args"], json!({}));
        assert_eq!(
            encoded["f:metadata"]["f:finalizers"],
            json!({r#"v:"x""#: {}})
        );
        assert!(
            encoded["f:metadata"]["f:ownerReferences"]
                .get(r#"k:{"uid":"u1"}"#)
                .is_some()
        );
        assert!(encoded["f:metadata"].get("f:name").is_none());
        assert_eq!(decode(&encoded), set);
        assert_eq!(
            path_string(&[
                "f:spec".into(),
                "f:ports".into(),
                r#"k:{"name":"http","protocol":"TCP"}"#.into(),
                "f:port".into()
            ]),
            r#".spec.ports[name="http",protocol="TCP"].port"#
        );
    }

    #[test]
    fn appliers_merge_map_lists_by_key_and_conflict_per_element_field() {
        let def = thing_def();
        let mut doc =
            json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"}});
        let a = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}], "tags": ["a"], "args": ["x"]}});
        apply(&def, "", &mut doc, &a, "alpha", false).unwrap();
        let b = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"ports": [{"name": "dns", "protocol": "UDP", "port": 53}], "tags": ["b"]}});
        apply(&def, "", &mut doc, &b, "beta", false).unwrap();
        assert_eq!(
            doc["spec"]["ports"],
            json!([{"name": "http", "protocol": "TCP", "port": 80}, {"name": "dns", "protocol": "UDP", "port": 53}])
        );
        assert_eq!(doc["spec"]["tags"], json!(["a", "b"]));
        // beta changes alpha's port: a conflict on that element's field.
        let b2 = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 8080}]}});
        let err = apply(&def, "", &mut doc.clone(), &b2, "beta", false).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            r#"Apply failed with 1 conflict: conflict with "alpha": .spec.ports[name="http",protocol="TCP"].port"#
        );
        // alpha stops applying its port: only its element goes; beta's stays.
        let a2 = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"tags": ["a"], "args": ["x"]}});
        apply(&def, "", &mut doc, &a2, "alpha", false).unwrap();
        assert_eq!(
            doc["spec"]["ports"],
            json!([{"name": "dns", "protocol": "UDP", "port": 53}])
        );
        // Forcing takes the field.
        apply(&def, "", &mut doc, &b2, "beta", true).unwrap();
        let again = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 9090}]}});
        assert!(apply(&def, "", &mut doc.clone(), &again, "alpha", false).is_err());
    }

    #[test]
    fn updates_take_ownership_and_conflict_with_appliers() {
        let def = thing_def();
        let mut doc = json!({"apiVersion": "example.io/v1", "kind": "Thing",
            "metadata": {"name": "t", "finalizers": ["a/x"]}, "spec": {"args": ["1"]}});
        track_update(&def, "", None, &mut doc, "creator");
        let old = doc.clone();
        doc["spec"]["args"] = json!(["2"]);
        track_update(&def, "", Some(&old), &mut doc, "kubectl-edit");
        let cfg = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"args": ["3"]}});
        let err = apply(&def, "", &mut doc.clone(), &cfg, "ctl", false).unwrap_err();
        assert_eq!(
            err.message,
            r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using example.io/v1: .spec.args"#
        );
        assert_eq!(err.causes[0].reason, "FieldManagerConflict");
        // The same value is shared ownership, not a conflict.
        let same = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t", "finalizers": ["a/x", "b/y"]},
            "spec": {"args": ["2"]}});
        apply(&def, "", &mut doc, &same, "ctl", false).unwrap();
        assert_eq!(doc["metadata"]["finalizers"], json!(["a/x", "b/y"]));
        let managers: Vec<&str> = doc["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, vec!["ctl", "creator", "kubectl-edit"]);
    }

    /// As on kube-apiserver: a write that brings in a map owns it (`.`), and keeps it
    /// when an applier forces its fields away; appliers are listed first.
    #[test]
    fn updates_own_the_maps_they_bring_in() {
        let def = thing_def();
        let mut doc = json!({"apiVersion": "example.io/v1", "kind": "Thing",
            "metadata": {"name": "t", "labels": {"a": "b"}}, "spec": {"args": ["1"], "x": {"y": 1}}});
        track_update(&def, "", None, &mut doc, "creator");
        assert_eq!(
            doc["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                "f:spec": {".": {}, "f:args": {}, "f:x": {".": {}, "f:y": {}}}})
        );
        let cfg = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"x": {"y": 2}}});
        apply(&def, "", &mut doc, &cfg, "ctl", true).unwrap();
        let entries = doc["metadata"]["managedFields"].as_array().unwrap();
        let managers: Vec<&str> = entries
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, vec!["ctl", "creator"]);
        assert_eq!(
            entries[1]["fieldsV1"]["f:spec"]["f:x"],
            json!({}),
            "the creator keeps spec.x itself"
        );
        // Removing the map frees it.
        let old = doc.clone();
        doc["spec"].as_object_mut().unwrap().remove("x");
        track_update(&def, "", Some(&old), &mut doc, "editor");
        let entries = doc["metadata"]["managedFields"].as_array().unwrap();
        let managers: Vec<&str> = entries
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, vec!["creator"], "ctl owned only what went");
        assert_eq!(
            entries[0]["fieldsV1"]["f:spec"],
            json!({".": {}, "f:args": {}})
        );
    }

    #[test]
    fn status_conditions_apply_per_type_on_the_status_subresource() {
        let def = thing_def();
        let mut doc = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let mine = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "status": {"conditions": [{"type": "Synced", "status": "True"}]}});
        apply(&def, "status", &mut doc, &mine, "controller", false).unwrap();
        assert_eq!(
            doc["status"]["conditions"],
            json!([{"type": "Ready", "status": "False"}, {"type": "Synced", "status": "True"}])
        );
        let other = json!({"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "status": {"conditions": [{"type": "Synced", "status": "False"}]}});
        let err = apply(&def, "status", &mut doc, &other, "other", false).unwrap_err();
        assert_eq!(
            err.message,
            r#"Apply failed with 1 conflict: conflict with "controller" with subresource "status": .status.conditions[type="Synced"].status"#
        );
        // On the main resource, status is not owned (the status subresource is separate).
        let mut main = doc.clone();
        apply(&def, "", &mut main, &other, "other", false).unwrap();
    }
}
