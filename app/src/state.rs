//! What the server tells a page about the request: language, who is signed in, the data
//! the page shows and the outcome of the form just posted.

use std::collections::BTreeMap;

use banlieue_domain::SignedInUser;
use banlieue_domain::views::{AccessRow, ClaimView, DashboardView, PoolsView, RolesView};
use serde::{Deserialize, Serialize};

use crate::AppError;
use crate::i18n::Locale;
use crate::theme::Theme;

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
    /// The colour theme chosen, or the system's.
    pub theme: Theme,
    pub user: Option<SignedInUser>,
    /// Set when a form post is answered with the page itself (not a redirect).
    pub feedback: Option<FormFeedback>,
    /// A success message after an action.
    pub notice: Option<Notice>,
    pub data: PageData,
    /// The header's entries that Kubernetes decides (the others follow the console's own
    /// roles).
    pub nav: Navigation,
}

/// How the console speaks and looks to the person: their language and theme. Pages read
/// them from [`PageState`]; answers given before (or instead of) a page, such as the
/// error documents, from this.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Look {
    pub locale: Locale,
    pub theme: Theme,
}

impl PageState {
    /// The language and theme of this request.
    pub fn look(&self) -> Look {
        Look {
            locale: self.locale,
            theme: self.theme,
        }
    }
}

/// What the header links to beyond the console's own pages, each shown when a
/// SelfSubjectAccessReview allows what the page offers (SPEC §5: the UI hides what the
/// person cannot do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Navigation {
    /// Pools: Kubernetes lets the person list pools in every namespace.
    pub pools: bool,
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
    // `waiting`: the claim waits for a sandbox, and the notice says it is bound as soon as
    // one is ready; once the claim is past Pending the dashboard says only "created".
    ClaimCreated { name: String, waiting: bool },
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
            Self::ClaimCreated { waiting: true, .. } => "notice-claim-created",
            Self::ClaimCreated { waiting: false, .. } => "notice-claim-created-settled",
            Self::ReleaseRequested { .. } => "notice-claim-released",
        }
    }

    pub fn message(&self, locale: Locale) -> String {
        match self {
            Self::UserDeleted { name }
            | Self::ClaimCreated { name, .. }
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

/// The OIDC authorization page: the request's parameters, carried as hidden fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizeView {
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
    /// The roles the create form offers, as checkboxes.
    pub role_choices: Vec<String>,
    /// Whether the table has a Tenant column: tenants are configured, or a listed user
    /// belongs to one (an always-empty column only puzzles).
    pub show_tenant: bool,
}

/// One user's page, with a generated password to show once after create or reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserView {
    pub user: UserRow,
    pub shown_password: Option<String>,
    /// The roles the profile form offers, as checkboxes: those that exist and those the
    /// user holds.
    pub role_choices: Vec<String>,
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
