//! The router: every route and layer of the console, built by one function.

use std::sync::Arc;

use app::{App, paths, shell};
use axum::Router;
use axum::extract::FromRef;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use banlieue_identity::Accounts;
use banlieue_store::SessionBackend;
use leptos::prelude::LeptosOptions;
use leptos_axum::{LeptosRoutes, generate_route_list};

use crate::config::Config;
use crate::{handlers, middleware, pages, session};

/// What every handler may use.
#[derive(Clone)]
pub struct AppState {
    pub accounts: Arc<Accounts>,
    pub config: Arc<Config>,
    pub leptos: LeptosOptions,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

/// Builds the console's HTTP surface. Layers, outermost first: security headers,
/// same-origin check, session, session user + access rules.
pub fn router(state: AppState, sessions: SessionBackend) -> Router {
    let routes = generate_route_list(App);
    let leptos = state.leptos.clone();
    Router::new()
        .route(paths::SIGN_IN, post(handlers::sign_in))
        .route(paths::CHANGE_PASSWORD, post(handlers::change_password))
        .route(paths::SIGN_OUT, post(handlers::sign_out))
        .route(paths::LOCALE, post(handlers::set_locale))
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .leptos_routes_with_context(&state, routes, pages::provide_page_state, move || {
            shell(leptos.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(pages::provide_page_state, shell))
        .layer(from_fn_with_state(state.clone(), middleware::session_user))
        .layer(session::layer(sessions, state.config.https))
        .layer(from_fn_with_state(state.clone(), middleware::same_origin))
        .layer(from_fn_with_state(
            state.clone(),
            middleware::security_headers,
        ))
        .with_state(state)
}
