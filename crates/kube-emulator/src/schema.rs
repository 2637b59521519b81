//! CRD structural schemas: OpenAPI v3 validation (with the `jsonschema` crate) and pruning
//! of unknown fields.
//!
//! Rules from <https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation>
//! and `#field-pruning`: unknown fields are dropped unless
//! `x-kubernetes-preserve-unknown-fields: true`; `nullable`, `x-kubernetes-int-or-string`
//! are Kubernetes extensions that JSON Schema does not know, so they are rewritten before
//! compiling.

use jsonschema::error::ValidationErrorKind;
use serde_json::{Value, json};

use crate::status::Cause;

/// A compiled CRD version schema.
pub(crate) struct CrdSchema {
    /// The `openAPIV3Schema` as written in the CRD.
    pub(crate) raw: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CrdSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrdSchema").field("raw", &self.raw).finish()
    }
}

/// Rewrites Kubernetes extensions into plain JSON Schema (draft 4, which OpenAPI v3 follows).
fn to_json_schema(s: &Value) -> Value {
    match s {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                match k.as_str() {
                    "properties" | "patternProperties" | "definitions" => {
                        let mut props = serde_json::Map::new();
                        if let Value::Object(p) = v {
                            for (pk, pv) in p {
                                props.insert(pk.clone(), to_json_schema(pv));
                            }
                        }
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "items" | "additionalProperties" | "not" => {
                        out.insert(
                            k.clone(),
                            if v.is_object() {
                                to_json_schema(v)
                            } else {
                                v.clone()
                            },
                        );
                    }
                    "allOf" | "anyOf" | "oneOf" => {
                        out.insert(
                            k.clone(),
                            Value::Array(
                                v.as_array()
                                    .map(|a| a.iter().map(to_json_schema).collect())
                                    .unwrap_or_default(),
                            ),
                        );
                    }
                    "format" | "x-kubernetes-validations" => {}
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                out.remove("type");
                out.insert("type".into(), json!(["integer", "string"]));
            }
            if map.get("nullable") == Some(&Value::Bool(true)) {
                match out.get("type").cloned() {
                    Some(Value::String(t)) => {
                        out.insert("type".into(), json!([t, "null"]));
                    }
                    Some(Value::Array(mut ts)) => {
                        ts.push(json!("null"));
                        out.insert("type".into(), Value::Array(ts));
                    }
                    _ => {}
                }
                if let Some(Value::Array(e)) = out.get_mut("enum") {
                    e.push(Value::Null);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The reason and message kube-apiserver gives for a violated bound (`minimum`,
/// `maxLength`, `pattern`, …) of the value at `field` (`k8s.io/kube-openapi` validate
/// errors and `k8s.io/apimachinery` field errors).
fn bound_message(
    kind: &ValidationErrorKind,
    value: &Value,
    field: &str,
) -> Option<(&'static str, String)> {
    let invalid = |what: String| {
        Some((
            "FieldValueInvalid",
            format!("Invalid value: {value}: {field} in body {what}"),
        ))
    };
    let count = |v: &Value| match v {
        Value::Array(a) => a.len(),
        Value::Object(m) => m.len(),
        _ => 0,
    };
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match kind {
        ValidationErrorKind::Minimum { limit } => {
            invalid(format!("should be greater than or equal to {limit}"))
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            invalid(format!("should be greater than {limit}"))
        }
        ValidationErrorKind::Maximum { limit } => {
            invalid(format!("should be less than or equal to {limit}"))
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            invalid(format!("should be less than {limit}"))
        }
        ValidationErrorKind::MultipleOf { multiple_of } => {
            let m = if multiple_of.fract() == 0.0 {
                format!("{}", *multiple_of as i64)
            } else {
                multiple_of.to_string()
            };
            invalid(format!("should be a multiple of {m}"))
        }
        ValidationErrorKind::MinLength { limit } => {
            invalid(format!("should be at least {limit} chars long"))
        }
        ValidationErrorKind::MaxLength { limit } => Some((
            "FieldValueTooLong",
            format!(
                "Too long: may not be more than {}",
                plural(*limit, "byte", "bytes")
            ),
        )),
        ValidationErrorKind::Pattern { pattern } => invalid(format!("should match '{pattern}'")),
        ValidationErrorKind::MinItems { limit } => Some((
            "FieldValueInvalid",
            format!(
                "Invalid value: {}: {field} in body should have at least {limit} items",
                count(value)
            ),
        )),
        ValidationErrorKind::MinProperties { limit } => Some((
            "FieldValueInvalid",
            format!(
                "Invalid value: {}: {field} in body should have at least {limit} properties",
                count(value)
            ),
        )),
        ValidationErrorKind::MaxItems { limit } | ValidationErrorKind::MaxProperties { limit } => {
            Some((
                "FieldValueTooMany",
                format!(
                    "Too many: {}: must have at most {}",
                    count(value),
                    plural(*limit, "item", "items")
                ),
            ))
        }
        _ => None,
    }
}

/// Whether a schema error keeps kube-apiserver from evaluating the CEL rules (its
/// `hasBlockingErr`: a wrong type, a missing required field, an unsupported enum value, a
/// string or list over its maximum).
pub(crate) fn blocks_rules(cause: &Cause) -> bool {
    matches!(
        cause.reason.as_str(),
        "FieldValueTypeInvalid"
            | "FieldValueRequired"
            | "FieldValueNotSupported"
            | "FieldValueTooLong"
            | "FieldValueTooMany"
    )
}

/// The cause kube-apiserver adds when [`blocks_rules`] kept it from evaluating the rules.
pub(crate) fn rules_not_checked() -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        field: "<nil>".into(),
    }
}

/// `/spec/items/0/name` → `spec.items[0].name`.
pub(crate) fn pointer_to_field(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl CrdSchema {
    /// Compiles an `openAPIV3Schema`.
    ///
    /// Errors: the JSON Schema compiler's message when the schema is not valid.
    pub(crate) fn compile(raw: &Value) -> Result<Self, String> {
        let schema = to_json_schema(raw);
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .should_validate_formats(false)
            .build(&schema)
            .map_err(|e| e.to_string())?;
        Ok(Self {
            raw: raw.clone(),
            validator,
        })
    }

    /// Validates an object (metadata is not checked against the schema, as in Kubernetes
    /// where ObjectMeta is validated separately). Returns the field causes, empty when valid.
    pub(crate) fn validate(&self, object: &Value) -> Vec<Cause> {
        let mut instance = object.clone();
        if let Some(map) = instance.as_object_mut() {
            map.remove("metadata");
        }
        let mut causes = Vec::new();
        for err in self.validator.iter_errors(&instance) {
            let path = err.instance_path.as_str().to_string();
            let value = &*err.instance;
            let (field, cause) = match &err.kind {
                ValidationErrorKind::Required { property } => {
                    let prop = property.as_str().unwrap_or_default();
                    let parent = pointer_to_field(&path);
                    let field = if parent.is_empty() {
                        prop.to_string()
                    } else {
                        format!("{parent}.{prop}")
                    };
                    (
                        field,
                        Cause {
                            reason: "FieldValueRequired".into(),
                            message: "Required value".into(),
                            field: String::new(),
                        },
                    )
                }
                ValidationErrorKind::Type { kind } => {
                    let field = pointer_to_field(&path);
                    let expected = match kind {
                        jsonschema::error::TypeKind::Single(t) => t.to_string(),
                        jsonschema::error::TypeKind::Multiple(ts) => format!("{ts:?}"),
                    };
                    let got = type_name(value);
                    (
                        field.clone(),
                        Cause {
                            reason: "FieldValueTypeInvalid".into(),
                            message: format!(
                                "Invalid value: \"{got}\": {field} in body must be of type {expected}: \"{got}\""
                            ),
                            field: String::new(),
                        },
                    )
                }
                ValidationErrorKind::Enum { options } => {
                    let field = pointer_to_field(&path);
                    let supported: Vec<String> = options
                        .as_array()
                        .map(|a| a.iter().map(|o| o.to_string()).collect())
                        .unwrap_or_default();
                    (
                        field,
                        Cause {
                            reason: "FieldValueNotSupported".into(),
                            message: format!(
                                "Unsupported value: {value}: supported values: {}",
                                supported.join(", ")
                            ),
                            field: String::new(),
                        },
                    )
                }
                kind => {
                    let field = pointer_to_field(&path);
                    let (reason, message) =
                        bound_message(kind, value, &field).unwrap_or_else(|| {
                            (
                                "FieldValueInvalid",
                                format!("Invalid value: {value}: {field} in body: {err}"),
                            )
                        });
                    (
                        field,
                        Cause {
                            reason: reason.into(),
                            message,
                            field: String::new(),
                        },
                    )
                }
            };
            causes.push(Cause { field, ..cause });
        }
        if let Some(map) = instance.as_object() {
            for (k, v) in map {
                if let Some(sub) = self.raw.get("properties").and_then(|p| p.get(k)) {
                    list_duplicates(sub, v, k, &mut causes);
                }
            }
        }
        causes
    }

    /// Evaluates `x-kubernetes-validations` CEL rules (`self`, and `oldSelf` for
    /// transition rules, which are skipped when there is no old value), as in
    /// <https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules>.
    /// Not called when a schema error [`blocks_rules`].
    pub(crate) fn validate_rules(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        rules_at(&self.raw, object, old, "", &mut causes);
        causes
    }

    /// Whether the schema has `x-kubernetes-validations` rules anywhere.
    pub(crate) fn has_rules(&self) -> bool {
        fn any(v: &Value) -> bool {
            match v {
                Value::Object(m) => {
                    m.contains_key("x-kubernetes-validations") || m.values().any(any)
                }
                Value::Array(a) => a.iter().any(any),
                _ => false,
            }
        }
        any(&self.raw)
    }

    /// Drops fields the schema does not declare (Kubernetes pruning). Returns the dotted
    /// paths that were dropped (for `fieldValidation=Strict|Warn`).
    pub(crate) fn prune(&self, object: &mut Value) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Value::Object(map) = object {
            let props = self.raw.get("properties");
            let preserve = preserves(&self.raw);
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match props.and_then(|p| p.get(&k)) {
                    Some(sub) => prune_value(sub, map.get_mut(&k).expect("key"), &k, &mut dropped),
                    None if preserve => {}
                    None => {
                        map.remove(&k);
                        dropped.push(k);
                    }
                }
            }
        }
        dropped
    }
}

/// `x-kubernetes-list-type` invariants, as kube-apiserver checks them: a `set` holds
/// each value once, a `map` each key once; each repeated value or key is reported once,
/// at its first repetition (`spec.tags[2]: Duplicate value: "a"`).
fn list_duplicates(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map {
                if let Some(sub) = props.and_then(|p| p.get(k)).or(additional) {
                    list_duplicates(sub, v, &format!("{path}.{k}"), causes);
                }
            }
        }
        Value::Array(items) => {
            let keys: Option<Vec<&str>> =
                match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("set") => Some(Vec::new()),
                    Some("map") => schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect()),
                    _ => None,
                };
            if let Some(keys) = keys {
                // The identity of an element: itself in a set, its key fields in a map.
                let identity = |item: &Value| -> Value {
                    if keys.is_empty() {
                        return item.clone();
                    }
                    let key: std::collections::BTreeMap<&str, &Value> = keys
                        .iter()
                        .filter_map(|k| item.get(*k).map(|v| (*k, v)))
                        .collect();
                    json!(key)
                };
                let mut seen: Vec<Value> = Vec::new();
                let mut reported: Vec<Value> = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let id = identity(item);
                    if !seen.contains(&id) {
                        seen.push(id);
                    } else if !reported.contains(&id) {
                        causes.push(Cause {
                            reason: "FieldValueDuplicate".into(),
                            message: format!("Duplicate value: {id}"),
                            field: format!("{path}[{i}]"),
                        });
                        reported.push(id);
                    }
                }
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    list_duplicates(item_schema, v, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

fn rules_at(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for r in rules {
            let rule = r.get("rule").and_then(Value::as_str).unwrap_or("true");
            let uses_old = rule.contains("oldSelf");
            if uses_old && old.is_none() {
                continue;
            }
            let null = Value::Null;
            let mut vars: Vec<(&str, &Value)> = vec![("self", value)];
            if let Some(o) = old {
                vars.push(("oldSelf", o));
            } else {
                vars.push(("oldSelf", &null));
            }
            let failed = match crate::cel::eval(rule, &vars) {
                Ok(Value::Bool(true)) => None,
                Ok(_) => Some(
                    r.get("messageExpression")
                        .and_then(Value::as_str)
                        .and_then(|m| crate::cel::eval(m, &vars).ok())
                        .and_then(|v| v.as_str().map(str::to_string))
                        .or_else(|| r.get("message").and_then(Value::as_str).map(str::to_string))
                        .unwrap_or_else(|| format!("failed rule: {rule}")),
                ),
                Err(e) => Some(format!("rule evaluation error: {e}")),
            };
            if let Some(message) = failed {
                let field = match r.get("fieldPath").and_then(Value::as_str) {
                    Some(fp) => format!("{path}{fp}"),
                    None => path.to_string(),
                };
                // kube-apiserver's field errors, the rule's value omitted.
                let (reason, message) = match r.get("reason").and_then(Value::as_str) {
                    Some("FieldValueRequired") => {
                        ("FieldValueRequired", format!("Required value: {message}"))
                    }
                    Some("FieldValueForbidden") => {
                        ("FieldValueForbidden", format!("Forbidden: {message}"))
                    }
                    Some("FieldValueDuplicate") => {
                        ("FieldValueDuplicate", "Duplicate value".into())
                    }
                    _ => ("FieldValueInvalid", format!("Invalid value: {message}")),
                };
                causes.push(Cause {
                    reason: reason.into(),
                    message,
                    field: field.trim_start_matches('.').to_string(),
                });
            }
        }
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map {
                if path.is_empty() && k == "metadata" {
                    continue;
                }
                let sub = props.and_then(|p| p.get(k)).or(additional);
                if let Some(sub) = sub {
                    let old_v = old.and_then(|o| o.get(k));
                    rules_at(sub, v, old_v, &format!("{path}.{k}"), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    // Transition rules on list items are not correlated (no oldSelf).
                    rules_at(item_schema, v, None, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn prune_value(schema: &Value, value: &mut Value, path: &str, dropped: &mut Vec<String>) {
    if schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) && preserves(schema)
    {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    let sub_path = format!("{path}.{k}");
                    match props.get(&k) {
                        Some(sub) => {
                            prune_value(sub, map.get_mut(&k).expect("key"), &sub_path, dropped)
                        }
                        None if preserves(schema) => {}
                        None => {
                            map.remove(&k);
                            dropped.push(sub_path);
                        }
                    }
                }
            } else if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, v) in map.iter_mut() {
                    prune_value(add, v, &format!("{path}.{k}"), dropped);
                }
            } else if !preserves(schema)
                && schema.get("type").and_then(Value::as_str) == Some("object")
            {
                // An object schema without properties keeps nothing unless told to preserve.
                if schema.get("additionalProperties") != Some(&Value::Bool(true)) {
                    for k in map.keys() {
                        dropped.push(format!("{path}.{k}"));
                    }
                    map.clear();
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    prune_value(item_schema, v, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> CrdSchema {
        CrdSchema::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["poolRef"],
                    "properties": {
                        "poolRef": {"type": "string"},
                        "ttlSeconds": {"type": "integer", "nullable": true},
                        "port": {"x-kubernetes-int-or-string": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                },
                "status": {"type": "object", "properties": {"phase": {"type": "string", "enum": ["Pending", "Bound"]}}}
            }
        }))
        .expect("compiles")
    }

    #[test]
    fn type_errors_name_the_field() {
        let causes = schema().validate(&json!({"spec": {"poolRef": "p", "ttlSeconds": "x"}}));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.ttlSeconds");
        assert_eq!(causes[0].reason, "FieldValueTypeInvalid");
    }

    #[test]
    fn required_enum_nullable_and_int_or_string() {
        let s = schema();
        let causes = s.validate(
            &json!({"spec": {"ttlSeconds": null, "port": "http"}, "status": {"phase": "Nope"}}),
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert!(fields.contains(&"spec.poolRef"), "{causes:?}");
        assert!(fields.contains(&"status.phase"), "{causes:?}");
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert!(
            s.validate(&json!({"spec": {"poolRef": "a", "port": 80}}))
                .is_empty()
        );
    }

    #[test]
    fn cel_validation_rules_with_transition() {
        let s = CrdSchema::compile(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min must not exceed max"}],
                "properties": {
                    "min": {"type": "integer"},
                    "max": {"type": "integer"},
                    "poolRef": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "poolRef is immutable"}]}
                }
            }}
        }))
        .unwrap();
        assert!(
            s.validate_rules(&json!({"spec": {"min": 1, "max": 2, "poolRef": "a"}}), None)
                .is_empty()
        );
        let c = s.validate_rules(&json!({"spec": {"min": 3, "max": 2}}), None);
        assert_eq!((c.len(), c[0].field.as_str()), (1, "spec"), "{c:?}");
        assert!(c[0].message.contains("min must not exceed max"));
        let old = json!({"spec": {"min": 1, "max": 2, "poolRef": "a"}});
        let c = s.validate_rules(
            &json!({"spec": {"min": 1, "max": 2, "poolRef": "b"}}),
            Some(&old),
        );
        assert_eq!((c.len(), c[0].field.as_str()), (1, "spec.poolRef"), "{c:?}");
    }

    /// The texts kube-apiserver v1.35 gives for violated bounds (taken from it).
    #[test]
    fn bounds_are_reported_as_kube_apiserver_reports_them() {
        let s = CrdSchema::compile(&json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {
                "min": {"type": "integer", "minimum": 5},
                "xmax": {"type": "number", "maximum": 5, "exclusiveMaximum": true},
                "mult": {"type": "integer", "multipleOf": 3},
                "minlen": {"type": "string", "minLength": 3},
                "maxlen": {"type": "string", "maxLength": 3},
                "pat": {"type": "string", "pattern": "^[a-z]+$"},
                "minitems": {"type": "array", "minItems": 2, "items": {"type": "string"}},
                "maxitems": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                "maxprops": {"type": "object", "maxProperties": 1,
                    "additionalProperties": {"type": "string"}}}}}}))
        .unwrap();
        let causes = s.validate(
            &json!({"spec": {"min": 1, "xmax": 5, "mult": 4, "minlen": "a",
            "maxlen": "abcd", "pat": "A1", "minitems": ["a"], "maxitems": ["a", "b"],
            "maxprops": {"a": "b", "c": "d"}}}),
        );
        let mut got: Vec<String> = causes
            .iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                "FieldValueInvalid spec.min: Invalid value: 1: spec.min in body should be greater than or equal to 5",
                "FieldValueInvalid spec.minitems: Invalid value: 1: spec.minitems in body should have at least 2 items",
                r#"FieldValueInvalid spec.minlen: Invalid value: "a": spec.minlen in body should be at least 3 chars long"#,
                "FieldValueInvalid spec.mult: Invalid value: 4: spec.mult in body should be a multiple of 3",
                r#"FieldValueInvalid spec.pat: Invalid value: "A1": spec.pat in body should match '^[a-z]+$'"#,
                "FieldValueInvalid spec.xmax: Invalid value: 5: spec.xmax in body should be less than 5",
                "FieldValueTooLong spec.maxlen: Too long: may not be more than 3 bytes",
                "FieldValueTooMany spec.maxitems: Too many: 2: must have at most 1 item",
                "FieldValueTooMany spec.maxprops: Too many: 2: must have at most 1 item",
            ]
        );
        assert_eq!(
            causes.iter().filter(|c| blocks_rules(c)).count(),
            3,
            "only too long and too many block the CEL rules here"
        );
    }

    /// The texts kube-apiserver v1.35 gives for repeated set values and map keys.
    #[test]
    fn repeated_set_values_and_map_keys_are_duplicates() {
        let s = CrdSchema::compile(&json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "nums": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["proto", "name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"},
                        "proto": {"type": "string"}, "port": {"type": "integer"}}}}}}}}))
        .unwrap();
        let causes = s.validate(
            &json!({"spec": {"tags": ["a", "b", "a", "a"], "nums": [1, 1],
            "ports": [{"name": "http", "proto": "TCP", "port": 1}, {"name": "http", "proto": "TCP"},
                {"name": "dns", "proto": "UDP"}]}}),
        );
        let got: Vec<String> = causes
            .iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect();
        assert_eq!(
            got,
            vec![
                "FieldValueDuplicate spec.nums[1]: Duplicate value: 1",
                r#"FieldValueDuplicate spec.ports[1]: Duplicate value: {"name":"http","proto":"TCP"}"#,
                r#"FieldValueDuplicate spec.tags[2]: Duplicate value: "a""#,
            ]
        );
    }

    #[test]
    fn prune_drops_unknown_fields_only() {
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"poolRef": "p", "bogus": 1, "labels": {"a": "b"}, "free": {"any": {"thing": 1}}},
            "extra": true
        });
        let mut dropped = schema().prune(&mut obj);
        dropped.sort();
        assert_eq!(dropped, vec!["extra".to_string(), "spec.bogus".to_string()]);
        assert_eq!(obj["spec"]["free"]["any"]["thing"], 1);
        assert_eq!(obj["spec"]["labels"]["a"], "b");
        assert_eq!(obj["metadata"]["name"], "a");
    }
}
