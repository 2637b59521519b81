//! Create (POST): namespace checks, `generateName`, uid and timestamps, validation,
//! RBAC escalation checks and admission before the object is stored.

use rand::Rng;
use serde_json::{Value, json};

use super::builtin::builtin_fixups;
use super::crd::register_crd;
use super::ctx::Ctx;
use super::object::{as_version, meta};
use super::validate::{admission, check_type, validate_custom, validate_name};
use crate::clock::now;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::Store;

fn new_uid() -> String {
    let b: [u8; 16] = rand::thread_rng().r#gen();
    format!(
        "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-4{:01x}{:02x}-{:01x}{:01x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        b[0],
        b[1],
        b[2],
        b[3],
        b[4],
        b[5],
        b[6] & 0x0f,
        b[7],
        8 | (b[8] & 0x3),
        b[8] >> 4,
        b[9],
        b[10],
        b[11],
        b[12],
        b[13],
        b[14],
        b[15]
    )
}

/// The 5 random characters `generateName` appends (`k8s.io/apiserver` alphabet).
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::thread_rng();
    (0..5)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

/// POST: creates an object.
///
/// Errors: 400 (body mismatch), 404 (namespace), 403 (terminating namespace), 409
/// AlreadyExists, 422 Invalid (name, schema, admission).
pub fn create(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    body: Value,
    ctx: &mut Ctx,
) -> ApiResult<Value> {
    create_inner(store, def, ns, body, ctx, false)
}

/// [`create`]; `applied` when the body comes from a server-side apply (its
/// `managedFields` are already set).
pub(crate) fn create_inner(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    mut body: Value,
    ctx: &mut Ctx,
    applied: bool,
) -> ApiResult<Value> {
    check_type(def, &mut body)?;
    if def.namespaced {
        let body_ns = meta(&body, "namespace");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        body["metadata"]["namespace"] = json!(ns);
        match store.get("", "namespaces", "", ns) {
            None => return Err(ApiError::not_found("", "namespaces", ns)),
            Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => {
                return Err(ApiError::forbidden(format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    crate::status::qualified(&def.group, &def.plural),
                    meta(&body, "name")
                )));
            }
            _ => {}
        }
    } else if let Some(m) = body["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    if !meta(&body, "resourceVersion").is_empty() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let mut name = meta(&body, "name").to_string();
    if name.is_empty() {
        let generate = meta(&body, "generateName").to_string();
        if generate.is_empty() {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                "",
                vec![Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into(),
                }],
            ));
        }
        name = format!("{generate}{}", random_suffix());
        body["metadata"]["name"] = json!(name);
    }
    if let Some(c) = validate_name(def, &name) {
        return Err(ApiError::invalid(&def.group, &def.kind, &name, vec![c]));
    }
    let store_ns = if def.namespaced { ns } else { "" };
    if store
        .get(&def.group, &def.plural, store_ns, &name)
        .is_some()
    {
        return Err(ApiError::already_exists(&def.group, &def.plural, &name));
    }
    {
        let m = body["metadata"].as_object_mut().expect("metadata object");
        m.insert("uid".into(), json!(new_uid()));
        m.insert("creationTimestamp".into(), json!(now()));
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        if def.has_generation {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    if def.status_subresource
        && def.custom
        && let Some(m) = body.as_object_mut()
    {
        m.remove("status");
    }
    if def.custom {
        validate_custom(def, &mut body, None, ctx)?;
    }
    builtin_fixups(def, &mut body, true)?;
    if !applied {
        if let Some(m) = body["metadata"].as_object_mut()
            && m.get("managedFields")
                .and_then(Value::as_array)
                .is_some_and(|a| a.is_empty())
        {
            m.remove("managedFields");
        }
        if !ctx.field_manager.is_empty() {
            crate::apply::track_update(def, "", None, &mut body, &ctx.field_manager);
        }
    }
    if def.group == "rbac.authorization.k8s.io" {
        crate::rbac::check_escalation(store, ctx.user, &def.plural, store_ns, &body)
            .map_err(ApiError::forbidden)?;
    }
    admission(
        store,
        def,
        "CREATE",
        "",
        store_ns,
        &name,
        &body,
        &Value::Null,
        ctx,
    )?;
    if ctx.dry_run {
        return Ok(body);
    }
    let stored = store.put(&def.group, &def.plural, body);
    if def.group == "apiextensions.k8s.io" {
        register_crd(store, &stored);
    }
    Ok(as_version(def, stored))
}
