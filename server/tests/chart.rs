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
