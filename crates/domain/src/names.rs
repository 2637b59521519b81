use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a user or role name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("the name is empty")]
    Empty,
    #[error("the name is longer than {max} characters")]
    TooLong { max: usize },
    #[error("the name must start with a lower-case letter")]
    BadStart,
    #[error("the name may only contain lower-case letters, digits and '-'")]
    BadCharacter,
    #[error("the name must not end with '-'")]
    BadEnd,
    #[error("at most {max} roles may be held")]
    TooManyRoles { max: usize },
}

/// A user's name: the identity, immutable once created.
///
/// A lower-case DNS label (RFC 1123 §2.1 as Kubernetes uses it): 1–63 characters of
/// `[a-z0-9-]`, starting with a letter (it also becomes `sub` and the Kubernetes user
/// `console:<name>`, so a leading digit is refused), not ending with `-`. SPEC §3.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserName(String);

impl UserName {
    /// Longest accepted name, in characters (= bytes: the alphabet is ASCII).
    pub const MAX_LEN: usize = 63;

    /// Validates `raw` exactly as given (no trimming or case folding: `Alice` is refused,
    /// not silently turned into `alice`).
    pub fn parse(raw: &str) -> Result<Self, NameError> {
        check_label(raw, Self::MAX_LEN)?;
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A role name: `^[a-z][a-z0-9-]{0,30}$` (SPEC §3), bound in Kubernetes to the group
/// `console:<role>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RoleName(String);

impl RoleName {
    /// Longest accepted role name, in characters.
    pub const MAX_LEN: usize = 31;

    pub fn parse(raw: &str) -> Result<Self, NameError> {
        if raw.is_empty() {
            return Err(NameError::Empty);
        }
        if raw.len() > Self::MAX_LEN {
            return Err(NameError::TooLong { max: Self::MAX_LEN });
        }
        if !raw.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(NameError::BadStart);
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(NameError::BadCharacter);
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The roles a user holds: distinct, sorted, at most [`Roles::MAX`] (SPEC §3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<RoleName>", into = "Vec<RoleName>")]
pub struct Roles(Vec<RoleName>);

impl Roles {
    pub const MAX: usize = 16;

    /// Sorts and de-duplicates `roles`; more than [`Roles::MAX`] distinct roles is an error.
    pub fn new(mut roles: Vec<RoleName>) -> Result<Self, NameError> {
        roles.sort();
        roles.dedup();
        if roles.len() > Self::MAX {
            return Err(NameError::TooManyRoles { max: Self::MAX });
        }
        Ok(Self(roles))
    }

    pub fn contains(&self, role: &str) -> bool {
        self.0.iter().any(|r| r.as_str() == role)
    }

    pub fn iter(&self) -> impl Iterator<Item = &RoleName> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn check_label(raw: &str, max: usize) -> Result<(), NameError> {
    if raw.is_empty() {
        return Err(NameError::Empty);
    }
    if raw.len() > max {
        return Err(NameError::TooLong { max });
    }
    if !raw.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(NameError::BadStart);
    }
    if !raw
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(NameError::BadCharacter);
    }
    if raw.ends_with('-') {
        return Err(NameError::BadEnd);
    }
    Ok(())
}

macro_rules! string_newtype_conversions {
    ($ty:ident) => {
        impl TryFrom<String> for $ty {
            type Error = NameError;
            fn try_from(raw: String) -> Result<Self, NameError> {
                Self::parse(&raw)
            }
        }
        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                value.0
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
string_newtype_conversions!(UserName);
string_newtype_conversions!(RoleName);

impl TryFrom<Vec<RoleName>> for Roles {
    type Error = NameError;
    fn try_from(roles: Vec<RoleName>) -> Result<Self, NameError> {
        Self::new(roles)
    }
}

impl From<Roles> for Vec<RoleName> {
    fn from(roles: Roles) -> Self {
        roles.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_follow_the_dns_label_rule() {
        for ok in ["admin", "a", "alice-2", &"a".repeat(63)] {
            assert!(UserName::parse(ok).is_ok(), "{ok} should be accepted");
        }
        let cases = [
            ("", NameError::Empty),
            (&"a".repeat(64)[..], NameError::TooLong { max: 63 }),
            ("Alice", NameError::BadStart),
            ("1alice", NameError::BadStart),
            ("-alice", NameError::BadStart),
            ("al_ice", NameError::BadCharacter),
            ("alicé", NameError::BadCharacter),
            ("al ice", NameError::BadCharacter),
            ("alice-", NameError::BadEnd),
        ];
        for (raw, want) in cases {
            assert_eq!(UserName::parse(raw), Err(want), "{raw:?}");
        }
    }

    #[test]
    fn role_names_follow_the_spec_pattern() {
        assert!(RoleName::parse("developer").is_ok());
        assert!(RoleName::parse(&format!("a{}", "b".repeat(30))).is_ok());
        assert_eq!(
            RoleName::parse(&"a".repeat(32)),
            Err(NameError::TooLong { max: 31 })
        );
        assert_eq!(RoleName::parse("Dev"), Err(NameError::BadStart));
        assert_eq!(RoleName::parse("dev_ops"), Err(NameError::BadCharacter));
    }

    #[test]
    fn roles_are_sorted_distinct_and_bounded() {
        let role = |s: &str| RoleName::parse(s).unwrap();
        let roles = Roles::new(vec![role("viewer"), role("admin"), role("viewer")]).unwrap();
        let names: Vec<_> = roles.iter().map(RoleName::as_str).collect();
        assert_eq!(names, ["admin", "viewer"]);
        let many = (0..17).map(|i| role(&format!("r{i}"))).collect();
        assert_eq!(Roles::new(many), Err(NameError::TooManyRoles { max: 16 }));
    }

    #[test]
    fn serde_refuses_invalid_names() {
        assert!(serde_json::from_str::<UserName>("\"Bad\"").is_err());
        let ok: UserName = serde_json::from_str("\"bob\"").unwrap();
        assert_eq!(ok.as_str(), "bob");
    }
}
