//! Object lifecycle: create, update, patch and delete with the API server's rules, and the
//! background garbage collector.
//!
//! Rules from <https://kubernetes.io/docs/reference/using-api/api-concepts/>,
//! <https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/> and
//! <https://kubernetes.io/docs/concepts/architecture/garbage-collection/>. Every function
//! runs under the store lock, so each operation is atomic.

use rand::Rng;
use serde_json::{Value, json};

use crate::admission::{AdmissionRequest, admit};
use crate::auth::UserInfo;
use crate::resources::{ResourceDef, from_crd};
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::Store;

/// `fieldValidation` query parameter (how unknown fields are reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop silently.
    Ignore,
    /// Drop with a `Warning` header (the server default).
    #[default]
    Warn,
    /// Refuse with 400.
    Strict,
}

/// Per-request options.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The (possibly impersonated) caller.
    pub user: &'a UserInfo,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// Warnings collected for the `Warning` header.
    pub warnings: Vec<String>,
    /// The field manager of the write: the `fieldManager` parameter, else (for non-apply
    /// writes) the `User-Agent` up to its first `/`, as the real server derives it. Empty
    /// for internal writes, which then record no `managedFields` entry.
    pub field_manager: String,
    /// `force=true` (server-side apply takes conflicting fields).
    pub force: bool,
}

impl<'a> Ctx<'a> {
    /// Options for an internal caller: no dry run, unknown fields dropped silently.
    pub fn new(user: &'a UserInfo) -> Self {
        Self {
            user,
            dry_run: false,
            field_validation: FieldValidation::Ignore,
            warnings: Vec::new(),
            field_manager: String::new(),
            force: false,
        }
    }
}

/// The kind of patch, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` (treated as a merge patch without directives).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply, as create-or-merge).
    Apply,
}

/// Current time as RFC 3339 with second precision (`metav1.Time`).
pub fn now() -> String {
    let t = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

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

fn meta<'a>(o: &'a Value, field: &str) -> &'a str {
    o.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn validate_name(def: &ResourceDef, name: &str) -> Option<Cause> {
    let ok = match (def.group.as_str(), def.plural.as_str()) {
        ("rbac.authorization.k8s.io", _) => {
            !name.is_empty()
                && name != "."
                && name != ".."
                && !name.contains('/')
                && !name.contains('%')
        }
        ("", "namespaces") => is_dns_subdomain(name) && name.len() <= 63 && !name.contains('.'),
        _ => is_dns_subdomain(name),
    };
    (!ok).then(|| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ),
        field: "metadata.name".into(),
    })
}

fn check_type(def: &ResourceDef, body: &mut Value) -> ApiResult<()> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let want_av = def.api_version();
    match body.get("apiVersion").and_then(Value::as_str) {
        Some(av) if !av.is_empty() && av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => body["apiVersion"] = json!(want_av),
    }
    match body.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != def.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
        _ => body["kind"] = json!(def.kind),
    }
    if !body.get("metadata").is_some_and(Value::is_object) {
        body["metadata"] = json!({});
    }
    Ok(())
}

/// Prunes and validates a custom resource against its schema.
fn validate_custom(
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
    ctx: &mut Ctx,
) -> ApiResult<()> {
    let Some(schema) = &def.schema else {
        return Ok(());
    };
    let dropped = schema.prune(obj);
    if !dropped.is_empty() {
        match ctx.field_validation {
            FieldValidation::Strict => {
                let list: Vec<String> = dropped
                    .iter()
                    .map(|d| format!("unknown field \"{d}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                    def.kind,
                    def.api_version(),
                    def.kind,
                    list.join(", ")
                )));
            }
            FieldValidation::Warn => ctx
                .warnings
                .extend(dropped.iter().map(|d| format!("unknown field \"{d}\""))),
            FieldValidation::Ignore => {}
        }
    }
    // As kube-apiserver: the CEL rules run unless a schema error blocks them, which is
    // then said in one more cause.
    let mut causes = schema.validate(obj);
    if !causes.iter().any(crate::schema::blocks_rules) {
        causes.extend(schema.validate_rules(obj, old));
    } else if schema.has_rules() {
        causes.push(crate::schema::rules_not_checked());
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            &def.group,
            &def.kind,
            meta(obj, "name"),
            causes,
        ));
    }
    Ok(())
}

/// Built-in defaulting and validation that the emulator applies.
fn builtin_fixups(def: &ResourceDef, obj: &mut Value, create: bool) -> ApiResult<()> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "secrets") => {
            if let Some(Value::Object(sd)) =
                obj.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                use base64::Engine;
                if !obj.get("data").is_some_and(Value::is_object) {
                    obj["data"] = json!({});
                }
                for (k, v) in sd {
                    let enc = base64::engine::general_purpose::STANDARD
                        .encode(v.as_str().unwrap_or_default());
                    obj["data"][k] = json!(enc);
                }
            }
            if obj.get("type").is_none() {
                obj["type"] = json!("Opaque");
            }
            if let Some(data) = obj.get("data").and_then(Value::as_object) {
                use base64::Engine;
                for (k, v) in data {
                    let ok = v.as_str().is_some_and(|s| {
                        base64::engine::general_purpose::STANDARD.decode(s).is_ok()
                    });
                    if !ok {
                        return Err(ApiError::bad_request(format!(
                            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 0 (key {k:?})"
                        )));
                    }
                }
            }
        }
        ("", "namespaces") => {
            if create {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
            }
            let labels = &mut obj["metadata"]["labels"];
            if !labels.is_object() {
                *labels = json!({});
            }
            let name = meta(obj, "name").to_string();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let name = meta(obj, "name").to_string();
            from_crd(obj).map_err(|e| {
                ApiError::invalid(
                    &def.group,
                    &def.kind,
                    &name,
                    vec![Cause {
                        reason: "FieldValueInvalid".into(),
                        message: e,
                        field: String::new(),
                    }],
                )
            })?;
            let plural = obj
                .pointer("/spec/names/plural")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let group = obj
                .pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if name != format!("{plural}.{group}") {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    &name,
                    vec![Cause {
                        reason: "FieldValueInvalid".into(),
                        message: format!(
                            "Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
                        ),
                        field: "metadata.name".into(),
                    }],
                ));
            }
            let storage: Vec<Value> = obj
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v["storage"] == json!(true))
                        .map(|v| v["name"].clone())
                        .collect()
                })
                .unwrap_or_default();
            let now = now();
            obj["status"] = json!({
                "acceptedNames": obj.pointer("/spec/names").cloned().unwrap_or(json!({})),
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}
                ],
                "storedVersions": storage,
            });
        }
        _ => {}
    }
    Ok(())
}

/// Registers (or re-registers) the types a stored CRD defines.
pub fn register_crd(store: &mut Store, crd: &Value) {
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

#[allow(clippy::too_many_arguments)]
fn admission(
    store: &Store,
    def: &ResourceDef,
    op: &str,
    subresource: &str,
    ns: &str,
    name: &str,
    obj: &Value,
    old: &Value,
    ctx: &mut Ctx,
) -> ApiResult<()> {
    let req = AdmissionRequest {
        operation: op,
        group: &def.group,
        version: &def.version,
        kind: &def.kind,
        resource: &def.plural,
        subresource,
        namespace: ns,
        name,
        user: ctx.user,
        dry_run: ctx.dry_run,
    };
    let warnings = admit(store, &req, obj, old)?;
    ctx.warnings.extend(warnings);
    Ok(())
}

/// Output object in the requested version (objects are stored once per group/resource; a
/// multi-version CRD is served with `conversion: None` semantics).
pub fn as_version(def: &ResourceDef, mut obj: Value) -> Value {
    obj["apiVersion"] = json!(def.api_version());
    obj
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
fn create_inner(
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
fn update_inner(
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
fn strategic_merge(doc: &mut Value, patch: &Value, path: &str) {
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

fn strip_directives(v: &mut Value) {
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

/// PATCH: applies a JSON, merge, strategic-merge or apply patch, then updates (a
/// `metadata.resourceVersion` in the patched result acts as a precondition).
///
/// Errors: as [`update`], plus 422 for a JSON patch that does not apply; apply creates a
/// missing object.
#[allow(clippy::too_many_arguments)]
pub fn patch(
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

fn owner_uids(o: &Value) -> Vec<String> {
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
fn dependents(store: &Store, uid: &str) -> Vec<(String, String, String, String)> {
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

fn after_remove(store: &mut Store, def: &ResourceDef, gone: &Value) {
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

/// DELETE: removes an object, or marks it with `deletionTimestamp` while finalizers remain.
/// `propagationPolicy` Orphan strips ownerReferences from dependents; Foreground adds the
/// `foregroundDeletion` finalizer and lets the collector delete dependents first;
/// Background (default) deletes now and lets the collector remove dependents.
///
/// Errors: 404, 409 (preconditions).
pub fn delete(
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

/// One pass of the garbage collector and namespace finaliser. Returns whether anything changed.
///
/// - A dependent whose owners (by uid) are all gone, or all being deleted in the
///   foreground, is deleted (background).
/// - An object with the `foregroundDeletion` finalizer and no dependents left loses it.
/// - A terminating namespace has its contents deleted, and disappears once empty.
pub fn gc_pass(store: &mut Store) -> bool {
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
