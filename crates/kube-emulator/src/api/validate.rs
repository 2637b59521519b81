//! What every write must pass: the body's `apiVersion`/`kind`, the object name's format,
//! a custom resource's schema (pruning, OpenAPI validation, CEL rules) and the
//! ValidatingAdmissionPolicies ([`crate::admission`]).

use serde_json::{Value, json};

use super::ctx::{Ctx, FieldValidation};
use super::object::meta;
use crate::admission::{AdmissionRequest, admit};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::Store;

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

/// The `metadata.name` rules of the type (RBAC path segments, a Namespace's DNS label,
/// else a DNS subdomain); the cause when `name` breaks them.
pub(crate) fn validate_name(def: &ResourceDef, name: &str) -> Option<Cause> {
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

/// Checks (or fills in) the body's `apiVersion` and `kind` against the URL's type and
/// makes sure it has a `metadata` object.
pub(crate) fn check_type(def: &ResourceDef, body: &mut Value) -> ApiResult<()> {
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
pub(crate) fn validate_custom(
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

/// Runs the ValidatingAdmissionPolicies for a write and keeps their warnings in `ctx`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn admission(
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
