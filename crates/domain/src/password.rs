use std::fmt;

use unicode_normalization::UnicodeNormalization;

/// Why a password was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("the password is shorter than {min} bytes")]
    TooShort { min: usize },
    #[error("the password is longer than {max} bytes")]
    TooLong { max: usize },
}

/// A password, normalized to Unicode NFC so that the same characters typed on two
/// keyboards hash the same (NIST SP 800-63B §5.1.1.2).
///
/// Lengths are counted in bytes of the NFC form. There are no composition rules.
/// `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Shortest password that may be set, in bytes (SPEC §3).
    pub const MIN_BYTES: usize = 12;
    /// Longest password accepted anywhere, in bytes (SPEC §3). Longer input is refused
    /// before any hashing, never truncated.
    pub const MAX_BYTES: usize = 128;

    /// A password someone wants to set: 12 to 128 bytes after NFC.
    pub fn new_secret(raw: &str) -> Result<Self, PasswordError> {
        let password = Self::presented(raw)?;
        if password.0.len() < Self::MIN_BYTES {
            return Err(PasswordError::TooShort {
                min: Self::MIN_BYTES,
            });
        }
        Ok(password)
    }

    /// A password presented at sign-in: only the upper bound applies, so that a short or
    /// empty password still costs one full verification (no timing short-cut).
    pub fn presented(raw: &str) -> Result<Self, PasswordError> {
        // NFC never grows a string by more than a factor of 3 (Unicode UAX #15), so the
        // cheap pre-check keeps megabyte inputs from being normalized at all.
        if raw.len() > Self::MAX_BYTES * 3 {
            return Err(PasswordError::TooLong {
                max: Self::MAX_BYTES,
            });
        }
        let normalized: String = raw.nfc().collect();
        if normalized.len() > Self::MAX_BYTES {
            return Err(PasswordError::TooLong {
                max: Self::MAX_BYTES,
            });
        }
        Ok(Self(normalized))
    }

    /// The NFC bytes to hash.
    pub fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_counted_in_nfc_bytes() {
        // "é" as e + combining acute (3 bytes) becomes U+00E9 (2 bytes) under NFC.
        let decomposed = "e\u{301}".repeat(6); // 18 bytes raw, 12 bytes NFC
        let password = Password::new_secret(&decomposed).unwrap();
        assert_eq!(password.expose(), "\u{e9}".repeat(6).as_bytes());
        assert_eq!(
            Password::new_secret("short"),
            Err(PasswordError::TooShort { min: 12 })
        );
        assert!(Password::new_secret(&"x".repeat(128)).is_ok());
        assert_eq!(
            Password::new_secret(&"x".repeat(129)),
            Err(PasswordError::TooLong { max: 128 })
        );
    }

    #[test]
    fn presented_passwords_only_have_an_upper_bound() {
        assert!(Password::presented("").is_ok());
        assert_eq!(
            Password::presented(&"x".repeat(1 << 20)),
            Err(PasswordError::TooLong { max: 128 })
        );
    }

    #[test]
    fn debug_hides_the_secret() {
        let password = Password::presented("hunter2hunter2").unwrap();
        assert!(!format!("{password:?}").contains("hunter2"));
    }
}
