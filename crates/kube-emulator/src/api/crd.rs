//! What a CustomResourceDefinition's lifecycle does to the served types: a stored CRD
//! registers its kinds, a removed one takes its custom resources and kinds with it.

use serde_json::Value;

use super::object::meta;
use crate::resources::{ResourceDef, from_crd};
use crate::store::Store;

/// Registers (or re-registers) the types a stored CRD defines.
pub(crate) fn register_crd(store: &mut Store, crd: &Value) {
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    store.registry.remove_custom(&group, &plural);
    match from_crd(crd) {
        Ok(defs) => {
            for d in defs {
                store.registry.insert(d);
            }
        }
        Err(e) => tracing::warn!(crd = %meta(crd, "name"), error = %e, "CRD not served"),
    }
}

/// After an object is removed: a removed CRD takes its custom resources and its served
/// kinds with it.
pub(crate) fn after_remove(store: &mut Store, def: &ResourceDef, gone: &Value) {
    if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
        let plural = gone
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let group = gone
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let keys: Vec<(String, String)> = store
            .list_all(&group, &plural)
            .map(|o| {
                (
                    meta(o, "namespace").to_string(),
                    meta(o, "name").to_string(),
                )
            })
            .collect();
        for (ns, n) in keys {
            store.remove(&group, &plural, &ns, &n);
        }
        store.registry.remove_custom(&group, &plural);
    }
}
