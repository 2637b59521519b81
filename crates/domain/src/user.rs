use serde::{Deserialize, Serialize};

use crate::{Roles, UserName};

/// The four roles every installation has (SPEC §5). Their names are reserved: a custom
/// role may not use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinRole {
    /// Reads pools, claims and VMs.
    Viewer,
    /// Viewer plus creating and deleting one's own claims.
    Developer,
    /// Developer plus managing pools and deleting any claim.
    Operator,
    /// Operator plus users, roles and tenants.
    Admin,
}

impl BuiltinRole {
    pub const ALL: [BuiltinRole; 4] = [Self::Viewer, Self::Developer, Self::Operator, Self::Admin];

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Whether holding `self` includes `other`: each built-in role contains the ones
    /// before it (viewer ⊂ developer ⊂ operator ⊂ admin, SPEC §5).
    pub fn includes(self, other: BuiltinRole) -> bool {
        other as u8 <= self as u8
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Developer => "developer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }
}

impl Roles {
    /// Whether these roles hold `role` directly or through a built-in role that includes it.
    pub fn hold(&self, role: &str) -> bool {
        self.contains(role)
            || BuiltinRole::parse(role).is_some_and(|wanted| {
                self.iter()
                    .filter_map(|held| BuiltinRole::parse(held.as_str()))
                    .any(|held| held.includes(wanted))
            })
    }
}

/// What a page may know about the person signed in: never a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedInUser {
    pub name: UserName,
    pub display_name: String,
    pub roles: Roles,
    /// While true, the server refuses everything but changing the own password and
    /// signing out (SPEC §3).
    pub must_change_password: bool,
}

impl SignedInUser {
    pub fn is_admin(&self) -> bool {
        self.roles.contains(BuiltinRole::Admin.as_str())
    }

    /// The display name, or the user name when none was set.
    pub fn label(&self) -> &str {
        if self.display_name.is_empty() {
            self.name.as_str()
        } else {
            &self.display_name
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RoleName;

    #[test]
    fn built_in_roles_include_the_lower_ones() {
        let roles = |names: &[&str]| {
            Roles::new(names.iter().map(|n| RoleName::parse(n).unwrap()).collect()).unwrap()
        };
        let operator = roles(&["operator"]);
        assert!(operator.hold("viewer") && operator.hold("developer") && operator.hold("operator"));
        assert!(!operator.hold("admin"));
        assert!(
            !operator.hold("auditor"),
            "custom roles are held only directly"
        );
        assert!(roles(&["auditor"]).hold("auditor"));
        assert!(roles(&["admin"]).hold("viewer"));
        assert!(!roles(&["viewer"]).hold("developer"));
    }
}
