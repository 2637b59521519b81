//! RBAC authorization, as `rbac.authorization.k8s.io/v1` evaluates it.
//!
//! Rules from <https://kubernetes.io/docs/reference/access-authn-authz/rbac/>: a request is
//! allowed when any rule of a role bound to the user (ClusterRoleBindings everywhere,
//! RoleBindings in the request's namespace) matches. `system:masters` is a superuser.
//! Messages follow the real `Forbidden` wording.

use serde_json::Value;

use crate::auth::UserInfo;
use crate::store::Store;

const RBAC: &str = "rbac.authorization.k8s.io";

/// What is being attempted (`authorization.k8s.io/v1` `ResourceAttributes` /
/// `NonResourceAttributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `impersonate`, …
    pub(crate) verb: String,
    /// Namespace, empty for cluster scope.
    pub(crate) namespace: String,
    /// API group (empty for core).
    pub(crate) group: String,
    /// Resource plural.
    pub(crate) resource: String,
    /// Subresource (`status`).
    pub(crate) subresource: String,
    /// Object name, if any.
    pub(crate) name: String,
    /// For non-resource requests: the URL path.
    pub(crate) path: String,
    /// True for `/api`, `/apis` resource requests.
    pub(crate) resource_request: bool,
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Allowed or not.
    pub(crate) allowed: bool,
    /// `RBAC: allowed by …` when allowed, empty otherwise.
    pub(crate) reason: String,
}

fn contains(list: Option<&Value>, want: &str) -> bool {
    list.and_then(Value::as_array).is_some_and(|a| {
        a.iter()
            .any(|v| v.as_str() == Some("*") || v.as_str() == Some(want))
    })
}

/// Whether one PolicyRule allows the attributes (`RuleAllows` in the RBAC authorizer).
pub(crate) fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    if !contains(rule.get("verbs"), &a.verb) {
        return false;
    }
    if !a.resource_request {
        return rule
            .get("nonResourceURLs")
            .and_then(Value::as_array)
            .is_some_and(|urls| {
                urls.iter().filter_map(Value::as_str).any(|u| {
                    u == "*"
                        || u == a.path
                        || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*')))
                })
            });
    }
    if !contains(rule.get("apiGroups"), &a.group) {
        return false;
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resource_ok = rule
        .get("resources")
        .and_then(Value::as_array)
        .is_some_and(|rs| {
            rs.iter().filter_map(Value::as_str).any(|r| {
                r == "*"
                    || r == combined
                    || (!a.subresource.is_empty() && r == format!("*/{}", a.subresource))
            })
        });
    if !resource_ok {
        return false;
    }
    match rule.get("resourceNames").and_then(Value::as_array) {
        Some(names) if !names.is_empty() => {
            names.iter().any(|n| n.as_str() == Some(a.name.as_str()))
        }
        _ => true,
    }
}

fn subject_matches(subject: &Value, user: &UserInfo, binding_ns: &str) -> Option<String> {
    let name = subject.get("name").and_then(Value::as_str)?;
    match subject.get("kind").and_then(Value::as_str)? {
        "User" if user.username == name => Some(format!("User \"{name}\"")),
        "Group" if user.groups.iter().any(|g| g == name) => Some(format!("Group \"{name}\"")),
        "ServiceAccount" => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(binding_ns);
            (user.username == format!("system:serviceaccount:{ns}:{name}"))
                .then(|| format!("ServiceAccount \"{name}/{ns}\""))
        }
        _ => None,
    }
}

fn rules_of(store: &Store, kind: &str, name: &str, ns: &str) -> Vec<Value> {
    let role = match kind {
        "ClusterRole" => store.get(RBAC, "clusterroles", "", name),
        "Role" => store.get(RBAC, "roles", ns, name),
        _ => None,
    };
    role.and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

/// Decides a request (`system:masters` always allowed).
pub(crate) fn authorize(store: &Store, user: &UserInfo, a: &Attributes) -> Decision {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    for crb in store.list_all(RBAC, "clusterrolebindings") {
        let role_name = crb
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let subjects = crb
            .get("subjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let Some(who) = subjects.iter().find_map(|s| subject_matches(s, user, "")) else {
            continue;
        };
        if rules_of(store, "ClusterRole", role_name, "")
            .iter()
            .any(|r| rule_allows(r, a))
        {
            return Decision {
                allowed: true,
                reason: format!(
                    "RBAC: allowed by ClusterRoleBinding \"{}\" of ClusterRole \"{role_name}\" to {who}",
                    crb.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
            };
        }
    }
    if !a.namespace.is_empty() {
        for rb in store.list_ns(RBAC, "rolebindings", &a.namespace) {
            let kind = rb
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role_name = rb
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let subjects = rb
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let Some(who) = subjects
                .iter()
                .find_map(|s| subject_matches(s, user, &a.namespace))
            else {
                continue;
            };
            if rules_of(store, kind, role_name, &a.namespace)
                .iter()
                .any(|r| rule_allows(r, a))
            {
                return Decision {
                    allowed: true,
                    reason: format!(
                        "RBAC: allowed by RoleBinding \"{}/{}\" of {kind} \"{role_name}\" to {who}",
                        rb.pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                        a.namespace
                    ),
                };
            }
        }
    }
    Decision {
        allowed: false,
        reason: String::new(),
    }
}

/// Every rule that applies to the user in a namespace (cluster-wide bindings plus the
/// namespace's RoleBindings), for SelfSubjectRulesReview. `system:masters` gets `*`.
pub(crate) fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> Vec<Value> {
    if user.groups.iter().any(|g| g == "system:masters") {
        return vec![
            serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
            serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
        ];
    }
    let mut out = Vec::new();
    for crb in store.list_all(RBAC, "clusterrolebindings") {
        let subjects = crb
            .get("subjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if subjects
            .iter()
            .any(|s| subject_matches(s, user, "").is_some())
        {
            let role = crb
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            out.extend(rules_of(store, "ClusterRole", role, ""));
        }
    }
    if !namespace.is_empty() {
        for rb in store.list_ns(RBAC, "rolebindings", namespace) {
            let subjects = rb
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if subjects
                .iter()
                .any(|s| subject_matches(s, user, namespace).is_some())
            {
                let kind = rb
                    .pointer("/roleRef/kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let role = rb
                    .pointer("/roleRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                out.extend(rules_of(store, kind, role, namespace));
            }
        }
    }
    out
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The rules of `rules` that `user` does not hold in `namespace` (every
/// group × resource × verb × name combination must be allowed; a `*` is only covered by a
/// `*`), formatted as the real server lists them.
fn missing_rules(store: &Store, user: &UserInfo, namespace: &str, rules: &[Value]) -> Vec<String> {
    let mut missing = Vec::new();
    for rule in rules {
        let verbs = strings(rule.get("verbs"));
        let urls = strings(rule.get("nonResourceURLs"));
        let mut held = true;
        if !urls.is_empty() {
            for url in &urls {
                for verb in &verbs {
                    let a = Attributes {
                        verb: verb.clone(),
                        path: url.clone(),
                        ..Attributes::default()
                    };
                    held &= authorize(store, user, &a).allowed;
                }
            }
        } else {
            let groups = strings(rule.get("apiGroups"));
            let resources = strings(rule.get("resources"));
            let mut names = strings(rule.get("resourceNames"));
            if names.is_empty() {
                names.push(String::new());
            }
            for g in &groups {
                for r in &resources {
                    let (resource, sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
                    for v in &verbs {
                        for n in &names {
                            let a = Attributes {
                                verb: v.clone(),
                                namespace: namespace.to_string(),
                                group: g.clone(),
                                resource: resource.to_string(),
                                subresource: sub.to_string(),
                                name: n.clone(),
                                resource_request: true,
                                path: String::new(),
                            };
                            held &= authorize(store, user, &a).allowed;
                        }
                    }
                }
            }
        }
        if !held {
            let q = |v: Vec<String>| {
                v.iter()
                    .map(|x| format!("{x:?}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let mut parts = Vec::new();
            if rule.get("apiGroups").is_some() {
                parts.push(format!("APIGroups:[{}]", q(strings(rule.get("apiGroups")))));
            }
            if rule.get("resources").is_some() {
                parts.push(format!("Resources:[{}]", q(strings(rule.get("resources")))));
            }
            if rule.get("resourceNames").is_some() {
                parts.push(format!(
                    "ResourceNames:[{}]",
                    q(strings(rule.get("resourceNames")))
                ));
            }
            if !urls.is_empty() {
                parts.push(format!("NonResourceURLs:[{}]", q(urls)));
            }
            parts.push(format!("Verbs:[{}]", q(verbs)));
            missing.push(format!("{{{}}}", parts.join(", ")));
        }
    }
    missing
}

/// RBAC escalation prevention
/// (<https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping>):
/// a Role/ClusterRole may only hold rules its author holds (or the author has `escalate`);
/// a binding needs `bind` on the role or the role's rules.
///
/// Errors: the real `Forbidden` text (`… is attempting to grant RBAC permissions not currently held: …`).
pub(crate) fn check_escalation(
    store: &Store,
    user: &UserInfo,
    plural: &str,
    namespace: &str,
    obj: &Value,
) -> Result<(), String> {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let verb_allowed = |verb: &str, resource: &str, res_name: &str, ns: &str| {
        let a = Attributes {
            verb: verb.into(),
            namespace: ns.into(),
            group: RBAC.into(),
            resource: resource.into(),
            name: res_name.into(),
            resource_request: true,
            ..Attributes::default()
        };
        authorize(store, user, &a).allowed
    };
    let rules: Vec<Value> = match plural {
        "roles" | "clusterroles" => {
            if verb_allowed("escalate", plural, name, namespace) {
                return Ok(());
            }
            obj.get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        }
        "rolebindings" | "clusterrolebindings" => {
            let kind = obj
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (role_resource, role_ns) = if kind == "Role" {
                ("roles", namespace)
            } else {
                ("clusterroles", "")
            };
            if verb_allowed("bind", role_resource, role, role_ns)
                || verb_allowed("bind", role_resource, role, namespace)
            {
                return Ok(());
            }
            rules_of(store, kind, role, namespace)
        }
        _ => return Ok(()),
    };
    let missing = missing_rules(store, user, namespace, &rules);
    if missing.is_empty() {
        return Ok(());
    }
    let groups = user
        .groups
        .iter()
        .map(|g| format!("{g:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    Err(format!(
        "{}.{RBAC} \"{name}\" is forbidden: user \"{}\" (groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n{}",
        plural,
        user.username,
        missing.join("\n")
    ))
}

/// The real server's denial message, e.g.
/// `configmaps "x" is forbidden: User "alice" cannot get resource "configmaps" in API group "" in the namespace "default"`.
pub(crate) fn forbidden_message(user: &UserInfo, a: &Attributes) -> String {
    if !a.resource_request {
        return format!(
            "forbidden: User \"{}\" cannot {} path \"{}\"",
            user.username, a.verb, a.path
        );
    }
    let qualified = crate::status::qualified(&a.group, &a.resource);
    let subject = if a.name.is_empty() {
        qualified
    } else {
        format!("{qualified} \"{}\"", a.name)
    };
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    format!(
        "{subject} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.username, a.verb, a.group
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: "ns".into(),
            resource_request: true,
            ..Attributes::default()
        }
    }

    #[test]
    fn rule_matching_table() {
        let rule = json!({"apiGroups": ["banlieue.io"], "resources": ["virtualmachineclaims", "virtualmachines/status"], "verbs": ["get", "list"]});
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["*"]});
        let star_sub = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["update"]});
        let nonres = json!({"nonResourceURLs": ["/healthz", "/api/*"], "verbs": ["get"]});
        let cases = [
            (
                &rule,
                attrs("get", "banlieue.io", "virtualmachineclaims", "", ""),
                true,
            ),
            (
                &rule,
                attrs("delete", "banlieue.io", "virtualmachineclaims", "", ""),
                false,
            ),
            (
                &rule,
                attrs("get", "", "virtualmachineclaims", "", ""),
                false,
            ),
            (
                &rule,
                attrs("get", "banlieue.io", "virtualmachineclaims", "status", ""),
                false,
            ),
            (
                &rule,
                attrs("list", "banlieue.io", "virtualmachines", "status", ""),
                true,
            ),
            (&named, attrs("get", "", "configmaps", "", "a"), true),
            (&named, attrs("get", "", "configmaps", "", "b"), false),
            (
                &star_sub,
                attrs("update", "x", "things", "status", "n"),
                true,
            ),
            (&star_sub, attrs("update", "x", "things", "", "n"), false),
        ];
        for (i, (r, a, want)) in cases.iter().enumerate() {
            assert_eq!(rule_allows(r, a), *want, "case {i}");
        }
        let mut a = Attributes {
            verb: "get".into(),
            path: "/api/v1".into(),
            ..Attributes::default()
        };
        assert!(rule_allows(&nonres, &a));
        a.path = "/metrics".into();
        assert!(!rule_allows(&nonres, &a));
    }

    #[test]
    fn forbidden_wording() {
        let u = UserInfo::new("alice", &[]);
        let mut a = attrs("list", "", "configmaps", "", "");
        assert_eq!(
            forbidden_message(&u, &a),
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ns\""
        );
        a.namespace.clear();
        a.name = "x".into();
        a.group = "banlieue.io".into();
        assert_eq!(
            forbidden_message(&u, &a),
            "configmaps.banlieue.io \"x\" is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"banlieue.io\" at the cluster scope"
        );
    }
}
