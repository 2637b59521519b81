//! The error [`crate::Emulator::start`] returns.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors from starting the emulator.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// The listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The snapshot file exists but cannot be read or parsed.
    #[error("cannot load state from {path}: {reason}")]
    State {
        /// Snapshot path.
        path: PathBuf,
        /// Cause.
        reason: String,
    },
    /// A JWT authenticator could not be built.
    #[error("invalid authentication configuration: {0}")]
    Authentication(String),
    /// TLS material could not be generated.
    #[error("TLS setup failed: {0}")]
    Tls(String),
}
