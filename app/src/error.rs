//! The errors a person can see: each maps to one Fluent message and one HTTP status.

use serde::{Deserialize, Serialize};

use crate::i18n::Locale;

/// `text` for HTML text and double-quoted attribute values.
fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A user-facing error. Carries no internals: a server fault shows only a correlation
/// id that also appears in the server log next to the full error chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppError {
    /// Wrong password, unknown user or disabled user: deliberately indistinguishable.
    InvalidCredentials,
    /// Too many failures from this user name or address (RFC 6585 §4).
    Throttled {
        retry_after_secs: u64,
    },
    /// Too many password checks are waiting already; nothing was checked (RFC 9110
    /// §15.6.4).
    Busy {
        retry_after_secs: u64,
    },
    PasswordTooLong,
    PasswordTooShort,
    PasswordsDiffer,
    WrongCurrentPassword,
    PasswordUnchanged,
    MissingUserName,
    /// The form body was not `application/x-www-form-urlencoded` UTF-8.
    InvalidForm,
    RequestTooLarge,
    /// A state-changing request without a same-origin `Origin` / `Sec-Fetch-Site`.
    CrossSite,
    NotSignedIn,
    MustChangePassword,
    /// The signed-in person lacks the right (e.g. not an admin).
    Forbidden,
    NotFound,
    InvalidUserName,
    InvalidRoles,
    RoleNotHeld {
        role: String,
    },
    FieldTooLong,
    NameTaken,
    /// Optimistic concurrency: someone else changed the record meanwhile.
    Conflict,
    /// A new custom role's name is taken (editing it is another form).
    RoleExists,
    /// The custom role being edited changed since the edit began.
    RoleChanged,
    LastAdmin,
    /// The typed confirmation did not name the target.
    ConfirmationMismatch,
    InvalidDate,
    /// Display name or e-mail with an invisible or reordering character (controls, zero-width
    /// and bidirectional format characters, line separators).
    HiddenCharacters,
    /// An e-mail that is not an address such as `name@example.org`.
    InvalidEmail,
    /// A GET of an address that only takes form posts (e.g. reloading an action).
    MethodNotAllowed,
    /// An OIDC authorization request that can't be sent back to its client (unknown
    /// client, unregistered redirect URI, malformed state), so the person is told instead
    /// (RFC 6749 §4.1.2.1).
    InvalidAuthorizationRequest {
        problem: AuthorizationProblem,
    },
    /// The kubeconfig download when the console knows no cluster server.
    NoClusterConfigured,
    /// Kubernetes refused or failed a request made as the person; `message` is the API
    /// server's own explanation (`Status.message`), e.g. the RBAC or admission reason.
    Kubernetes {
        code: u16,
        message: String,
    },
    /// A claim form with an unknown pool or a lifetime not offered.
    InvalidClaim,
    /// A custom-role form with no permission ticked, or one a custom role may not grant.
    InvalidRole,
    /// A custom-role name that is malformed or a built-in role's; the message states the
    /// rule ([`banlieue_domain::RoleName`]).
    InvalidRoleName,
    /// A pool form with a bad name, sizes or template.
    InvalidPool,
    /// The cluster could not be reached or did not answer in time (transport, TLS, the
    /// request timeout): the person may try again; the log has the cause under the
    /// correlation id.
    ClusterUnavailable {
        correlation_id: String,
    },
    Internal {
        correlation_id: String,
    },
}

/// Why an authorization request is shown instead of answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthorizationProblem {
    UnknownClient,
    UnregisteredRedirectUri,
    MalformedState,
}

impl AuthorizationProblem {
    pub fn fluent_key(self) -> &'static str {
        match self {
            Self::UnknownClient => "error-authorize-unknown-client",
            Self::UnregisteredRedirectUri => "error-authorize-redirect",
            Self::MalformedState => "error-authorize-malformed-state",
        }
    }
}

impl AppError {
    /// The whole HTML document of a page that is only this error, in the console's look
    /// (the person's language, and the theme they chose, as the pages have it), with a
    /// link onward: to sign in when that is what is missing, to the password change while
    /// it is due, else to the dashboard. For answers given before (or instead of) a page:
    /// refused access, unreadable forms, wrong methods.
    pub fn document(&self, look: crate::Look) -> String {
        let locale = look.locale;
        let (onward, link) = match self {
            Self::NotSignedIn => (crate::paths::SIGN_IN, "error-page-sign-in"),
            Self::MustChangePassword => {
                (crate::paths::CHANGE_PASSWORD, "error-page-change-password")
            }
            _ => (crate::paths::DASHBOARD, "not-found-home"),
        };
        let title = escape_html(&locale.t("app-name"));
        let message = escape_html(&self.message(locale));
        let link = escape_html(&locale.t(link));
        format!(
            "<!DOCTYPE html><html lang=\"{lang}\" class=\"{theme}\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta name=\"color-scheme\" content=\"{color_scheme}\">\
             <link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">\
             <link rel=\"stylesheet\" href=\"{stylesheet}\"><title>{title}</title></head>\
             <body class=\"min-h-screen bg-slate-50 text-slate-900 antialiased dark:bg-slate-950 dark:text-slate-100\">\
             <main class=\"flex min-h-screen flex-col items-center justify-center gap-3 px-4 text-center\">\
             <h1 class=\"text-2xl font-semibold\">{title}</h1>\
             <p role=\"alert\" class=\"text-slate-600 dark:text-slate-300\">{message}</p>\
             <a href=\"{onward}\" class=\"text-indigo-600 hover:underline dark:text-indigo-400\">{link}</a>\
             </main></body></html>",
            lang = locale.tag(),
            theme = look.theme.class(),
            color_scheme = look.theme.color_scheme(),
            stylesheet = crate::assets::stylesheet(),
        )
    }

    /// The Fluent message id.
    pub fn fluent_key(&self) -> &'static str {
        match self {
            Self::InvalidCredentials => "error-invalid-credentials",
            Self::Throttled { .. } => "error-throttled",
            Self::Busy { .. } => "error-busy",
            Self::PasswordTooLong => "error-password-too-long",
            Self::PasswordTooShort => "error-password-too-short",
            Self::PasswordsDiffer => "error-passwords-differ",
            Self::WrongCurrentPassword => "error-wrong-current-password",
            Self::PasswordUnchanged => "error-password-unchanged",
            Self::RoleExists => "error-role-exists",
            Self::RoleChanged => "error-role-changed",
            Self::HiddenCharacters => "error-hidden-characters",
            Self::InvalidEmail => "error-invalid-email",
            Self::MethodNotAllowed => "error-method-not-allowed",
            Self::MissingUserName => "error-missing-user-name",
            Self::InvalidForm => "error-invalid-form",
            Self::RequestTooLarge => "error-request-too-large",
            Self::CrossSite => "error-cross-site",
            Self::NotSignedIn => "error-not-signed-in",
            Self::MustChangePassword => "error-must-change-password",
            Self::Forbidden => "error-forbidden",
            Self::NotFound => "error-not-found",
            Self::InvalidUserName => "error-invalid-user-name",
            Self::InvalidRoles => "error-invalid-roles",
            Self::RoleNotHeld { .. } => "error-role-not-held",
            Self::FieldTooLong => "error-field-too-long",
            Self::NameTaken => "error-name-taken",
            Self::Conflict => "error-conflict",
            Self::LastAdmin => "error-last-admin",
            Self::ConfirmationMismatch => "error-confirmation-mismatch",
            Self::InvalidDate => "error-invalid-date",
            Self::InvalidAuthorizationRequest { .. } => "error-invalid-authorization-request",
            Self::NoClusterConfigured => "error-no-cluster-configured",
            Self::Kubernetes { .. } => "error-kubernetes",
            Self::InvalidClaim => "error-invalid-claim",
            Self::InvalidRole => "error-invalid-role",
            Self::InvalidRoleName => "error-invalid-role-name",
            Self::InvalidPool => "error-invalid-pool",
            Self::ClusterUnavailable { .. } => "error-cluster-unavailable",
            Self::Internal { .. } => "error-internal",
        }
    }

    /// The HTTP status of a response that carries this error. A refused sign-in or
    /// password form is re-rendered with 200, like any form showing its result.
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidCredentials
            | Self::PasswordTooLong
            | Self::PasswordTooShort
            | Self::PasswordsDiffer
            | Self::WrongCurrentPassword
            | Self::PasswordUnchanged => 200,
            Self::MissingUserName
            | Self::InvalidForm
            | Self::InvalidUserName
            | Self::InvalidRoles
            | Self::FieldTooLong
            | Self::ConfirmationMismatch
            | Self::InvalidDate
            | Self::HiddenCharacters
            | Self::InvalidEmail
            | Self::InvalidAuthorizationRequest { .. }
            | Self::InvalidClaim
            | Self::InvalidRole
            | Self::InvalidRoleName
            | Self::InvalidPool => 400,
            Self::Kubernetes { code, .. } if (400..600).contains(code) => *code,
            Self::Kubernetes { .. } => 502,
            Self::MethodNotAllowed => 405,
            Self::Forbidden | Self::RoleNotHeld { .. } | Self::LastAdmin => 403,
            Self::NotFound | Self::NoClusterConfigured => 404,
            Self::NameTaken | Self::Conflict | Self::RoleExists | Self::RoleChanged => 409,
            Self::NotSignedIn => 401,
            Self::CrossSite | Self::MustChangePassword => 403,
            Self::RequestTooLarge => 413,
            Self::Throttled { .. } => 429,
            Self::Busy { .. } | Self::ClusterUnavailable { .. } => 503,
            Self::Internal { .. } => 500,
        }
    }

    /// The translated message.
    pub fn message(&self, locale: Locale) -> String {
        match self {
            Self::Throttled { retry_after_secs } | Self::Busy { retry_after_secs } => locale
                .t_with(
                    self.fluent_key(),
                    &[("seconds", retry_after_secs.to_string())],
                ),
            Self::Internal { correlation_id } | Self::ClusterUnavailable { correlation_id } => {
                locale.t_with(self.fluent_key(), &[("reference", correlation_id.clone())])
            }
            Self::RoleNotHeld { role } => {
                locale.t_with(self.fluent_key(), &[("role", role.clone())])
            }
            Self::Kubernetes { message, .. } => {
                locale.t_with(self.fluent_key(), &[("message", message.clone())])
            }
            Self::InvalidAuthorizationRequest { problem } => locale.t_with(
                self.fluent_key(),
                &[("reason", locale.t(problem.fluent_key()))],
            ),
            _ => locale.t(self.fluent_key()),
        }
    }

    /// Every variant once, for tests that check translations exist.
    pub fn examples() -> Vec<AppError> {
        vec![
            Self::InvalidCredentials,
            Self::Throttled {
                retry_after_secs: 1,
            },
            Self::Busy {
                retry_after_secs: 1,
            },
            Self::PasswordTooLong,
            Self::PasswordTooShort,
            Self::PasswordsDiffer,
            Self::WrongCurrentPassword,
            Self::MissingUserName,
            Self::InvalidForm,
            Self::RequestTooLarge,
            Self::CrossSite,
            Self::NotSignedIn,
            Self::MustChangePassword,
            Self::Forbidden,
            Self::NotFound,
            Self::InvalidUserName,
            Self::InvalidRoles,
            Self::RoleNotHeld { role: "x".into() },
            Self::FieldTooLong,
            Self::NameTaken,
            Self::Conflict,
            Self::LastAdmin,
            Self::ConfirmationMismatch,
            Self::InvalidDate,
            Self::PasswordUnchanged,
            Self::HiddenCharacters,
            Self::InvalidEmail,
            Self::RoleExists,
            Self::RoleChanged,
            Self::MethodNotAllowed,
            Self::InvalidAuthorizationRequest {
                problem: AuthorizationProblem::UnknownClient,
            },
            Self::InvalidAuthorizationRequest {
                problem: AuthorizationProblem::UnregisteredRedirectUri,
            },
            Self::InvalidAuthorizationRequest {
                problem: AuthorizationProblem::MalformedState,
            },
            Self::NoClusterConfigured,
            Self::Kubernetes {
                code: 403,
                message: "x".into(),
            },
            Self::InvalidClaim,
            Self::InvalidRole,
            Self::InvalidRoleName,
            Self::InvalidPool,
            Self::Internal {
                correlation_id: "x".into(),
            },
        ]
    }
}
