//! Server-side printing: `meta.k8s.io/v1` `Table` responses for `kubectl get`.
//!
//! Shape from <https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables>;
//! CRD columns from `additionalPrinterColumns`, dates rendered as ages like kubectl's
//! `HumanDuration`.

use serde_json::{Value, json};

use crate::resources::{PrinterColumn, ResourceDef};

/// Formats a duration in seconds as kubectl does (`5s`, `3m20s`, `4h`, `2d3h`, …).
pub(crate) fn human_duration(secs: i64) -> String {
    if secs < 0 {
        return "<invalid>".into();
    }
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        let s = secs % 60;
        if s == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{s}s")
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        let mm = m % 60;
        if mm == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{mm}m")
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        let hh = h % 24;
        if hh == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{hh}h")
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        let y = d / 365;
        if y < 8 {
            format!("{y}y{}d", d % 365)
        } else {
            format!("{y}y")
        }
    }
}

fn age(ts: &str) -> String {
    match crate::clock::seconds_since(ts) {
        Some(secs) => human_duration(secs),
        None => "<unknown>".into(),
    }
}

/// Evaluates the simple JSONPath forms CRDs use: `.a.b`, `.a[0]`, `.a[*].b`,
/// `.a[?(@.type=="Ready")].status`. Returns every match.
pub(crate) fn json_path(obj: &Value, path: &str) -> Vec<Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut current = vec![obj.clone()];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            // A key ends at an unescaped `.` or `[`; `\.` is a dot inside the key
            // (`.metadata.labels.app\.kubernetes\.io/name`).
            let mut end = r.len();
            let mut escaped = false;
            for (i, c) in r.char_indices() {
                if !escaped && (c == '.' || c == '[') {
                    end = i;
                    break;
                }
                escaped = !escaped && c == '\\';
            }
            let key = r[..end].replace("\\.", ".");
            rest = &r[end..];
            if key.is_empty() {
                continue;
            }
            current = current
                .iter()
                .filter_map(|v| v.get(key.as_str()).cloned())
                .collect();
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return Vec::new();
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            let mut next = Vec::new();
            for v in &current {
                let Some(items) = v.as_array() else { continue };
                if inner == "*" {
                    next.extend(items.iter().cloned());
                } else if let Ok(i) = inner.parse::<usize>() {
                    if let Some(x) = items.get(i) {
                        next.push(x.clone());
                    }
                } else if let Some(filter) =
                    inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
                    && let Some((field, want)) = filter.split_once("==")
                {
                    let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                    next.extend(
                        items
                            .iter()
                            .filter(|x| {
                                json_path(x, &format!(".{}", field.trim()))
                                    .first()
                                    .is_some_and(|f| {
                                        f.as_str()
                                            .map(str::to_string)
                                            .unwrap_or_else(|| f.to_string())
                                            == want
                                    })
                            })
                            .cloned(),
                    );
                }
            }
            current = next;
        } else {
            return Vec::new();
        }
    }
    current
}

fn columns(def: &ResourceDef) -> Vec<PrinterColumn> {
    let col = |name: &str, type_: &str, path: &str| PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        json_path: path.into(),
        priority: 0,
        description: String::new(),
    };
    if def.custom {
        if def.printer_columns.is_empty() {
            return vec![col("Age", "date", ".metadata.creationTimestamp")];
        }
        return def.printer_columns.clone();
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => vec![
            col("Status", "string", ".status.phase"),
            col("Age", "date", ".metadata.creationTimestamp"),
        ],
        ("", "secrets") => vec![
            col("Type", "string", ".type"),
            col("Age", "date", ".metadata.creationTimestamp"),
        ],
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            vec![
                col("Role", "string", ".roleRef.name"),
                col("Age", "date", ".metadata.creationTimestamp"),
            ]
        }
        ("apiextensions.k8s.io", _) => {
            vec![col("Created At", "date", ".metadata.creationTimestamp")]
        }
        _ => vec![col("Age", "date", ".metadata.creationTimestamp")],
    }
}

fn cell(obj: &Value, c: &PrinterColumn) -> Value {
    let found = json_path(obj, &c.json_path);
    let Some(v) = found.first() else {
        return Value::Null;
    };
    match c.type_.as_str() {
        "date" => match v.as_str() {
            Some(ts) if c.name == "Created At" => json!(ts),
            Some(ts) => json!(age(ts)),
            None => Value::Null,
        },
        "integer" | "number" | "boolean" => v.clone(),
        _ => {
            let parts: Vec<String> = found
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| x.to_string())
                })
                .collect();
            json!(parts.join(","))
        }
    }
}

/// How much of each object a row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The full object.
    Object,
}

/// Builds a Table for the objects. `with_columns` is false for watch events after the first.
pub(crate) fn table(
    def: &ResourceDef,
    objects: &[Value],
    rv: &str,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let cols = columns(def);
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    for c in &cols {
        defs.push(json!({"name": c.name, "type": if c.type_ == "date" { "string" } else { c.type_.as_str() }, "format": if c.type_ == "date" { "date" } else { "" }, "description": c.description, "priority": c.priority}));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)];
            cells.extend(cols.iter().map(|c| cell(o, c)));
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Object => row["object"] = o.clone(),
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(json!({}))})
                }
            }
            row
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "rows": rows,
    });
    if with_columns {
        t["columnDefinitions"] = Value::Array(defs);
    } else {
        t["columnDefinitions"] = Value::Null;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        for (s, want) in [
            (5, "5s"),
            (119, "119s"),
            (200, "3m20s"),
            (3600, "60m"),
            (4 * 3600 + 60, "4h1m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (40 * 86400, "40d"),
        ] {
            assert_eq!(human_duration(s), want);
        }
    }

    #[test]
    fn json_paths() {
        let o = json!({"status": {"phase": "Bound", "conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "False"}]}, "spec": {"n": 3}});
        assert_eq!(json_path(&o, ".status.phase"), vec![json!("Bound")]);
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![json!("True")]
        );
        assert_eq!(
            json_path(&o, ".status.conditions[1].type"),
            vec![json!("X")]
        );
        assert_eq!(json_path(&o, ".spec.n"), vec![json!(3)]);
        assert!(json_path(&o, ".spec.missing").is_empty());
        let labelled = json!({"metadata": {"labels": {"banlieue.io/pool": "p1"}}});
        assert_eq!(
            json_path(&labelled, ".metadata.labels.banlieue\\.io/pool"),
            vec![json!("p1")]
        );
    }
}
