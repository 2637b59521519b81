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
        "the session has ended: the issuer refused the refresh token (invalid_grant{}); run `banlieue auth login`",
        description.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
    )]
    SessionEnded {
        /// The issuer's `error_description`, sanitised ([`sanitize`]), if any.
        description: Option<String>,
    },
    /// An ID token failed validation (signature via JWKS, `iss`, `aud`, `exp`, `nonce`).
    #[error("ID token rejected: {0}")]
    InvalidIdToken(String),
    /// A browser sign-in is needed but the caller is not interactive (KUBERNETES_EXEC_INFO
    /// `spec.interactive` is false, or, outside kubectl, stdin is not a terminal).
    #[error(
        "sign-in needed but this is not an interactive terminal (kubectl runs the plugin non-interactively, or stdin is not a terminal); run `banlieue auth login --issuer {issuer}` in a terminal"
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
    /// `status` without `--issuer` found no cached session at all.
    #[error(
        "no cached sessions in {}; run `banlieue auth login --issuer URL`",
        .0.display()
    )]
    NoSessions(PathBuf),
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

/// Bidirectional-text controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069): they
/// can make a terminal show text in another order than it was sent ("Trojan source").
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Makes text that came from elsewhere (an issuer, a callback URL, an HTTP body) safe to print
/// on one terminal line: drops ANSI/VT escape sequences (CSI `ESC [ … final`, OSC/DCS/SOS/PM/APC
/// strings up to BEL or ST, two-character `ESC x`, and their C1 forms), every other control
/// character and bidirectional-text controls; turns line breaks and tabs into spaces, collapses
/// runs of whitespace, trims, and cuts the result to `max_chars` characters (ending with `…`).
pub fn sanitize(text: &str, max_chars: usize) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Skip {
        None,
        /// After ESC: the next character decides.
        Escape,
        /// Inside a CSI sequence, up to a final byte in 0x40..=0x7E.
        Csi,
        /// Inside an OSC/DCS/SOS/PM/APC string, up to BEL or ST (`ESC \` or U+009C).
        String,
        /// Inside a string, just after an ESC (a `\\` ends it).
        StringEscape,
    }
    let mut skip = Skip::None;
    let mut cleaned = String::with_capacity(text.len().min(max_chars * 4));
    for c in text.chars() {
        skip = match skip {
            Skip::Escape => match c {
                '[' => Skip::Csi,
                ']' | 'P' | 'X' | '^' | '_' => Skip::String,
                _ => Skip::None,
            },
            Skip::Csi if ('\u{40}'..='\u{7e}').contains(&c) => Skip::None,
            Skip::Csi => Skip::Csi,
            Skip::String | Skip::StringEscape if c == '\u{7}' || c == '\u{9c}' => Skip::None,
            Skip::StringEscape if c == '\\' => Skip::None,
            Skip::String | Skip::StringEscape if c == '\u{1b}' => Skip::StringEscape,
            Skip::String | Skip::StringEscape => Skip::String,
            Skip::None => match c {
                '\u{1b}' => Skip::Escape,
                '\u{9b}' => Skip::Csi,
                '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => Skip::String,
                '\n' | '\r' | '\t' => {
                    cleaned.push(' ');
                    Skip::None
                }
                c if c.is_control() || is_bidi_control(c) => Skip::None,
                c => {
                    cleaned.push(c);
                    Skip::None
                }
            },
        };
    }
    let words: Vec<&str> = cleaned.split_whitespace().collect();
    let one_line = words.join(" ");
    if one_line.chars().count() <= max_chars {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_removes_escape_sequences_and_controls() {
        let table: &[(&str, &str)] = &[
            ("plain text", "plain text"),
            ("\u{1b}[31mred\u{1b}[0m", "red"),
            ("\u{1b}[2J\u{1b}[1;1Hcleared", "cleared"),
            ("\u{1b}]0;evil title\u{7}after", "after"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("\u{1b}Pdcs\u{1b}\\ok", "ok"),
            ("\u{9b}31mc1", "c1"),
            ("a\u{1b}cb", "ab"),
            ("line\r\nbreak\ttab", "line break tab"),
            ("bell\u{7}\u{8}\u{7f}\u{0}", "bell"),
            ("\u{202e}txt.exe\u{2066}", "txt.exe"),
            ("  many   spaces  ", "many spaces"),
            ("héllo wörld", "héllo wörld"),
        ];
        for (raw, want) in table {
            assert_eq!(sanitize(raw, 100), *want, "{raw:?}");
        }
    }

    #[test]
    fn sanitize_bounds_the_length() {
        assert_eq!(sanitize("abcdef", 4), "abc…");
        assert_eq!(sanitize("abcd", 4), "abcd");
        assert_eq!(sanitize(&"é".repeat(1000), 10).chars().count(), 10);
    }
}
