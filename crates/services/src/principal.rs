//! Who is asking: a person, where their identity lives and how this request proved it.

use std::net::IpAddr;

use banlieue_domain::{BuiltinRole, Roles};
use banlieue_identity::Actor;
use banlieue_store::UserRecord;
use cluster::KubernetesIdentity;
use cluster::crd::ClaimSubject;
use tenants::TenantIdentity;

/// Where a principal's identity lives.
#[derive(Debug, Clone)]
pub enum IdentitySource {
    /// A console account (argon2id password, SPEC §3).
    Local(Box<UserRecord>),
    /// A tenant's person, as their provider's verified token names them (SPEC §7).
    Tenant(Box<TenantIdentity>),
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

    /// A tenant's person, authenticated by `authenticator` (their provider's token),
    /// from `address`.
    pub fn tenant(person: TenantIdentity, authenticator: Authenticator, address: IpAddr) -> Self {
        Self {
            source: IdentitySource::Tenant(Box::new(person)),
            authenticator,
            address,
        }
    }

    /// The name the audit log uses: a console user's name, or a tenant person's
    /// Kubernetes user `oidc:<tenant>:<sub>` (names of different tenants may collide;
    /// these do not).
    pub fn name(&self) -> String {
        match &self.source {
            IdentitySource::Local(user) => user.name.as_str().to_owned(),
            IdentitySource::Tenant(person) => person.kubernetes_user(),
        }
    }

    /// The roles held.
    pub fn roles(&self) -> &Roles {
        match &self.source {
            IdentitySource::Local(user) => &user.roles,
            IdentitySource::Tenant(person) => &person.roles,
        }
    }

    /// Where the principal may claim, when something other than Kubernetes' RBAC limits
    /// it: a tenant's `namespaces` (SPEC §7). `None` for a console user.
    pub fn claim_namespaces(&self) -> Option<&[String]> {
        match &self.source {
            IdentitySource::Local(_) => None,
            IdentitySource::Tenant(person) => Some(&person.namespaces[..]),
        }
    }

    /// The start of the names of the claims the principal makes (`metadata.generateName`):
    /// a console user's name, or a tenant person's tenant (a DNS label, unlike a
    /// subject), then `-`.
    pub fn claim_name_prefix(&self) -> String {
        match &self.source {
            IdentitySource::Local(user) => format!("{}-", user.name.as_str()),
            IdentitySource::Tenant(person) => format!("{}-", person.tenant),
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
        match &self.source {
            IdentitySource::Local(user) => KubernetesIdentity::console(
                user.name.as_str(),
                user.roles.iter().map(|r| r.as_str()),
            ),
            IdentitySource::Tenant(person) => person.kubernetes_identity(),
        }
    }

    /// The claim subject naming this principal: a console user at the console's issuer
    /// `console_issuer`, a tenant's person at their tenant's issuer as
    /// `<tenant>:<sub>` ([`TenantIdentity::claim_subject_id`]).
    pub fn subject(&self, console_issuer: &str) -> ClaimSubject {
        match &self.source {
            IdentitySource::Local(user) => ClaimSubject {
                issuer: console_issuer.to_owned(),
                id: user.name.as_str().to_owned(),
            },
            IdentitySource::Tenant(person) => ClaimSubject {
                issuer: person.issuer.clone(),
                id: person.claim_subject_id(),
            },
        }
    }

    /// The principal as the account rules see an actor: a console user. A tenant's
    /// person has no say over the console's accounts and roles.
    ///
    /// Errors: [`ServiceError::Forbidden`] for a tenant's person.
    pub(crate) fn actor(&self) -> crate::Result<Actor> {
        match &self.source {
            IdentitySource::Local(user) => Ok(Actor::User {
                user: user.clone(),
                source: self.address,
            }),
            IdentitySource::Tenant(_) => Err(crate::ServiceError::forbidden(
                "a tenant's people do not administer the console's accounts and roles",
            )),
        }
    }
}
