//! What the server tells a page about the request: language, who is signed in, the data
//! the page shows and the outcome of the form just posted.

use std::collections::BTreeMap;

use banlieue_domain::SignedInUser;
use serde::{Deserialize, Serialize};

use crate::AppError;
use crate::i18n::Locale;

/// Per-request page state. The server builds it (middleware, then the page's handler) and
/// puts it in the request extensions; the page reads it during SSR and the browser
/// receives the same value for hydration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageState {
    /// Which page to show. The server decides (it may answer a form post to
    /// `/users/alice/disable` with the page of alice); the browser never routes itself.
    pub page: Page,
    /// The path and query of the request, where the language switch returns to.
    pub path: String,
    pub locale: Locale,
    pub user: Option<SignedInUser>,
    /// Set when a form post is answered with the page itself (not a redirect).
    pub feedback: Option<FormFeedback>,
    /// A success message after an action.
    pub notice: Option<Notice>,
    pub data: PageData,
}

/// The pages of the console.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Page {
    Dashboard,
    SignIn,
    ChangePassword,
    Users,
    User,
    Account,
    Audit,
    /// The OIDC authorization endpoint's sign-in card or confirmation.
    Authorize,
    /// Built-in and custom roles (admins).
    Roles,
    /// Pools (operators).
    Pools,
    /// One claim (`/claims/<namespace>/<name>`).
    Claim,
    #[default]
    NotFound,
}

impl Page {
    /// The page a GET of `path` shows.
    pub fn for_path(path: &str) -> Self {
        use crate::paths;
        match path {
            paths::DASHBOARD => Self::Dashboard,
            paths::SIGN_IN => Self::SignIn,
            paths::CHANGE_PASSWORD => Self::ChangePassword,
            paths::USERS => Self::Users,
            paths::ACCOUNT => Self::Account,
            paths::AUDIT => Self::Audit,
            paths::AUTHORIZE => Self::Authorize,
            paths::ROLES => Self::Roles,
            paths::POOLS => Self::Pools,
            _ if paths::parse_claim(path).is_some() => Self::Claim,
            _ if path
                .strip_prefix("/users/")
                .is_some_and(|name| !name.is_empty() && !name.contains('/')) =>
            {
                Self::User
            }
            _ => Self::NotFound,
        }
    }
}

/// The result of a refused form post, and what to put back into the form so nothing
/// typed (except passwords) is lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormFeedback {
    pub error: AppError,
    /// Field name → typed value. Never holds a password.
    pub values: BTreeMap<String, String>,
}

impl FormFeedback {
    pub fn value(&self, field: &str) -> String {
        self.values.get(field).cloned().unwrap_or_default()
    }
}

/// A confirmation shown after a successful action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Notice {
    UserCreated,
    UserSaved,
    RoleSaved { name: String },
    PoolSaved { name: String },
    PoolDeleted { name: String },
    RoleDeleted { name: String },
    UserDisabled,
    UserEnabled,
    PasswordReset,
    SessionsRevoked,
    UserDeleted { name: String },
    SessionRevoked,
    ClaimCreated { name: String },
    ReleaseRequested { name: String },
}

impl Notice {
    pub fn fluent_key(&self) -> &'static str {
        match self {
            Self::UserCreated => "notice-user-created",
            Self::RoleSaved { .. } => "notice-role-saved",
            Self::PoolSaved { .. } => "notice-pool-saved",
            Self::PoolDeleted { .. } => "notice-pool-deleted",
            Self::RoleDeleted { .. } => "notice-role-deleted",
            Self::UserSaved => "notice-user-saved",
            Self::UserDisabled => "notice-user-disabled",
            Self::UserEnabled => "notice-user-enabled",
            Self::PasswordReset => "notice-password-reset",
            Self::SessionsRevoked => "notice-sessions-revoked",
            Self::UserDeleted { .. } => "notice-user-deleted",
            Self::SessionRevoked => "notice-session-revoked",
            Self::ClaimCreated { .. } => "notice-claim-created",
            Self::ReleaseRequested { .. } => "notice-claim-released",
        }
    }

    pub fn message(&self, locale: Locale) -> String {
        match self {
            Self::UserDeleted { name }
            | Self::ClaimCreated { name }
            | Self::ReleaseRequested { name }
            | Self::RoleSaved { name }
            | Self::PoolSaved { name }
            | Self::PoolDeleted { name }
            | Self::RoleDeleted { name } => {
                locale.t_with(self.fluent_key(), &[("name", name.clone())])
            }
            _ => locale.t(self.fluent_key()),
        }
    }
}

/// The data of the page being rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PageData {
    #[default]
    None,
    Users(UsersView),
    User(UserView),
    Account(AccountView),
    Audit(AuditView),
    Authorize(AuthorizeView),
    Dashboard(DashboardView),
    Roles(RolesView),
    Pools(PoolsView),
    Claim(ClaimView),
}

impl PageData {
    /// Where the page's forms may send the browser besides our own origin (the CSP
    /// `form-action`): the OIDC client's redirect origin on the authorization page.
    pub fn form_action_origin(&self) -> Option<&str> {
        match self {
            Self::Authorize(view) => Some(&view.redirect_origin),
            _ => None,
        }
    }
}

/// Which client asks for tokens, as the confirmation names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthorizeClient {
    CommandLine,
    Console,
}

/// The OIDC authorization page: the request's parameters, carried as hidden fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizeView {
    pub client: AuthorizeClient,
    /// Name → value of the authorization request, re-posted by the forms.
    pub fields: Vec<(String, String)>,
    /// `scheme://host:port` of the client's redirect URI.
    pub redirect_origin: String,
    /// Show the sign-in card (signed out, `prompt=login`, or `max_age` passed); else the
    /// signed-in person confirms.
    pub sign_in: bool,
    /// The same request with `prompt=login`: "use another account".
    pub switch_account: String,
}

/// A user as the administration pages show it. Instants are RFC 3339, UTC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRow {
    pub name: String,
    pub display_name: String,
    pub email: String,
    pub roles: Vec<String>,
    pub tenant: Option<String>,
    pub disabled: bool,
    pub must_change_password: bool,
    pub last_sign_in: Option<String>,
    /// The optimistic-concurrency token forms send back.
    pub version: i64,
}

/// The user list: one page of a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersView {
    pub search: String,
    /// 0-based.
    pub page: u32,
    pub per_page: i64,
    pub total: i64,
    pub rows: Vec<UserRow>,
}

/// One user's page, with a generated password to show once after create or reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserView {
    pub user: UserRow,
    pub shown_password: Option<String>,
}

/// A browser session in "My sessions".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRow {
    pub handle: String,
    pub created: String,
    pub last_seen: String,
    pub source_ip: String,
    pub user_agent: String,
    /// The session of this very browser.
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountView {
    pub sessions: Vec<SessionRow>,
    /// Whether the console knows a cluster, so a kubeconfig can be downloaded.
    pub kubeconfig_available: bool,
    /// "What can I do?": Kubernetes' answer per resource and verb (empty without a
    /// cluster).
    pub access: Vec<AccessRow>,
}

/// One resource of the "What can I do?" matrix: verb → allowed, in every namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRow {
    /// The plural resource name, e.g. `virtualmachineclaims`.
    pub resource: String,
    pub verbs: Vec<(String, bool)>,
}

/// The audit log's filters as typed (empty = any).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilter {
    pub actor: String,
    pub action: String,
    pub target: String,
    pub result: String,
    /// `YYYY-MM-DD`, inclusive, UTC.
    pub since: String,
    /// `YYYY-MM-DD`, inclusive, UTC.
    pub until: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub source_ip: String,
    pub result: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditView {
    pub filter: AuditFilter,
    pub page: u32,
    pub per_page: i64,
    pub total: i64,
    pub rows: Vec<AuditRow>,
}

/// The dashboard: the pools the person may see and their own claims (SPEC §6).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardView {
    /// Whether the console is connected to a cluster at all.
    pub cluster: bool,
    pub pools: Vec<PoolRow>,
    pub claims: Vec<ClaimRow>,
    /// Every claim the person may list, for operators and admins (SPEC §6); empty for
    /// others.
    pub all_claims: Vec<ClaimRow>,
    /// Lifetimes offered when claiming, in seconds.
    pub ttl_choices: Vec<u32>,
}

/// A VirtualMachinePool as the dashboard shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRow {
    pub namespace: String,
    pub name: String,
    /// Ready, unclaimed members.
    pub ready: u32,
    pub claimed: u32,
    pub max: u32,
    /// Whether Kubernetes lets this person create claims in the namespace
    /// (SelfSubjectAccessReview).
    pub can_claim: bool,
}

/// A VirtualMachineClaim as the dashboard shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRow {
    pub namespace: String,
    pub name: String,
    /// `spec.subject.id`: whom the sandbox is for.
    pub subject: String,
    pub pool: String,
    /// `Pending`, `Bound`, `Releasing`, `Failed`, or empty before the controller saw it.
    pub phase: String,
    pub reason: String,
    pub message: String,
    /// RFC 3339, UTC.
    pub expires_at: Option<String>,
    /// Seconds left when the page was rendered.
    pub remaining_secs: Option<i64>,
    pub addresses: Vec<String>,
    /// Whether to offer Release: Kubernetes RBAC allows the person to delete claims in
    /// the namespace (SelfSubjectAccessReview), and the claim is theirs or they oversee
    /// claims. The release admission policy still decides.
    pub can_release: bool,
}

/// One claim's page (SPEC §8): the dashboard's row and what only the detail shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimView {
    pub claim: ClaimRow,
    /// `spec.subject.issuer`: the identity provider of the subject.
    pub issuer: String,
    pub ttl_seconds: u32,
    /// RFC 3339, UTC.
    pub created_at: Option<String>,
    /// RFC 3339, UTC: when the claim became Bound (the lifetime counts from here).
    pub bound_at: Option<String>,
    /// `status.virtualMachineRef`: the member VM bound to the claim.
    pub virtual_machine: Option<String>,
    /// The claim no longer exists: released or expired while the page was open.
    pub gone: bool,
}

impl ClaimView {
    /// What the page shows once the claim `namespace/name` has been deleted.
    pub fn gone(namespace: &str, name: &str) -> Self {
        Self {
            claim: ClaimRow {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                ..ClaimRow::default()
            },
            gone: true,
            ..Self::default()
        }
    }
}

/// The Roles page: each role's Kubernetes rules, read as the admin, and who holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolesView {
    pub builtin: Vec<RoleRow>,
    pub custom: Vec<RoleRow>,
    /// The banlieue.io resources and verbs a custom role may grant (the form's grid).
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    /// The custom role being edited (`?edit=<name>`), whose grants pre-fill the form.
    pub editing: Option<RoleRow>,
}

/// A role as the Roles page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleRow {
    pub name: String,
    /// One line per rule, e.g. `get, list, watch — virtualmachineclaims (banlieue.io)`.
    pub rules: Vec<String>,
    /// (resource, verb) pairs granted on banlieue.io, for the edit form.
    pub grants: Vec<(String, String)>,
    /// Console users holding the role.
    pub holders: Vec<String>,
}

/// The Pools page (operators): every pool the person may list, and the form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolsView {
    pub pools: Vec<PoolForm>,
    /// What the form shows: the pool being edited (`?edit=<ns>/<name>`), or defaults.
    pub form: PoolForm,
    /// Whether Kubernetes lets the person create pools in every namespace
    /// (SelfSubjectAccessReview): only then the form and the Edit / Delete buttons show.
    pub can_manage: bool,
}

/// A VirtualMachinePool's settings, as listed and as edited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolForm {
    pub namespace: String,
    pub name: String,
    pub warm_replicas: u32,
    pub max_replicas: u32,
    pub image_revision: String,
    pub cpu: u32,
    /// A Kubernetes quantity, e.g. `4Gi`.
    pub memory: String,
    pub image: String,
    pub provider: String,
    /// Ready / claimed / all members, when listed.
    pub ready: u32,
    pub claimed: u32,
    pub total: u32,
}
