//! The emulator's identity: its admin token and TLS material, kept across restarts in the
//! identity file (`EmulatorConfig::identity_file`) so a kubeconfig stays valid.

use std::path::PathBuf;

use rand::Rng;

use crate::error::EmulatorError;
use crate::persist::write_private;
use crate::tls;

/// A new random bearer token (48 hex digits).
pub(crate) fn random_token() -> String {
    let bytes: [u8; 24] = rand::thread_rng().r#gen();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the identity file holds.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Identity {
    /// The admin bearer token.
    pub(crate) admin_token: String,
    /// The CA certificate (PEM).
    ca_pem: String,
    /// Base64 DER.
    cert_der: String,
    /// Base64 PKCS#8 DER.
    key_der: String,
}

impl Identity {
    /// The TLS material, decoded.
    pub(crate) fn certs(&self) -> Result<tls::Certs, EmulatorError> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let cert = b64
            .decode(&self.cert_der)
            .map_err(|e| EmulatorError::Tls(e.to_string()))?;
        let key = b64
            .decode(&self.key_der)
            .map_err(|e| EmulatorError::Tls(e.to_string()))?;
        Ok(tls::Certs {
            ca_pem: self.ca_pem.clone(),
            cert_der: cert.into(),
            key_der: key,
        })
    }
}

/// Reads the identity file, or creates it (a new CA, server certificate and admin token)
/// when missing; `admin_token`, when given, replaces the stored token.
pub(crate) fn load_or_create_identity(
    path: &PathBuf,
    admin_token: Option<&str>,
) -> Result<Identity, EmulatorError> {
    use base64::Engine;
    let state_err = |reason: String| EmulatorError::State {
        path: path.clone(),
        reason,
    };
    if path.exists() {
        let text = std::fs::read(path).map_err(|e| state_err(e.to_string()))?;
        let mut id: Identity =
            serde_json::from_slice(&text).map_err(|e| state_err(e.to_string()))?;
        if let Some(t) = admin_token {
            id.admin_token = t.to_string();
        }
        return Ok(id);
    }
    let certs = tls::generate().map_err(EmulatorError::Tls)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let id = Identity {
        admin_token: admin_token.map(str::to_string).unwrap_or_else(random_token),
        ca_pem: certs.ca_pem,
        cert_der: b64.encode(certs.cert_der.as_ref()),
        key_der: b64.encode(&certs.key_der),
    };
    let bytes = serde_json::to_vec_pretty(&id).map_err(|e| state_err(e.to_string()))?;
    write_private(path, &bytes).map_err(|e| state_err(e.to_string()))?;
    Ok(id)
}
