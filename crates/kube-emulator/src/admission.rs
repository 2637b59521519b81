//! ValidatingAdmissionPolicy evaluation (its CEL expressions run in [`crate::cel`]).
//!
//! Semantics from <https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/>:
//! a binding selects a policy and its params (`paramRef`); the policy's
//! `matchConstraints`, `matchConditions`, `variables` and `validations` are evaluated with
//! `object`, `oldObject`, `request`, `params`, `namespaceObject` and `variables`. A failed
//! validation with `validationActions: [Deny]` rejects the request with the policy's
//! `reason` (default `Invalid`, 422) and message
//! `ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <message>`.

use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::cel::eval;
use crate::resources::split_api_version;
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::Store;

const GROUP: &str = "admissionregistration.k8s.io";

/// What is being admitted.
#[derive(Debug, Clone)]
pub(crate) struct AdmissionRequest<'a> {
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub(crate) operation: &'a str,
    /// API group.
    pub(crate) group: &'a str,
    /// Version.
    pub(crate) version: &'a str,
    /// Kind.
    pub(crate) kind: &'a str,
    /// Resource plural.
    pub(crate) resource: &'a str,
    /// Subresource (`status`) or empty.
    pub(crate) subresource: &'a str,
    /// Namespace or empty.
    pub(crate) namespace: &'a str,
    /// Object name.
    pub(crate) name: &'a str,
    /// The caller.
    pub(crate) user: &'a UserInfo,
    /// Dry run.
    pub(crate) dry_run: bool,
}

fn list_contains(list: Option<&Value>, want: &str) -> bool {
    list.and_then(Value::as_array).is_some_and(|a| {
        a.iter()
            .any(|v| v.as_str() == Some("*") || v.as_str() == Some(want))
    })
}

/// Whether `matchConstraints`/`matchResources` select the request.
fn matches_resources(store: &Store, m: &Value, req: &AdmissionRequest, object: &Value) -> bool {
    let resource = if req.subresource.is_empty() {
        req.resource.to_string()
    } else {
        format!("{}/{}", req.resource, req.subresource)
    };
    let rule_hits = |rules: Option<&Value>| {
        rules.and_then(Value::as_array).is_some_and(|rules| {
            rules.iter().any(|r| {
                list_contains(r.get("apiGroups"), req.group)
                    && list_contains(r.get("apiVersions"), req.version)
                    && list_contains(r.get("operations"), req.operation)
                    && r.get("resources")
                        .and_then(Value::as_array)
                        .is_some_and(|rs| {
                            rs.iter().filter_map(Value::as_str).any(|x| {
                                x == "*"
                                    || x == resource
                                    || (x == "*/*")
                                    || (req.subresource.is_empty() && x == req.resource)
                            })
                        })
                    && r.get("resourceNames")
                        .and_then(Value::as_array)
                        .is_none_or(|n| {
                            n.is_empty() || n.iter().any(|x| x.as_str() == Some(req.name))
                        })
            })
        })
    };
    if m.get("resourceRules").is_some() && !rule_hits(m.get("resourceRules")) {
        return false;
    }
    if rule_hits(m.get("excludeResourceRules")) {
        return false;
    }
    if let Some(sel) = m.get("objectSelector")
        && !LabelSelector::from_object(sel).matches(object)
    {
        return false;
    }
    if let Some(sel) = m.get("namespaceSelector")
        && !req.namespace.is_empty()
    {
        let ns = store
            .get("", "namespaces", "", req.namespace)
            .cloned()
            .unwrap_or(Value::Null);
        if !LabelSelector::from_object(sel).matches(&ns) {
            return false;
        }
    }
    true
}

fn params_for(
    store: &Store,
    policy: &Value,
    binding: &Value,
    req: &AdmissionRequest,
) -> Result<Vec<Value>, String> {
    let Some(param_kind) = policy.pointer("/spec/paramKind") else {
        return Ok(vec![Value::Null]);
    };
    let Some(param_ref) = binding.pointer("/spec/paramRef") else {
        return Err("no paramRef in binding".into());
    };
    let api_version = param_kind["apiVersion"].as_str().unwrap_or_default();
    let kind = param_kind["kind"].as_str().unwrap_or_default();
    let def = store
        .registry
        .by_kind(api_version, kind)
        .ok_or_else(|| format!("paramKind {api_version}/{kind} is not served"))?;
    let (group, _) = split_api_version(api_version);
    let ns = param_ref
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or(if def.namespaced { req.namespace } else { "" });
    let found: Vec<Value> = if let Some(name) = param_ref.get("name").and_then(Value::as_str) {
        store
            .get(group, &def.plural, ns, name)
            .cloned()
            .into_iter()
            .collect()
    } else {
        let sel = LabelSelector::from_object(param_ref.get("selector").unwrap_or(&Value::Null));
        store
            .list_all(group, &def.plural)
            .filter(|o| !def.namespaced || o["metadata"]["namespace"].as_str() == Some(ns))
            .filter(|o| sel.matches(o))
            .cloned()
            .collect()
    };
    if found.is_empty() {
        return match param_ref
            .get("parameterNotFoundAction")
            .and_then(Value::as_str)
        {
            Some("Allow") => Ok(Vec::new()),
            _ => Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction"
                    .to_string(),
            ),
        };
    }
    Ok(found)
}

fn reason_code(reason: &str) -> (u16, &'static str) {
    match reason {
        "Unauthorized" => (401, "Unauthorized"),
        "Forbidden" => (403, "Forbidden"),
        "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
        _ => (422, "Invalid"),
    }
}

/// Runs every binding that selects this request.
///
/// Errors: the first denial, as the real server words it. Returns the warnings of
/// `Warn` actions on success.
pub(crate) fn admit(
    store: &Store,
    req: &AdmissionRequest,
    object: &Value,
    old_object: &Value,
) -> Result<Vec<String>, ApiError> {
    let bindings: Vec<Value> = store
        .list_all(GROUP, "validatingadmissionpolicybindings")
        .cloned()
        .collect();
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let subject = if req.operation == "DELETE" {
        old_object
    } else {
        object
    };
    let mut warnings = Vec::new();
    let request = json!({
        "operation": req.operation,
        "name": req.name,
        "namespace": req.namespace,
        "kind": {"group": req.group, "version": req.version, "kind": req.kind},
        "resource": {"group": req.group, "version": req.version, "resource": req.resource},
        "subResource": req.subresource,
        "userInfo": {
            "username": req.user.username,
            "uid": req.user.uid,
            "groups": req.user.groups,
            "extra": req.user.extra,
        },
        "dryRun": req.dry_run,
    });
    let namespace_object = if req.namespace.is_empty() {
        Value::Null
    } else {
        store
            .get("", "namespaces", "", req.namespace)
            .cloned()
            .unwrap_or(Value::Null)
    };
    for binding in &bindings {
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
        let policy_name = binding
            .pointer("/spec/policyName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(policy) = store.get(GROUP, "validatingadmissionpolicies", "", policy_name) else {
            continue;
        };
        let empty = json!({});
        if !matches_resources(
            store,
            policy.pointer("/spec/matchConstraints").unwrap_or(&empty),
            req,
            subject,
        ) {
            continue;
        }
        if let Some(mr) = binding.pointer("/spec/matchResources")
            && !matches_resources(store, mr, req, subject)
        {
            continue;
        }
        let fail_closed = policy
            .pointer("/spec/failurePolicy")
            .and_then(Value::as_str)
            != Some("Ignore");
        let actions: Vec<&str> = binding
            .pointer("/spec/validationActions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_else(|| vec!["Deny"]);
        let deny = |message: String, reason: &str| -> ApiError {
            let (code, reason) = reason_code(reason);
            let full = format!(
                "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"
            );
            let msg = if reason == "Invalid" {
                format!(
                    "{} \"{}\" is invalid: : {full}",
                    crate::status::qualified(req.group, req.resource),
                    req.name
                )
            } else {
                format!(
                    "{} \"{}\" is forbidden: {full}",
                    crate::status::qualified(req.group, req.resource),
                    req.name
                )
            };
            ApiError::custom(code, reason, msg)
        };
        let params = match params_for(store, policy, binding, req) {
            Ok(p) => p,
            Err(e) if fail_closed => return Err(deny(e, "Invalid")),
            Err(_) => continue,
        };
        for param in &params {
            let mut vars_obj = serde_json::Map::new();
            let base: Vec<(&str, &Value)> = vec![
                (
                    "object",
                    if req.operation == "DELETE" {
                        &Value::Null
                    } else {
                        object
                    },
                ),
                ("oldObject", old_object),
                ("request", &request),
                ("params", param),
                ("namespaceObject", &namespace_object),
            ];
            let run = |expr: &str, vars_obj: &serde_json::Map<String, Value>| {
                let variables = Value::Object(vars_obj.clone());
                let mut all = base.clone();
                all.push(("variables", &variables));
                eval(expr, &all)
            };
            // matchConditions: all must be true, else the policy does not apply.
            let mut applies = true;
            for mc in policy
                .pointer("/spec/matchConditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match run(mc["expression"].as_str().unwrap_or("true"), &vars_obj) {
                    Ok(Value::Bool(true)) => {}
                    Ok(_) => {
                        applies = false;
                        break;
                    }
                    Err(e) if fail_closed => {
                        return Err(deny(format!("matchCondition error: {e}"), "Invalid"));
                    }
                    Err(_) => {
                        applies = false;
                        break;
                    }
                }
            }
            if !applies {
                continue;
            }
            for v in policy
                .pointer("/spec/variables")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = v["name"].as_str().unwrap_or_default().to_string();
                let value = run(v["expression"].as_str().unwrap_or("null"), &vars_obj)
                    .unwrap_or(Value::Null);
                vars_obj.insert(name, value);
            }
            for val in policy
                .pointer("/spec/validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let expr = val["expression"].as_str().unwrap_or("true");
                let failed_msg = match run(expr, &vars_obj) {
                    Ok(Value::Bool(true)) => continue,
                    Ok(_) => {
                        let from_expr = val
                            .get("messageExpression")
                            .and_then(Value::as_str)
                            .and_then(|me| run(me, &vars_obj).ok())
                            .and_then(|v| v.as_str().map(str::to_string))
                            .filter(|s| !s.trim().is_empty());
                        from_expr
                            .or_else(|| {
                                val.get("message")
                                    .and_then(Value::as_str)
                                    .map(str::to_string)
                            })
                            .unwrap_or_else(|| format!("failed expression: {expr}"))
                    }
                    Err(e) if fail_closed => format!("expression '{expr}' resulted in error: {e}"),
                    Err(_) => continue,
                };
                let reason = val
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("Invalid");
                if actions.contains(&"Deny") {
                    return Err(deny(failed_msg, reason));
                }
                if actions.contains(&"Warn") {
                    warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {failed_msg}"
                    ));
                }
            }
        }
    }
    Ok(warnings)
}
