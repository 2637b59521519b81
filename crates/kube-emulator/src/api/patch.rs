//! Patch (PATCH): JSON, merge, strategic-merge and server-side apply patches, turned into
//! an update of the patched object (or, for an apply, a create of a missing one).

use serde_json::{Value, json};

use super::create::create_inner;
use super::ctx::Ctx;
use super::object::{as_version, meta};
use super::strategic::{strategic_merge, strip_directives};
use super::update::update_inner;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::Store;

/// The kind of patch, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` (treated as a merge patch without directives).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply, as create-or-merge).
    Apply,
}

/// PATCH: applies a JSON, merge, strategic-merge or apply patch, then updates (a
/// `metadata.resourceVersion` in the patched result acts as a precondition).
///
/// Errors: as [`update`](super::update()), plus 422 for a JSON patch that does not apply; apply creates a
/// missing object.
#[allow(clippy::too_many_arguments)]
pub(crate) fn patch(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    subresource: &str,
    kind: PatchType,
    mut body: Value,
    ctx: &mut Ctx,
) -> ApiResult<Value> {
    let store_ns = if def.namespaced { ns } else { "" };
    let current = store.get(&def.group, &def.plural, store_ns, name).cloned();
    let Some(current) = current else {
        if kind == PatchType::Apply && subresource.is_empty() {
            if let Some(m) = body["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            if meta(&body, "name").is_empty() {
                body["metadata"]["name"] = json!(name);
            }
            strip_directives(&mut body);
            crate::apply::apply_new(def, &mut body, &ctx.field_manager);
            return create_inner(store, def, ns, body, ctx, true);
        }
        return Err(ApiError::not_found(&def.group, &def.plural, name));
    };
    let mut doc = as_version(def, current.clone());
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(body.clone())
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut doc, &ops.0).map_err(|e| {
                ApiError::invalid(
                    &def.group,
                    &def.kind,
                    name,
                    vec![Cause {
                        reason: "FieldValueInvalid".into(),
                        message: format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                        field: String::new(),
                    }],
                )
            })?;
        }
        PatchType::Merge => json_patch::merge(&mut doc, &body),
        PatchType::Strategic => strategic_merge(&mut doc, &body, ""),
        PatchType::Apply => {
            strip_directives(&mut body);
            crate::apply::apply(
                def,
                subresource,
                &mut doc,
                &body,
                &ctx.field_manager,
                ctx.force,
            )?;
        }
    }
    // A resourceVersion that the patch did not set is not a precondition.
    let patch_sets_rv = match kind {
        PatchType::Json => meta(&doc, "resourceVersion") != meta(&current, "resourceVersion"),
        _ => body
            .pointer("/metadata/resourceVersion")
            .is_some_and(|v| !v.is_null()),
    };
    if !patch_sets_rv && let Some(m) = doc["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    update_inner(
        store,
        def,
        ns,
        name,
        subresource,
        doc,
        ctx,
        kind == PatchType::Apply,
    )
}
