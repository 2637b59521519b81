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

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Developer => "developer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
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
