//! Defaulting and validation of built-in kinds the emulator applies on every write:
//! Secrets (`stringData`, `type`, base64 `data`), Namespaces (`spec.finalizers`, the
//! `kubernetes.io/metadata.name` label) and CustomResourceDefinitions (name, status).

use serde_json::{Value, json};

use super::object::meta;
use crate::clock::now;
use crate::resources::{ResourceDef, from_crd};
use crate::status::{ApiError, ApiResult, Cause};

/// Built-in defaulting and validation that the emulator applies.
pub(crate) fn builtin_fixups(def: &ResourceDef, obj: &mut Value, create: bool) -> ApiResult<()> {
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
