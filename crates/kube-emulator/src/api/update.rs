//! Update (PUT) of an object or its `status`: `resourceVersion` and UID preconditions,
//! immutable metadata, finalizers of an object being deleted, `generation`, and the
//! removal of an object whose last finalizer goes.

use serde_json::{Value, json};

use super::builtin::builtin_fixups;
use super::crd::{after_remove, register_crd};
use super::ctx::Ctx;
use super::object::{as_version, meta};
use super::validate::{admission, check_type, validate_custom};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::Store;

/// PUT: replaces an object (or its `status`), honouring a `resourceVersion` precondition.
/// Custom resources must carry one: their update strategy does not allow unconditional
/// updates (apiextensions-apiserver `AllowUnconditionalUpdate() == false`), built-in kinds
/// do.
///
/// Errors: 404, 400 (name/namespace mismatch), 409 Conflict (stale resourceVersion or UID),
/// 422 Invalid (schema, or a custom resource without `metadata.resourceVersion`).
pub fn update(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    subresource: &str,
    body: Value,
    ctx: &mut Ctx,
) -> ApiResult<Value> {
    if def.custom && meta(&body, "resourceVersion").is_empty() {
        // kube-apiserver names the resource, not the kind, in this one.
        return Err(ApiError::invalid(
            &def.group,
            &def.plural,
            name,
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: 0: must be specified for an update".into(),
                field: "metadata.resourceVersion".into(),
            }],
        ));
    }
    update_inner(store, def, ns, name, subresource, body, ctx, false)
}

/// [`update`]; `applied` when the body comes from a server-side apply (its
/// `managedFields` are already computed).
#[allow(clippy::too_many_arguments)]
pub(crate) fn update_inner(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    subresource: &str,
    mut body: Value,
    ctx: &mut Ctx,
    applied: bool,
) -> ApiResult<Value> {
    let store_ns = if def.namespaced { ns } else { "" };
    let old = store
        .get(&def.group, &def.plural, store_ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
    check_type(def, &mut body)?;
    let body_name = meta(&body, "name");
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if def.namespaced {
        let body_ns = meta(&body, "namespace");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let want_rv = meta(&body, "resourceVersion");
    if !want_rv.is_empty() && want_rv != meta(&old, "resourceVersion") {
        return Err(ApiError::conflict(&def.group, &def.plural, name));
    }
    let want_uid = meta(&body, "uid");
    if !want_uid.is_empty() && want_uid != meta(&old, "uid") {
        return Err(ApiError::conflict_msg(
            &def.group,
            &def.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {}",
                meta(&old, "uid")
            ),
        ));
    }
    // `managedFields` sent with a write replace the stored ones (an empty list keeps them).
    let sent_managed = body
        .pointer("/metadata/managedFields")
        .filter(|m| m.as_array().is_none_or(|a| !a.is_empty()))
        .cloned();
    let mut new = if subresource == "status" {
        let mut n = old.clone();
        match body.get("status") {
            Some(s) => n["status"] = s.clone(),
            None => {
                if let Some(m) = n.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        n
    } else {
        let mut n = body;
        if def.status_subresource {
            match old.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        n
    };
    {
        let m = new["metadata"].as_object_mut().expect("metadata object");
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ] {
            match old["metadata"].get(f) {
                Some(v) => {
                    m.insert(f.into(), v.clone());
                }
                None => {
                    m.remove(f);
                }
            }
        }
        m.remove("resourceVersion");
        match sent_managed.or_else(|| old["metadata"].get("managedFields").cloned()) {
            Some(mf) => {
                m.insert("managedFields".into(), mf);
            }
            None => {
                m.remove("managedFields");
            }
        }
    }
    if def.plural == "namespaces" && def.group.is_empty() {
        new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        if subresource != "status" {
            new["status"] = old.get("status").cloned().unwrap_or(json!({}));
        }
    }
    if old.pointer("/metadata/deletionTimestamp").is_some() {
        let old_f: Vec<&Value> = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let added = new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|f| !old_f.contains(&f)));
        if added {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                name,
                vec![Cause {
                    reason: "FieldValueForbidden".into(),
                    message: "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{...}".into(),
                    field: "metadata.finalizers".into(),
                }],
            ));
        }
    }
    if def.custom {
        validate_custom(def, &mut new, Some(&old), ctx)?;
    }
    builtin_fixups(def, &mut new, false)?;
    if def.group == "rbac.authorization.k8s.io"
        && def.plural.ends_with("bindings")
        && new.get("roleRef") != old.get("roleRef")
    {
        return Err(ApiError::invalid(
            &def.group,
            &def.kind,
            name,
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: cannot change roleRef",
                    new.get("roleRef").cloned().unwrap_or(Value::Null)
                ),
                field: "roleRef".into(),
            }],
        ));
    }
    if !applied {
        // Even a write without a manager removes fields from their owners.
        crate::apply::track_update(def, subresource, Some(&old), &mut new, &ctx.field_manager);
    }
    if def.has_generation
        && without_meta_status(&old, def.status_subresource)
            != without_meta_status(&new, def.status_subresource)
    {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        new["metadata"]["generation"] = json!(g + 1);
    }
    let mut old_cmp = old.clone();
    if let Some(m) = old_cmp["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    if old_cmp == new {
        return Ok(as_version(def, old));
    }
    if def.group == "rbac.authorization.k8s.io" {
        crate::rbac::check_escalation(store, ctx.user, &def.plural, store_ns, &new)
            .map_err(ApiError::forbidden)?;
    }
    admission(
        store,
        def,
        "UPDATE",
        subresource,
        store_ns,
        name,
        &new,
        &old,
        ctx,
    )?;
    if ctx.dry_run {
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        return Ok(as_version(def, new));
    }
    let finalizers_empty = new
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|a| a.is_empty());
    if new.pointer("/metadata/deletionTimestamp").is_some()
        && finalizers_empty
        && def.plural != "namespaces"
    {
        store.put(&def.group, &def.plural, new);
        let gone = store
            .remove(&def.group, &def.plural, store_ns, name)
            .ok_or_else(|| ApiError::internal("vanished"))?;
        after_remove(store, def, &gone);
        return Ok(as_version(def, gone));
    }
    let stored = store.put(&def.group, &def.plural, new);
    if def.group == "apiextensions.k8s.io" {
        register_crd(store, &stored);
    }
    Ok(as_version(def, stored))
}

fn without_meta_status(o: &Value, drop_status: bool) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        if drop_status {
            m.remove("status");
        }
    }
    o
}
