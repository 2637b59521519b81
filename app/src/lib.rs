//! banlieue-console's user interface: routes, pages and components, rendered on the server
//! and hydrated in the browser. Every form is a plain HTML form that works without
//! JavaScript; the server answers it with a redirect or with the page and its feedback.

pub mod assets;
mod components;
mod error;
pub mod i18n;
mod pages;
pub mod security;
mod state;
pub mod theme;

use codee::binary::PostcardCodec;
use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};

pub use banlieue_domain::views::{
    AccessRow, ClaimRow, ClaimView, DashboardView, EndorsementCertificateView, EndorsementTrust,
    EndorsementVerdict, PoolForm, PoolRow, PoolStall, PoolsView, RoleRow, RolesView,
};
pub use error::{AppError, AuthorizationProblem};
pub use i18n::Locale;
pub use state::{
    AccountView, AuditFilter, AuditRow, AuditView, AuthorizeView, FormFeedback, Look, Navigation,
    Notice, Page, PageData, PageState, SessionRow, UserRow, UserView, UsersView,
};
pub use theme::Theme;

/// Paths of the pages, shared with the server's access rules and redirects.
pub mod paths {
    pub const DASHBOARD: &str = "/";
    pub const SIGN_IN: &str = "/sign-in";
    pub const CHANGE_PASSWORD: &str = "/change-password";
    pub const SIGN_OUT: &str = "/sign-out";
    pub const LOCALE: &str = "/locale";
    /// The theme switch (form post).
    pub const THEME: &str = "/theme";
    pub const USERS: &str = "/users";
    pub const ACCOUNT: &str = "/account";
    pub const AUDIT: &str = "/audit";
    pub const ROLES: &str = "/roles";
    pub const POOLS: &str = "/pools";
    /// The OIDC authorization endpoint (its pages are the console's).
    pub const AUTHORIZE: &str = "/oidc/authorize";
    /// The kubeconfig download.
    pub const KUBECONFIG: &str = "/kubeconfig";
    /// Claiming a sandbox (form post).
    pub const CLAIMS: &str = "/claims";
    /// The dashboard's live snapshots (server-sent events).
    pub const DASHBOARD_EVENTS: &str = "/events/dashboard";

    /// Releasing one claim (form post).
    pub fn release(namespace: &str, name: &str) -> String {
        format!("{CLAIMS}/{namespace}/{name}/release")
    }

    /// The page of one claim.
    pub fn claim(namespace: &str, name: &str) -> String {
        format!("{CLAIMS}/{namespace}/{name}")
    }

    /// One claim's live snapshots (server-sent events).
    pub fn claim_events(namespace: &str, name: &str) -> String {
        format!("/events{CLAIMS}/{namespace}/{name}")
    }

    /// `(namespace, name)` of a claim page's path; `None` for any other path.
    pub fn parse_claim(path: &str) -> Option<(&str, &str)> {
        let (namespace, name) = path
            .strip_prefix(CLAIMS)?
            .strip_prefix('/')?
            .split_once('/')?;
        let segment = |s: &str| !s.is_empty() && !s.contains('/');
        (segment(namespace) && segment(name)).then_some((namespace, name))
    }

    /// The page of one user.
    pub fn user(name: &str) -> String {
        format!("{USERS}/{name}")
    }
}

/// The server-sent event that ends a live stream because the session it served ended
/// (signed out elsewhere, disabled, a password reset): the page then says so and offers
/// to sign in again, instead of reconnecting.
pub const SESSION_ENDED_EVENT: &str = "session-ended";

/// The HTML document around the app. Server-only: it also sets the page's
/// Content-Security-Policy with the nonce Leptos gives its inline scripts.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let state = use_context::<PageState>().unwrap_or_default();
    #[cfg(feature = "ssr")]
    security::set_page_csp(state.data.form_action_origin());
    view! {
        <!DOCTYPE html>
        <html lang=state.locale.tag() class=state.theme.class()>
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="color-scheme" content=state.theme.color_scheme() />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <link rel="stylesheet" href=assets::stylesheet() />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body class="min-h-screen bg-slate-50 text-slate-900 antialiased dark:bg-slate-950 dark:text-slate-100">
                <App />
            </body>
        </html>
    }
}

/// The application: the page state shared from the server, then the page it names.
/// There is no client-side router: every navigation is a request the server answers.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Postcard, not the default JSON: the browser decodes every page's state, and postcard's
    // positional decoders are a fraction of the wasm that JSON's field-matching ones take.
    let state = SharedValue::<PageState, PostcardCodec>::new_with_encoding(|| {
        use_context::<PageState>().unwrap_or_default()
    })
    .into_inner();
    let locale = state.locale;
    let page = state.page;
    provide_context(state);
    components::Browser::provide();
    view! {
        <Title text=locale.t("app-name") />
        {match page {
            Page::Dashboard => view! { <pages::Dashboard /> }.into_any(),
            Page::SignIn => view! { <pages::SignIn /> }.into_any(),
            Page::ChangePassword => view! { <pages::ChangePassword /> }.into_any(),
            Page::Users => view! { <pages::Users /> }.into_any(),
            Page::User => view! { <pages::UserDetail /> }.into_any(),
            Page::Account => view! { <pages::Account /> }.into_any(),
            Page::Audit => view! { <pages::Audit /> }.into_any(),
            Page::Authorize => view! { <pages::Authorize /> }.into_any(),
            Page::Roles => view! { <pages::Roles /> }.into_any(),
            Page::Pools => view! { <pages::Pools /> }.into_any(),
            Page::Claim => view! { <pages::ClaimDetail /> }.into_any(),
            Page::NotFound => view! { <pages::NotFound /> }.into_any(),
        }}
    }
}

/// The page state of this request (always present inside [`App`]).
pub(crate) fn page_state() -> PageState {
    expect_context::<PageState>()
}
