//! The chart's built-in roles (SPEC §5): each bound to its `console:<role>` group, each
//! including the rules of the roles below it, and none granting secrets, impersonation
//! or a wildcard. The console's Deployment as the chart renders it: only variables the
//! console reads, a configuration it accepts, probes it answers, and no privilege.

mod support;

use axum::http::StatusCode;
use clap::{CommandFactory, Parser};
use serde::Deserialize;
use serde_json::Value;
use server::config::{Cli, Command};

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

const DEPLOYMENT: &str = include_str!("../../charts/banlieue-console/templates/deployment.yaml");

/// The rendered chart's (default values) object of `kind` named `name`.
fn rendered(kind: &str, name: &str) -> Value {
    cluster::chart::parse_documents(cluster::chart::RENDERED)
        .unwrap()
        .into_iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in charts/rendered/banlieue-console.yaml"))
}

/// The console container of the rendered Deployment.
fn console_container() -> Value {
    let deployment = rendered("Deployment", "banlieue-console");
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(containers.len(), 1);
    containers[0].clone()
}

/// Every environment variable the console reads: each flag's, `RUST_LOG` (the log filter)
/// and `LEPTOS_SITE_ROOT` (`startup::leptos_options`).
fn variables_the_console_reads() -> Vec<String> {
    fn walk(command: &clap::Command, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            if let Some(env) = arg.get_env() {
                out.push(env.to_str().unwrap().to_owned());
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = vec!["RUST_LOG".to_owned(), "LEPTOS_SITE_ROOT".to_owned()];
    walk(&Cli::command(), &mut out);
    out
}

#[test]
fn the_deployment_sets_only_variables_the_console_reads() {
    // Every `- name: X` in the template with an upper-case X is an environment variable
    // (volumes, ports and containers have lower-case names), whichever values render it.
    let named: Vec<&str> = DEPLOYMENT
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- name: "))
        .filter(|n| {
            n.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    let known = variables_the_console_reads();
    for name in &named {
        assert!(
            known.iter().any(|k| k == name),
            "templates/deployment.yaml sets {name}, which the console does not read"
        );
    }
    for needed in [
        "BANLIEUE_LISTEN",
        "BANLIEUE_DATABASE_URL",
        "BANLIEUE_EXTERNAL_URL",
        "BANLIEUE_TLS_CERT_FILE",
        "BANLIEUE_TLS_KEY_FILE",
        "BANLIEUE_ID_TOKEN_TTL_MINUTES",
        "BANLIEUE_REFRESH_TOKEN_LIFETIME_HOURS",
        "BANLIEUE_SESSION_LIFETIME_HOURS",
        "BANLIEUE_SIGNING_KEY_ACTIVATION_MINUTES",
        "BANLIEUE_KEY_ENCRYPTION_KEY_FILE",
        "BANLIEUE_PREVIOUS_KEY_ENCRYPTION_KEY_FILE",
        "BANLIEUE_CLUSTER_SERVER",
        "BANLIEUE_CLUSTER_CA_FILE",
        "BANLIEUE_NAMESPACE",
        "BANLIEUE_LOG_FORMAT",
        "LEPTOS_SITE_ROOT",
    ] {
        assert!(named.contains(&needed), "the chart never sets {needed}");
    }
    // The pod's own service account is its cluster identity; no dev cluster.
    for never in ["BANLIEUE_KUBECONFIG", "BANLIEUE_DEV_CLUSTER"] {
        assert!(!named.contains(&never), "the chart sets {never}");
    }
}

#[test]
fn the_rendered_deployment_is_a_configuration_the_console_accepts() {
    let container = console_container();
    // Each variable as its flag, so the test's own environment does not count.
    let command = Cli::command();
    let mut argv = vec!["banlieue-console".to_owned()];
    for var in container["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap();
        let value = var["value"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: the default values set every variable plainly"));
        if name == "RUST_LOG" || name == "LEPTOS_SITE_ROOT" {
            continue; // not flags
        }
        let arg = command
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == name))
            .unwrap_or_else(|| panic!("{name} is no flag's variable"));
        argv.push(format!("--{}={value}", arg.get_long().unwrap()));
    }
    argv.extend(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(matches!(cli.command, Some(Command::Serve)), "{argv:?}");
    let config = cli
        .settings
        .validate()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert_eq!(
        Value::from(config.listen.port()),
        container["ports"][0]["containerPort"]
    );
    assert_eq!(container["ports"][1]["name"], "metrics");
    assert_eq!(
        config.metrics_listen.map(|a| Value::from(a.port())),
        Some(container["ports"][1]["containerPort"].clone())
    );
    assert_eq!(config.namespace, cluster::chart::RELEASE_NAMESPACE);
    // SQLite: the default file, relative to the container's directory, on the volume.
    let file = std::path::Path::new(container["workingDir"].as_str().unwrap())
        .join(banlieue_store::sqlite_file(&config.database_url).unwrap());
    let data = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "data")
        .unwrap();
    assert_eq!(
        file.parent().unwrap(),
        std::path::Path::new(data["mountPath"].as_str().unwrap()),
        "the database is on the volume"
    );
}

#[tokio::test]
async fn the_probes_are_endpoints_the_console_answers() {
    let container = console_container();
    let app = support::TestApp::new().await;
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["port"], container["ports"][0]["name"], "{probe}");
        let path = get["path"].as_str().unwrap();
        let response = app.send(support::get(path, None)).await;
        assert_eq!(response.status, StatusCode::OK, "{probe} {path}");
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
}

#[test]
fn the_console_runs_unprivileged_and_writes_only_to_its_volumes() {
    let deployment = rendered("Deployment", "banlieue-console");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "banlieue-console");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = console_container();
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(container["resources"]["requests"].is_object());
    // The root filesystem is read-only: the SQLite directory is the claim
    // banlieue-console-data (the one the chart makes) and /tmp (SQLite's temporary files)
    // an emptyDir.
    let volume_at = |path: &str| -> Value {
        let mount = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))
            .clone();
        assert_ne!(mount["readOnly"], true, "{path}");
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap()
            .clone()
    };
    // SQLite's file is the console's default, in the container's directory
    // (templates/deployment.yaml says why).
    let default = Cli::try_parse_from(["banlieue-console"])
        .unwrap()
        .settings
        .database_url;
    let file = std::path::Path::new(container["workingDir"].as_str().unwrap())
        .join(banlieue_store::sqlite_file(&default).unwrap());
    let data = volume_at(file.parent().unwrap().to_str().unwrap());
    assert_eq!(
        data["persistentVolumeClaim"]["claimName"],
        "banlieue-console-data"
    );
    rendered("PersistentVolumeClaim", "banlieue-console-data");
    assert!(volume_at("/tmp")["emptyDir"].is_object());
    // The NetworkPolicy admits the console's port.
    let policy = rendered("NetworkPolicy", "banlieue-console");
    assert_eq!(
        policy["spec"]["ingress"][0]["ports"][0]["port"],
        container["ports"][0]["name"]
    );
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
}
