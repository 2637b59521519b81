//! Who is asking: a person, where their identity lives and how this request proved it.

use std::net::IpAddr;

use banlieue_domain::{BuiltinRole, Roles};
use banlieue_identity::Actor;
use banlieue_store::UserRecord;
use cluster::KubernetesIdentity;
use cluster::crd::ClaimSubject;

/// Where a principal's identity lives.
#[derive(Debug, Clone)]
pub enum IdentitySource {
    /// A console account (argon2id password, SPEC §3).
    Local(Box<UserRecord>),
}

/// How the request proved who it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authenticator {
    /// A browser session cookie (SPEC §3).
    Session,
    /// An `Authorization: Bearer` token (RFC 6750).
    BearerToken,
}

/// The person a use case acts for: their name, roles, identity source, authenticator and
/// the client address (for the audit log).
#[derive(Debug, Clone)]
pub struct Principal {
    source: IdentitySource,
    authenticator: Authenticator,
    address: IpAddr,
}

impl Principal {
    /// A console account, authenticated by `authenticator`, from `address`.
    pub fn local(user: UserRecord, authenticator: Authenticator, address: IpAddr) -> Self {
        Self {
            source: IdentitySource::Local(Box::new(user)),
            authenticator,
            address,
        }
    }

    /// The name the audit log and the claim subject use.
    pub fn name(&self) -> &str {
        match &self.source {
            IdentitySource::Local(user) => user.name.as_str(),
        }
    }

    /// The roles held.
    pub fn roles(&self) -> &Roles {
        match &self.source {
            IdentitySource::Local(user) => &user.roles,
        }
    }

    /// Whether the principal holds `role` (directly or through a built-in role that
    /// includes it).
    pub fn holds(&self, role: BuiltinRole) -> bool {
        self.roles().hold(role.as_str())
    }

    /// Where the identity lives.
    pub fn source(&self) -> &IdentitySource {
        &self.source
    }

    /// How the request was authenticated.
    pub fn authenticator(&self) -> Authenticator {
        self.authenticator
    }

    /// The client address.
    pub fn address(&self) -> IpAddr {
        self.address
    }

    /// The Kubernetes user and groups the console impersonates for this principal: what
    /// the API server gives their own token (SPEC §4–§5).
    pub fn kubernetes_identity(&self) -> KubernetesIdentity {
        KubernetesIdentity::console(self.name(), self.roles().iter().map(|r| r.as_str()))
    }

    /// The claim subject naming this principal at the console's issuer `issuer`.
    pub fn subject(&self, issuer: &str) -> ClaimSubject {
        ClaimSubject {
            issuer: issuer.to_owned(),
            id: self.name().to_owned(),
        }
    }

    /// The principal as the account rules see an actor.
    pub(crate) fn actor(&self) -> Actor {
        match &self.source {
            IdentitySource::Local(user) => Actor::User {
                user: user.clone(),
                source: self.address,
            },
        }
    }
}
