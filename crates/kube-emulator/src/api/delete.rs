//! Delete (DELETE): preconditions, admission, propagation policies (`Orphan`,
//! `Foreground`, `Background`), finalizers and namespace termination; and the
//! owner/dependent relation the garbage collector also uses.

use serde_json::{Value, json};

use super::crd::after_remove;
use super::ctx::Ctx;
use super::object::{as_version, meta};
use super::validate::admission;
use crate::clock::now;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::store::Store;

/// The uids an object's `ownerReferences` name.
pub(crate) fn owner_uids(o: &Value) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Objects whose ownerReferences name `uid`: `(group, plural, ns, name)`.
pub(crate) fn dependents(store: &Store, uid: &str) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for (g, p) in store.types() {
        for o in store.list_all(&g, &p) {
            if owner_uids(o).iter().any(|u| u == uid) {
                out.push((
                    g.clone(),
                    p.clone(),
                    meta(o, "namespace").to_string(),
                    meta(o, "name").to_string(),
                ));
            }
        }
    }
    out
}

/// DELETE: removes an object, or marks it with `deletionTimestamp` while finalizers remain.
/// `propagationPolicy` Orphan strips ownerReferences from dependents; Foreground adds the
/// `foregroundDeletion` finalizer and lets the collector delete dependents first;
/// Background (default) deletes now and lets the collector remove dependents.
///
/// Errors: 404, 409 (preconditions).
pub(crate) fn delete(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    opts: &Value,
    ctx: &mut Ctx,
) -> ApiResult<Value> {
    let store_ns = if def.namespaced { ns } else { "" };
    let old = store
        .get(&def.group, &def.plural, store_ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
    if let Some(rv) = opts
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
        && rv != meta(&old, "resourceVersion")
    {
        return Err(ApiError::conflict_msg(
            &def.group,
            &def.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta(&old, "resourceVersion")
            ),
        ));
    }
    if let Some(uid) = opts.pointer("/preconditions/uid").and_then(Value::as_str)
        && uid != meta(&old, "uid")
    {
        return Err(ApiError::conflict_msg(
            &def.group,
            &def.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta(&old, "uid")
            ),
        ));
    }
    admission(
        store,
        def,
        "DELETE",
        "",
        store_ns,
        name,
        &Value::Null,
        &old,
        ctx,
    )?;
    let policy = opts
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .or_else(|| {
            opts.get("orphanDependents")
                .and_then(Value::as_bool)
                .map(|o| if o { "Orphan" } else { "Background" })
        })
        .unwrap_or("Background")
        .to_string();
    if ctx.dry_run {
        return Ok(as_version(def, old));
    }
    let uid = meta(&old, "uid").to_string();
    if policy == "Orphan" {
        for (g, p, dns, dn) in dependents(store, &uid) {
            if let Some(mut d) = store.get(&g, &p, &dns, &dn).cloned() {
                if let Some(refs) = d["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"].as_str() != Some(uid.as_str()));
                }
                store.put(&g, &p, d);
            }
        }
    }
    let mut obj = old.clone();
    let is_namespace = def.group.is_empty() && def.plural == "namespaces";
    let mut finalizers: Vec<Value> = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if policy == "Foreground"
        && !dependents(store, &uid).is_empty()
        && !finalizers.contains(&json!("foregroundDeletion"))
    {
        finalizers.push(json!("foregroundDeletion"));
        obj["metadata"]["finalizers"] = Value::Array(finalizers.clone());
    }
    if !finalizers.is_empty() || is_namespace {
        if obj.pointer("/metadata/deletionTimestamp").is_none() {
            obj["metadata"]["deletionTimestamp"] = json!(now());
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if let Some(g) = obj.pointer("/metadata/generation").and_then(Value::as_i64) {
                obj["metadata"]["generation"] = json!(g + 1);
            }
            if is_namespace {
                obj["status"] = json!({"phase": "Terminating"});
            }
        }
        if obj == old {
            return Ok(as_version(def, old));
        }
        let stored = store.put(&def.group, &def.plural, obj);
        return Ok(as_version(def, stored));
    }
    let gone = store
        .remove(&def.group, &def.plural, store_ns, name)
        .ok_or_else(|| ApiError::internal("vanished"))?;
    after_remove(store, def, &gone);
    Ok(as_version(def, gone))
}
