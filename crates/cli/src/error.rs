//! The one error type of the `banlieue` CLI.

use std::path::PathBuf;

/// Everything that can make a `banlieue` command fail.
///
/// `Display` gives a single line meant for stderr; it never contains a token.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required option is missing or a value is malformed.
    #[error("{0}")]
    Usage(String),
    /// A URL breaks the transport rule: `https`, or plain `http` only to a loopback host
    /// (127.0.0.0/8, `::1`, `localhost`). See [`crate::urls::check_url`].
    #[error("refusing {url}: {reason}")]
    InsecureUrl {
        /// The URL as given.
        url: String,
        /// Why it is refused.
        reason: String,
    },
    /// Reading `--ca-file` or building the HTTP client failed.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// A network call failed or timed out (the text carries the cause chain).
    #[error("{what}: {detail}")]
    Network {
        /// What was being done ("discovery", "token endpoint", ...).
        what: &'static str,
        /// The cause chain, joined with ": ".
        detail: String,
    },
    /// The issuer answered something that breaks OIDC Discovery 1.0 or RFC 6749.
    #[error("{what}: {detail}")]
    Protocol {
        /// What was being done.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The issuer returned an RFC 6749 §5.2 error other than `invalid_grant` on refresh.
    #[error("{what}: the issuer answered {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    OAuth {
        /// What was being done.
        what: &'static str,
        /// The `error` code, e.g. `invalid_request`.
        error: String,
        /// The `error_description`, if any.
        description: Option<String>,
    },
    /// The refresh token was refused with `invalid_grant` (RFC 6749 §5.2): the session is over.
    #[error(
        "the session has ended (the issuer refused the refresh token); run `banlieue auth login`"
    )]
    SessionEnded,
    /// An ID token failed validation (signature via JWKS, `iss`, `aud`, `exp`, `nonce`).
    #[error("ID token rejected: {0}")]
    InvalidIdToken(String),
    /// A browser sign-in is needed but the caller is not interactive (KUBERNETES_EXEC_INFO
    /// `spec.interactive` is false).
    #[error(
        "sign-in needed but kubectl runs non-interactively; run `banlieue auth login --issuer {issuer}` in a terminal"
    )]
    NotInteractive {
        /// The issuer to sign in to.
        issuer: String,
    },
    /// The authorization server redirected back with an `error` parameter (RFC 6749 §4.1.2.1).
    #[error("sign-in refused by the issuer: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Authorization {
        /// The `error` code, e.g. `access_denied`.
        error: String,
        /// The `error_description`, if any.
        description: Option<String>,
    },
    /// No callback arrived within the sign-in timeout.
    #[error("sign-in timed out after {0} s")]
    LoginTimeout(u64),
    /// Another `banlieue` process held the cache lock for too long.
    #[error("timed out after {secs} s waiting for the lock on {}", path.display())]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited, in seconds.
        secs: u64,
    },
    /// A file system operation on the cache or an output file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The cache entry could not be parsed.
    #[error("{}: unreadable cache entry: {detail}", path.display())]
    CorruptCache {
        /// The cache file.
        path: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// `kubeconfig --out FILE` would overwrite an existing file without `--force`.
    #[error("{} exists; pass --force to overwrite it", .0.display())]
    WouldOverwrite(PathBuf),
    /// There is no cached session for the given issuer, client and audience.
    #[error(
        "not signed in to {issuer} (client {client_id}, audience {audience}); run `banlieue auth login`"
    )]
    NotSignedIn {
        /// Issuer URL.
        issuer: String,
        /// OAuth client id.
        client_id: String,
        /// Requested audience.
        audience: String,
    },
    /// The cache directory cannot be used safely (see [`crate::cache::Cache::ensure_dirs`]).
    #[error("refusing to keep the token cache in {}: {reason}", path.display())]
    UnsafeCacheDir {
        /// The directory concerned.
        path: PathBuf,
        /// Why, and what to do.
        reason: String,
    },
    /// `logout` deleted the local session but could not revoke the refresh token.
    #[error("removed the local session, but could not revoke the refresh token at the issuer: {0}")]
    RevocationFailed(String),
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Joins an error and its `source()` chain with ": ", skipping repeated messages.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        let s = e.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = e.source();
    }
    parts.join(": ")
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
