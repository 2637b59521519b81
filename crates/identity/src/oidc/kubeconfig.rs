//! The kubeconfig a person downloads (SPEC §4): the cluster from configuration and a user
//! whose credentials come from the `banlieue` CLI as a kubectl exec plugin
//! (client.authentication.k8s.io/v1, Kubernetes "client-go credential plugins"). It
//! holds no secret, so it may be served to anyone.

use serde_json::json;

use super::clients::{CLI_CLIENT_ID, KUBERNETES_AUDIENCE};

/// The cluster people reach with kubectl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    /// The name of the cluster, context and user entries, e.g. `banlieue`.
    pub name: String,
    /// The API server URL, e.g. `https://k8s.example.com:6443`.
    pub server: String,
    /// PEM of the CA that signed the API server's certificate, when it is private.
    pub certificate_authority_pem: Option<String>,
}

/// The kubeconfig YAML for the cluster, with an exec block running
/// `banlieue auth token --issuer <issuer_url> --client-id banlieue-cli --audience kubernetes`.
pub fn kubeconfig_yaml(cluster: &ClusterAccess, issuer_url: &str) -> String {
    use base64::Engine;
    let mut cluster_entry = json!({ "server": cluster.server });
    if let Some(pem) = &cluster.certificate_authority_pem {
        cluster_entry["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    let name = &cluster.name;
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": cluster_entry }],
        "users": [{
            "name": name,
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "banlieue",
                    "args": [
                        "auth", "token",
                        "--issuer", issuer_url,
                        "--client-id", CLI_CLIENT_ID,
                        "--audience", KUBERNETES_AUDIENCE,
                    ],
                    "interactiveMode": "IfAvailable",
                    "provideClusterInfo": false,
                    "installHint": "kubectl runs the banlieue command-line tool to sign you in. \
                                    Install it with: cargo install --path crates/cli \
                                    (from the banlieue-console sources), or ask your platform team.",
                }
            }
        }],
        "contexts": [{ "name": name, "context": { "cluster": name, "user": name } }],
        "current-context": name,
    });
    serde_yaml::to_string(&config).expect("JSON values serialise to YAML")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_names_the_issuer_and_no_secret() {
        let cluster = ClusterAccess {
            name: "banlieue".into(),
            server: "https://k8s.example:6443".into(),
            certificate_authority_pem: Some("-----BEGIN CERTIFICATE-----\nAA==\n".into()),
        };
        let yaml = kubeconfig_yaml(&cluster, "https://console.example");
        let parsed: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        let exec = &parsed["users"][0]["user"]["exec"];
        assert_eq!(exec["command"], "banlieue");
        assert_eq!(exec["args"][3], "https://console.example");
        assert_eq!(exec["interactiveMode"], "IfAvailable");
        assert!(parsed["clusters"][0]["cluster"]["certificate-authority-data"].is_string());
        assert!(parsed["users"][0]["user"].get("token").is_none());
        assert_eq!(parsed["current-context"], "banlieue");
    }
}
