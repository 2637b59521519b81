//! Strategic merge patches of the built-in kinds we serve (maps merge, `finalizers` and
//! `ownerReferences` merge, other lists are replaced) and the removal of `$` directives.

use serde_json::{Value, json};

/// Lists that merge instead of being replaced in a strategic merge patch, with their merge
/// key (`None` for lists of scalars), from the `patchStrategy`/`patchMergeKey` tags of the
/// built-in types we serve.
fn merge_list_key(path: &str) -> Option<Option<&'static str>> {
    match path {
        ".metadata.finalizers" => Some(None),
        ".metadata.ownerReferences" => Some(Some("uid")),
        _ => None,
    }
}

/// A strategic merge patch
/// (<https://github.com/kubernetes/community/blob/master/contributors/devel/sig-api-machinery/strategic-merge-patch.md>):
/// maps merge (`null` deletes, `$patch: replace|delete`), listed merge lists merge by key
/// (with `$patch: delete` items and `$deleteFromPrimitiveList/<field>`), other lists are
/// replaced, `$setElementOrder` and `$retainKeys` are ignored.
pub(crate) fn strategic_merge(doc: &mut Value, patch: &Value, path: &str) {
    let Value::Object(p) = patch else {
        *doc = patch.clone();
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replacement = patch.clone();
            strip_directives(&mut replacement);
            *doc = replacement;
            return;
        }
        Some("delete") => {
            *doc = Value::Null;
            return;
        }
        _ => {}
    }
    if !doc.is_object() {
        *doc = json!({});
    }
    let target = doc.as_object_mut().expect("object");
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Some(remove)) = (target.get_mut(field), v.as_array())
            {
                items.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let child_path = format!("{path}.{k}");
        if v.is_null() {
            target.remove(k);
            continue;
        }
        match (merge_list_key(&child_path), v) {
            (Some(key), Value::Array(items)) => {
                let existing = target.entry(k.clone()).or_insert_with(|| json!([]));
                if !existing.is_array() {
                    *existing = json!([]);
                }
                let list = existing.as_array_mut().expect("array");
                for item in items {
                    match key {
                        None => {
                            if !list.contains(item) {
                                list.push(item.clone());
                            }
                        }
                        Some(key) => {
                            let id = item.get(key).cloned();
                            let pos = list
                                .iter()
                                .position(|x| x.get(key).is_some() && x.get(key).cloned() == id);
                            let delete =
                                item.get("$patch").and_then(Value::as_str) == Some("delete");
                            match (pos, delete) {
                                (Some(i), true) => {
                                    list.remove(i);
                                }
                                (Some(i), false) => {
                                    strategic_merge(&mut list[i], item, &child_path)
                                }
                                (None, false) => {
                                    let mut it = item.clone();
                                    strip_directives(&mut it);
                                    list.push(it);
                                }
                                (None, true) => {}
                            }
                        }
                    }
                }
            }
            (_, Value::Object(_)) => {
                let entry = target.entry(k.clone()).or_insert(Value::Null);
                strategic_merge(entry, v, &child_path);
                if entry.is_null() {
                    target.remove(k);
                }
            }
            _ => {
                let mut value = v.clone();
                strip_directives(&mut value);
                target.insert(k.clone(), value);
            }
        }
    }
}

/// Removes every `$`-prefixed key (patch directives) from a value, recursively.
pub(crate) fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            for x in m.values_mut() {
                strip_directives(x);
            }
        }
        Value::Array(a) => {
            for x in a {
                strip_directives(x);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_merge_table() {
        let doc = json!({"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "x"}], "labels": {"k": "v", "drop": "me"}}, "data": {"a": "1"}, "list": [1, 2]});
        let cases = [
            (
                json!({"metadata": {"finalizers": ["b"]}}),
                "/metadata/finalizers",
                json!(["a", "b"]),
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                "/metadata/finalizers",
                json!([]),
            ),
            (
                json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "y"}, {"uid": "2", "name": "z"}]}}),
                "/metadata/ownerReferences",
                json!([{"uid": "1", "name": "y"}, {"uid": "2", "name": "z"}]),
            ),
            (
                json!({"metadata": {"ownerReferences": [{"uid": "1", "$patch": "delete"}]}}),
                "/metadata/ownerReferences",
                json!([]),
            ),
            (
                json!({"metadata": {"labels": {"drop": null, "n": "m"}}}),
                "/metadata/labels",
                json!({"k": "v", "n": "m"}),
            ),
            (
                json!({"data": {"$patch": "replace", "b": "2"}}),
                "/data",
                json!({"b": "2"}),
            ),
            (
                json!({"list": [3], "$setElementOrder/list": [3]}),
                "/list",
                json!([3]),
            ),
        ];
        for (i, (patch, pointer, want)) in cases.into_iter().enumerate() {
            let mut d = doc.clone();
            strategic_merge(&mut d, &patch, "");
            assert_eq!(d.pointer(pointer), Some(&want), "case {i}: {d}");
        }
    }
}
