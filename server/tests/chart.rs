//! The chart's built-in roles (SPEC §5): each bound to its `console:<role>` group, each
//! including the rules of the roles below it, and none granting secrets, impersonation
//! or a wildcard.

use serde::Deserialize;
use serde_json::Value;

const ROLES: &str = include_str!("../../charts/banlieue-console/templates/console-roles.yaml");
const BUILT_IN: [&str; 4] = ["viewer", "developer", "operator", "admin"];

fn documents() -> Vec<Value> {
    serde_yaml::Deserializer::from_str(ROLES)
        .map(|doc| serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap())
        .collect()
}

fn rules_of(role: &str) -> Vec<Value> {
    documents()
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == format!("console-{role}"))
        .unwrap_or_else(|| panic!("ClusterRole console-{role}"))["rules"]
        .as_array()
        .unwrap()
        .clone()
}

/// Every (group, resource, verb) a rule list grants.
fn grants(rules: &[Value]) -> Vec<(String, String, String)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for rule in rules {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    out.push((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    out
}

#[test]
fn built_in_roles_grant_no_secrets_impersonation_or_wildcards() {
    for role in BUILT_IN {
        for (group, resource, verb) in grants(&rules_of(role)) {
            assert_ne!(resource, "secrets", "{role}");
            assert_ne!(verb, "impersonate", "{role}");
            assert!(
                !group.contains('*') && !resource.contains('*') && !verb.contains('*'),
                "{role}: {group}/{resource} {verb}"
            );
        }
    }
}

#[test]
fn each_role_includes_the_ones_below_it_and_is_bound_to_its_group() {
    for pair in BUILT_IN.windows(2) {
        let lower = grants(&rules_of(pair[0]));
        let upper = grants(&rules_of(pair[1]));
        for grant in &lower {
            assert!(
                upper.contains(grant),
                "{} lacks {grant:?} of {}",
                pair[1],
                pair[0]
            );
        }
        assert!(
            upper.len() > lower.len(),
            "{} adds nothing to {}",
            pair[1],
            pair[0]
        );
    }
    for role in BUILT_IN {
        let binding = documents()
            .into_iter()
            .find(|d| {
                d["kind"] == "ClusterRoleBinding"
                    && d["metadata"]["name"] == format!("console-{role}")
            })
            .unwrap_or_else(|| panic!("ClusterRoleBinding console-{role}"));
        assert_eq!(binding["roleRef"]["name"], format!("console-{role}"));
        assert_eq!(binding["subjects"][0]["kind"], "Group");
        assert_eq!(binding["subjects"][0]["name"], format!("console:{role}"));
    }
}

/// Every rule of the roles bound to the console's ServiceAccount, as the chart renders
/// them (`charts/rendered/banlieue-console.yaml`).
fn console_service_account_rules() -> Vec<Value> {
    let objects: Vec<Value> = cluster::chart::parse_documents(cluster::chart::RENDERED)
        .unwrap()
        .into_iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .collect();
    let mut rules = Vec::new();
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
    {
        let to_console = binding["subjects"].as_array().unwrap().iter().any(|s| {
            s["kind"] == "ServiceAccount"
                && s["name"] == "banlieue-console"
                && s["namespace"] == cluster::chart::RELEASE_NAMESPACE
        });
        if !to_console {
            continue;
        }
        let role = objects
            .iter()
            .find(|o| {
                o["kind"] == binding["roleRef"]["kind"]
                    && o["metadata"]["name"] == binding["roleRef"]["name"]
            })
            .unwrap_or_else(|| panic!("the role of {}", binding["metadata"]["name"]));
        rules.extend(role["rules"].as_array().unwrap().iter().cloned());
    }
    rules
}

#[test]
fn the_console_impersonates_console_users_and_groups_by_name_only() {
    let rules = console_service_account_rules();
    let with_verb = |verb: &str| -> Vec<Value> {
        rules
            .iter()
            .filter(|r| {
                r["verbs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v == verb || v == "*")
            })
            .cloned()
            .collect()
    };
    // Users by name: the bootstrap admin, the one the console's database starts with
    // (`cluster::impersonable` keeps the rest); never a rule without names, which would be
    // every user. Groups by name: system:authenticated and the built-in roles' groups, the
    // ones `cluster::impersonable` starts from. No ServiceAccounts, uids or extras.
    assert_eq!(
        with_verb("impersonate"),
        [
            serde_json::json!({
                "apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
                "resourceNames": cluster::impersonable::users_for(["admin"]),
            }),
            serde_json::json!({
                "apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"],
                "resourceNames": cluster::impersonable::groups_for(&[]),
            }),
        ]
    );
    // `escalate` only on the lists of groups and users, which it reads and replaces;
    // `bind` nowhere.
    let keeping = serde_json::json!({
        "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
        "resourceNames": [cluster::impersonable::GROUPS_ROLE, cluster::impersonable::USERS_ROLE],
        "verbs": ["get", "update", "escalate"],
    });
    assert_eq!(with_verb("escalate"), std::slice::from_ref(&keeping));
    assert_eq!(with_verb("bind"), Vec::<Value>::new());
    let rbac_writes: Vec<Value> = ["create", "update", "patch", "delete", "deletecollection"]
        .iter()
        .flat_map(|verb| with_verb(verb))
        .filter(|r| {
            r["apiGroups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g == "rbac.authorization.k8s.io" || g == "*")
        })
        .collect();
    assert_eq!(rbac_writes, [keeping], "no other RBAC write");
    for rule in &rules {
        for field in ["apiGroups", "resources", "verbs"] {
            assert!(
                !rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v == "*"),
                "{rule}"
            );
        }
    }
}
