//! The routers: every route and layer of the console, built by one function, and the
//! metrics listener's one route.

use std::sync::Arc;

use app::{paths, shell};
use axum::Router;
use axum::extract::{FromRef, Path, Request, State};
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use banlieue_identity::Accounts;
use banlieue_identity::oidc::{Issuer, endpoints};
use banlieue_store::SessionBackend;
use leptos::prelude::LeptosOptions;
use prometheus_client::registry::Registry;

use crate::admin::UserAction;
use crate::config::Config;
use crate::{
    account, admin, assets, claims, handlers, middleware, oidc, pages, pools, roles, session,
};

/// What every handler may use.
#[derive(Clone)]
pub struct AppState {
    pub accounts: Arc<Accounts>,
    pub issuer: Arc<Issuer>,
    /// The use cases (claims, pools, roles, access), acting in the cluster as the
    /// signed-in person when one is configured.
    pub console: Arc<services::Console>,
    pub config: Arc<Config>,
    /// Shared: the state is cloned for every request by each layer that takes it.
    pub leptos: Arc<LeptosOptions>,
    /// The tenants' token verifier, when tenants are configured.
    pub tenants: Option<Arc<tenants::TenantVerifier>>,
    /// Cancelled when SIGTERM (or SIGINT) arrives: `/readyz` answers 503 from then on,
    /// while the console serves for [`Config::shutdown_delay`] before it stops.
    pub terminating: tokio_util::sync::CancellationToken,
    /// Cancelled when the console begins to shut down: long-lived responses (the live
    /// event streams) end then, so the graceful shutdown does not wait on open pages.
    pub stopping: tokio_util::sync::CancellationToken,
}

/// The use cases over `accounts` and `cluster`, with the console's issuer and claim
/// lifetimes from `config`.
pub fn use_cases(
    accounts: &Arc<Accounts>,
    cluster: Option<Arc<cluster::Impersonation>>,
    config: &Config,
) -> Arc<services::Console> {
    let settings = services::Settings {
        issuer: config.external_url.clone(),
        claim_ttl_choices: config.claim_ttl_choices.clone(),
    };
    Arc::new(services::Console::new(accounts.clone(), cluster, settings))
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        LeptosOptions::clone(&state.leptos)
    }
}

/// Builds the console's HTTP surface. Layers, outermost first: security headers,
/// same-origin check, session, session user + access rules. The site's files
/// ([`assets`]) are public and need no session: only the security headers wrap them.
pub fn router(state: AppState, sessions: SessionBackend) -> Router {
    // Leptos' renderer spawns on this executor; a second call is a harmless no-op.
    let _ = any_spawner::Executor::init_tokio();
    let user_action = |action: UserAction| {
        move |State(app): State<AppState>, Path(name): Path<String>, request: Request| {
            admin::user_action(app, name, action, request)
        }
    };
    let pages = Router::new()
        .route(paths::DASHBOARD, get(claims::dashboard_page))
        .route(paths::CLAIMS, post(claims::create_claim))
        .route(
            "/claims/{namespace}/{name}/release",
            post(claims::release_claim),
        )
        .route("/claims/{namespace}/{name}", get(claims::claim_page))
        .route(paths::DASHBOARD_EVENTS, get(claims::dashboard_events))
        .route(
            "/events/claims/{namespace}/{name}",
            get(claims::claim_events),
        )
        .route(paths::SIGN_IN, get(pages::page).post(handlers::sign_in))
        .route(
            paths::CHANGE_PASSWORD,
            get(pages::page).post(handlers::change_password),
        )
        .route(paths::SIGN_OUT, post(handlers::sign_out))
        .route(paths::LOCALE, post(handlers::set_locale))
        .route(paths::THEME, post(handlers::set_theme))
        .route(
            paths::USERS,
            get(admin::users_page).post(admin::create_user),
        )
        .route(
            "/users/{name}",
            get(admin::user_page).post(user_action(UserAction::Update)),
        )
        .route(
            "/users/{name}/disable",
            post(user_action(UserAction::Disable)),
        )
        .route(
            "/users/{name}/enable",
            post(user_action(UserAction::Enable)),
        )
        .route(
            "/users/{name}/password",
            post(user_action(UserAction::ResetPassword)),
        )
        .route(
            "/users/{name}/revoke-sessions",
            post(user_action(UserAction::RevokeSessions)),
        )
        .route(
            "/users/{name}/delete",
            post(user_action(UserAction::Delete)),
        )
        .route(paths::ACCOUNT, get(account::account_page))
        .route(
            "/account/sessions/{handle}/revoke",
            post(account::revoke_session),
        )
        .route("/account/sessions/revoke-all", post(account::revoke_all))
        .route(paths::AUDIT, get(admin::audit_page))
        .route(paths::ROLES, get(roles::roles_page).post(roles::save_role))
        .route("/roles/{name}/delete", post(roles::delete_role))
        .route(paths::POOLS, get(pools::pools_page).post(pools::save_pool))
        .route("/pools/{namespace}/{name}/delete", post(pools::delete_pool))
        .route(endpoints::DISCOVERY, get(oidc::discovery))
        .route(endpoints::JWKS, get(oidc::jwks))
        .route(
            endpoints::AUTHORIZE,
            get(oidc::authorize_page).post(oidc::authorize_submit),
        )
        .route(endpoints::TOKEN, post(oidc::token))
        .route(endpoints::REVOKE, post(oidc::revoke))
        .route(paths::KUBECONFIG, get(oidc::kubeconfig))
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(pages::provide_page_state, shell))
        .layer(from_fn_with_state(state.clone(), middleware::session_user))
        // Inside the session layer: a refused cross-site request is audited as the
        // person whose session it carried.
        .layer(from_fn_with_state(state.clone(), middleware::same_origin))
        .layer(session::layer(sessions, state.config.https));
    // The API beside the pages, not inside their layers: bearer tokens, never a session.
    Router::new()
        .nest(crate::api::PREFIX, crate::api::router())
        .merge(pages)
        .layer(from_fn_with_state(
            state.clone(),
            middleware::client_address_layer,
        ))
        .nest(assets::PREFIX, assets::router(&state.leptos))
        .layer(from_fn_with_state(
            state.clone(),
            middleware::security_headers,
        ))
        .with_state(state)
}

/// The metrics listener's surface (`--metrics-listen`): `GET /metrics` with `registry`
/// ([`crate::startup::metrics_registry`]), nothing else. No session, no page: it is on a
/// port of its own so that the chart's NetworkPolicy keeps it to the cluster network.
pub fn metrics_router(registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/metrics", get(handlers::metrics))
        .with_state(registry)
}
