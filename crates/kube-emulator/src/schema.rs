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
pub struct CrdSchema {
    /// The `openAPIV3Schema` as written in the CRD.
    pub raw: Value,
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

/// `/spec/items/0/name` → `spec.items[0].name`.
pub fn pointer_to_field(pointer: &str) -> String {
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
    pub fn compile(raw: &Value) -> Result<Self, String> {
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
    pub fn validate(&self, object: &Value) -> Vec<Cause> {
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
                _ => {
                    let field = pointer_to_field(&path);
                    (
                        field.clone(),
                        Cause {
                            reason: "FieldValueInvalid".into(),
                            message: format!("Invalid value: {value}: {field} in body: {err}"),
                            field: String::new(),
                        },
                    )
                }
            };
            causes.push(Cause { field, ..cause });
        }
        causes
    }

    /// Evaluates `x-kubernetes-validations` CEL rules (`self`, and `oldSelf` for
    /// transition rules, which are skipped when there is no old value), as in
    /// <https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules>.
    /// Only called when the schema itself is satisfied.
    pub fn validate_rules(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        rules_at(&self.raw, object, old, "", &mut causes);
        causes
    }

    /// Drops fields the schema does not declare (Kubernetes pruning). Returns the dotted
    /// paths that were dropped (for `fieldValidation=Strict|Warn`).
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
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
            let failed = match crate::admission::eval(rule, &vars) {
                Ok(Value::Bool(true)) => None,
                Ok(_) => Some(
                    r.get("messageExpression")
                        .and_then(Value::as_str)
                        .and_then(|m| crate::admission::eval(m, &vars).ok())
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
                let reason = match r.get("reason").and_then(Value::as_str) {
                    Some("FieldValueRequired") => "FieldValueRequired",
                    Some("FieldValueForbidden") => "FieldValueForbidden",
                    Some("FieldValueDuplicate") => "FieldValueDuplicate",
                    _ => "FieldValueInvalid",
                };
                causes.push(Cause {
                    reason: reason.into(),
                    message: format!("Invalid value: \"{}\": {message}", type_name(value)),
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
