//! OAuth 2.0 error responses (RFC 6749 §4.1.2.1 and §5.2, RFC 7009 §2.2.1, OpenID Connect
//! Core §3.1.2.6).

use std::fmt;

/// The `error` codes the issuer answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthErrorCode {
    InvalidRequest,
    InvalidClient,
    InvalidGrant,
    UnsupportedGrantType,
    UnsupportedResponseType,
    InvalidScope,
    AccessDenied,
    UnsupportedTokenType,
    LoginRequired,
    ConsentRequired,
    RequestNotSupported,
    RequestUriNotSupported,
    ServerError,
}

impl OAuthErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::UnsupportedResponseType => "unsupported_response_type",
            Self::InvalidScope => "invalid_scope",
            Self::AccessDenied => "access_denied",
            Self::UnsupportedTokenType => "unsupported_token_type",
            Self::LoginRequired => "login_required",
            Self::ConsentRequired => "consent_required",
            Self::RequestNotSupported => "request_not_supported",
            Self::RequestUriNotSupported => "request_uri_not_supported",
            Self::ServerError => "server_error",
        }
    }

    /// The HTTP status of a token or revocation endpoint answer: 401 for
    /// `invalid_client`, 500 for `server_error`, 400 otherwise (RFC 6749 §5.2).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidClient => 401,
            Self::ServerError => 500,
            _ => 400,
        }
    }
}

/// An OAuth error with a human-readable `error_description` (ASCII, no secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub code: OAuthErrorCode,
    pub description: String,
}

impl OAuthError {
    pub fn new(code: OAuthErrorCode, description: impl Into<String>) -> Self {
        Self {
            code,
            description: description.into(),
        }
    }

    pub(crate) fn invalid_request(description: impl Into<String>) -> Self {
        Self::new(OAuthErrorCode::InvalidRequest, description)
    }

    pub(crate) fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new(OAuthErrorCode::InvalidGrant, description)
    }

    /// `invalid_request` for a parameter given more than once (RFC 6749 §3.1, §3.2). The
    /// name is the client's text: it is named only when it is a short run of letters,
    /// digits, `_`, `-` and `.`, so the description stays within the characters RFC 6749
    /// §5.2 allows (%x20-21 / %x23-5B / %x5D-7E) and echoes nothing else back.
    pub(crate) fn repeated_parameter(name: &str) -> Self {
        let nameable = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        Self::invalid_request(if nameable {
            format!("{name} is given more than once")
        } else {
            "a parameter is given more than once".to_owned()
        })
    }

    pub(crate) fn server_error() -> Self {
        Self::new(
            OAuthErrorCode::ServerError,
            "the issuer failed; try again later",
        )
    }

    /// The JSON body `{"error": …, "error_description": …}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.code.as_str(), "error_description": self.description })
    }
}

impl fmt::Display for OAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.description)
    }
}

impl std::error::Error for OAuthError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_parameter_is_named_only_when_its_name_is_plain() {
        assert_eq!(
            OAuthError::repeated_parameter("client_id").description,
            "client_id is given more than once"
        );
        for name in [
            "sta\u{fffd}e",
            "a\"b",
            "x\\y",
            "new\nline",
            "",
            &"n".repeat(65),
        ] {
            assert_eq!(
                OAuthError::repeated_parameter(name).description,
                "a parameter is given more than once",
                "{name:?}"
            );
        }
    }
}
