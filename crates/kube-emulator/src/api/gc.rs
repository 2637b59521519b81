//! The garbage collector's pass: dependents of deleted owners, the `foregroundDeletion`
//! finalizer, and the contents of terminating namespaces.

use serde_json::{Value, json};

use super::ctx::Ctx;
use super::delete::{delete, dependents, owner_uids};
use super::object::meta;
use super::update::update;
use crate::auth::UserInfo;
use crate::store::Store;

/// One pass of the garbage collector and namespace finaliser. Returns whether anything changed.
///
/// - A dependent whose owners (by uid) are all gone, or all being deleted in the
///   foreground, is deleted (background).
/// - An object with the `foregroundDeletion` finalizer and no dependents left loses it.
/// - A terminating namespace has its contents deleted, and disappears once empty.
pub(crate) fn gc_pass(store: &mut Store) -> bool {
    let system = UserInfo::new(
        "system:serviceaccount:kube-system:generic-garbage-collector",
        &["system:masters"],
    );
    let mut ctx = Ctx::new(&system);
    let mut changed = false;
    let types = store.types();
    let mut to_delete = Vec::new();
    let mut unblock = Vec::new();
    for (g, p) in &types {
        for o in store.list_all(g, p) {
            let owners = owner_uids(o);
            if !owners.is_empty() && o.pointer("/metadata/deletionTimestamp").is_none() {
                let all_gone = owners.iter().all(|u| match store.by_uid(u) {
                    None => true,
                    Some((og, op, ons, on)) => store.get(og, op, ons, on).is_some_and(|owner| {
                        owner.pointer("/metadata/deletionTimestamp").is_some()
                            && owner
                                .pointer("/metadata/finalizers")
                                .and_then(Value::as_array)
                                .is_some_and(|f| f.contains(&json!("foregroundDeletion")))
                    }),
                });
                if all_gone {
                    to_delete.push((
                        g.clone(),
                        p.clone(),
                        meta(o, "namespace").to_string(),
                        meta(o, "name").to_string(),
                    ));
                }
            }
            if o.pointer("/metadata/deletionTimestamp").is_some()
                && o.pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|f| f.contains(&json!("foregroundDeletion")))
            {
                unblock.push((
                    g.clone(),
                    p.clone(),
                    meta(o, "namespace").to_string(),
                    meta(o, "name").to_string(),
                    meta(o, "uid").to_string(),
                ));
            }
        }
    }
    // Terminating namespaces.
    let terminating: Vec<String> = store
        .list_all("", "namespaces")
        .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
        .map(|n| meta(n, "name").to_string())
        .collect();
    for ns in &terminating {
        let mut empty = true;
        for (g, p) in &types {
            if g.is_empty() && p == "namespaces" {
                continue;
            }
            let names: Vec<(String, bool)> = store
                .list_ns(g, p, ns)
                .map(|o| {
                    (
                        meta(o, "name").to_string(),
                        o.pointer("/metadata/deletionTimestamp").is_some(),
                    )
                })
                .collect();
            for (n, deleting) in names {
                empty = false;
                if !deleting {
                    to_delete.push((g.clone(), p.clone(), ns.clone(), n));
                }
            }
        }
        if empty {
            let finalizers_left = store
                .get("", "namespaces", "", ns)
                .and_then(|n| {
                    n.pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .cloned()
                })
                .is_some_and(|f| !f.is_empty());
            if !finalizers_left {
                store.remove("", "namespaces", "", ns);
                changed = true;
            }
        }
    }
    for (g, p, ns, n) in to_delete {
        let def = store.registry.versions_of(&g, &p).into_iter().next();
        if let Some(def) = def
            && delete(
                store,
                &def,
                &ns,
                &n,
                &json!({"propagationPolicy": "Background"}),
                &mut ctx,
            )
            .is_ok()
        {
            changed = true;
        }
    }
    for (g, p, ns, n, uid) in unblock {
        if !dependents(store, &uid).is_empty() {
            continue;
        }
        let def = store.registry.versions_of(&g, &p).into_iter().next();
        if let (Some(def), Some(mut o)) = (def, store.get(&g, &p, &ns, &n).cloned()) {
            if let Some(f) = o["metadata"]["finalizers"].as_array_mut() {
                f.retain(|x| x != "foregroundDeletion");
            }
            if let Some(m) = o["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            if update(store, &def, &ns, &n, "", o, &mut ctx).is_ok() {
                changed = true;
            }
        }
    }
    changed
}
