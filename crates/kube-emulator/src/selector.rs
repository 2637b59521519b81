//! Label and field selectors.
//!
//! Syntax from <https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors>
//! (equality-based `=`, `==`, `!=`; set-based `in`, `notin`, `key`, `!key`) and
//! <https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/>.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Requirement {
    /// `key=value`, `key==value`, `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=value`, `key notin (a,b)` (also matches when the key is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(pub(crate) Vec<Requirement>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn parse_set(s: &str) -> Result<Vec<String>, String> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, found {s:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    ///
    /// Errors: a message like the real server's `unable to parse requirement`.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            if let Some(key) = part.strip_prefix('!') {
                reqs.push(Requirement::DoesNotExist(key.trim().to_string()));
            } else if let Some((k, v)) = part.split_once("!=") {
                reqs.push(Requirement::NotIn(k.trim().into(), vec![v.trim().into()]));
            } else if let Some((k, v)) = part.split_once("==") {
                reqs.push(Requirement::In(k.trim().into(), vec![v.trim().into()]));
            } else if let Some((k, v)) = part.split_once('=') {
                reqs.push(Requirement::In(k.trim().into(), vec![v.trim().into()]));
            } else if let Some(idx) = part.find(" notin ") {
                let (k, rest) = part.split_at(idx);
                reqs.push(Requirement::NotIn(k.trim().into(), parse_set(&rest[7..])?));
            } else if let Some(idx) = part.find(" in ") {
                let (k, rest) = part.split_at(idx);
                reqs.push(Requirement::In(k.trim().into(), parse_set(&rest[4..])?));
            } else if part.contains(char::is_whitespace) || part.contains('(') {
                return Err(format!("unable to parse requirement: {part:?}"));
            } else {
                reqs.push(Requirement::Exists(part));
            }
        }
        Ok(Self(reqs))
    }

    /// Builds a selector from a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`).
    pub(crate) fn from_object(sel: &Value) -> Self {
        let mut reqs = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(Requirement::In(
                    k.clone(),
                    vec![v.as_str().unwrap_or_default().to_string()],
                ));
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e["key"].as_str().unwrap_or_default().to_string();
                let values: Vec<String> = e["values"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                reqs.push(match e["operator"].as_str().unwrap_or_default() {
                    "In" => Requirement::In(key, values),
                    "NotIn" => Requirement::NotIn(key, values),
                    "Exists" => Requirement::Exists(key),
                    _ => Requirement::DoesNotExist(key),
                });
            }
        }
        Self(reqs)
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let labels = object.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector (`metadata.name=x,metadata.namespace!=y`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(pub(crate) Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter; each term is `path=value`, `path==value`
    /// or `path!=value`, with a dotted path into the object.
    ///
    /// Errors: `invalid selector` for a term without an operator.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some((k, v)) = part.split_once("!=") {
                terms.push((k.trim().to_string(), false, v.trim().to_string()));
            } else if let Some((k, v)) = part.split_once("==") {
                terms.push((k.trim().to_string(), true, v.trim().to_string()));
            } else if let Some((k, v)) = part.split_once('=') {
                terms.push((k.trim().to_string(), true, v.trim().to_string()));
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            }
        }
        Ok(Self(terms))
    }

    /// Whether the object satisfies every term (a missing field compares as `""`).
    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let got = path.split('.').try_fold(object, |v, k| v.get(k));
            let equal = match got {
                Some(Value::String(s)) => s == want,
                Some(Value::Null) | None => want.is_empty(),
                Some(other) => want.as_str() == other.to_string().as_str(),
            };
            equal == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_table() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web,db)", true),
            ("app notin (web,db)", false),
            ("app notin (db)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing!=x", true),
            ("app=web,tier in (back)", false),
            ("app in (web, db),!missing", true),
            ("", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).expect(sel);
            assert_eq!(s.matches(&obj), want, "{sel}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selectors() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}});
        assert!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .matches(&obj)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .unwrap()
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("metadata.namespace==ns,metadata.name=a")
                .unwrap()
                .matches(&obj)
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
    }

    #[test]
    fn selector_objects() {
        let obj = json!({"metadata": {"labels": {"a": "1"}}});
        let s = LabelSelector::from_object(
            &json!({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]}),
        );
        assert!(s.matches(&obj));
    }
}
