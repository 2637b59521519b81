//! The Kubernetes exec credential plugin protocol, `client.authentication.k8s.io/v1`
//! (<https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins>).

use serde::{Deserialize, Serialize};

/// Environment variable through which kubectl describes the call (an `ExecCredential` with
/// `spec.interactive`).
pub const EXEC_INFO_ENV: &str = "KUBERNETES_EXEC_INFO";

/// The API version we print and accept.
pub const API_VERSION: &str = "client.authentication.k8s.io/v1";

/// The object printed on stdout by `banlieue auth token`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecCredential<'a> {
    /// Always [`API_VERSION`].
    pub api_version: &'static str,
    /// Always `ExecCredential`.
    pub kind: &'static str,
    /// The credential.
    pub status: ExecCredentialStatus<'a>,
}

/// `status` of an [`ExecCredential`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecCredentialStatus<'a> {
    /// The bearer token kubectl sends: the ID token.
    pub token: &'a str,
    /// When kubectl must call the plugin again: the ID token's `exp`, RFC 3339 in UTC.
    pub expiration_timestamp: String,
}

/// The ExecCredential JSON (one line) for `token`, expiring at `expires_at` (seconds since
/// the Unix epoch).
pub fn exec_credential_json(token: &str, expires_at: i64) -> String {
    let ts = chrono::DateTime::from_timestamp(expires_at, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    serde_json::to_string(&ExecCredential {
        api_version: API_VERSION,
        kind: "ExecCredential",
        status: ExecCredentialStatus {
            token,
            expiration_timestamp: ts,
        },
    })
    .expect("ExecCredential serializes")
}

#[derive(Deserialize)]
struct ExecInfo {
    #[serde(default)]
    spec: ExecInfoSpec,
}

#[derive(Default, Deserialize)]
struct ExecInfoSpec {
    #[serde(default)]
    interactive: bool,
}

/// Whether the plugin may interact with the person (open a browser and wait), from the value
/// of `KUBERNETES_EXEC_INFO` and whether stdin is a terminal: absent → `stdin_is_terminal`
/// (a person ran the command in a terminal; a script, a pipe or a CI job must not wait for a
/// browser); present → `spec.interactive`; unparsable → `false` (never hang a
/// non-interactive kubectl).
pub fn interactive_from_exec_info(value: Option<&str>, stdin_is_terminal: bool) -> bool {
    match value {
        None => stdin_is_terminal,
        Some(v) => serde_json::from_str::<ExecInfo>(v)
            .map(|i| i.spec.interactive)
            .unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_matches_client_go() {
        let json = exec_credential_json("eyJ.a.b", 1_800_000_000);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "client.authentication.k8s.io/v1",
                "kind": "ExecCredential",
                "status": {
                    "token": "eyJ.a.b",
                    "expirationTimestamp": "2027-01-15T08:00:00Z"
                }
            })
        );
        assert!(!json.contains('\n'));
    }

    #[test]
    fn interactive_flag() {
        let yes = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}"#;
        let no = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}"#;
        let unsaid =
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{}}"#;
        // kubectl's word wins whatever stdin is (it may have piped our stdin).
        for tty in [true, false] {
            assert!(interactive_from_exec_info(Some(yes), tty));
            assert!(!interactive_from_exec_info(Some(no), tty));
            assert!(!interactive_from_exec_info(Some(unsaid), tty));
            assert!(!interactive_from_exec_info(Some("garbage"), tty));
        }
        // Outside kubectl: only a terminal on stdin means a person is there.
        assert!(interactive_from_exec_info(None, true));
        assert!(!interactive_from_exec_info(None, false));
    }
}
