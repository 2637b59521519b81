//! Non-resource paths: discovery (`/api`, `/apis`, group and resource lists),
//! `/version` and OpenAPI v3, each authorized by RBAC's `nonResourceURLs`.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::json;

use super::state::AppState;
use crate::auth::UserInfo;
use crate::rbac::{self, Attributes};
use crate::status::{ApiError, ApiResult, json_response};

/// Answers a GET of a non-resource path.
pub(crate) fn non_resource(
    app: &Arc<AppState>,
    user: &UserInfo,
    method: &Method,
    path: &str,
) -> ApiResult<Response> {
    let attrs = Attributes {
        verb: method.as_str().to_lowercase(),
        path: path.to_string(),
        ..Attributes::default()
    };
    let store = app.lock();
    if !rbac::authorize(&store, user, &attrs).allowed {
        return Err(ApiError::forbidden(rbac::forbidden_message(user, &attrs)));
    }
    if method != Method::GET {
        return Err(ApiError::method_not_allowed(
            "only GET is served on this path",
        ));
    }
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let r = &store.registry;
    let body = match parts.as_slice() {
        ["version"] => json!({
            "major": "1", "minor": "32", "gitVersion": "v1.32.0-emulator", "gitCommit": "emulator",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23",
            "compiler": "gc", "platform": "linux/amd64"
        }),
        ["api"] => r.api_versions(&app.address),
        ["apis"] => r.api_group_list(),
        ["apis", g] => r.api_group(g).ok_or_else(ApiError::no_route)?,
        ["api", v] => r.api_resource_list("", v).ok_or_else(ApiError::no_route)?,
        ["apis", g, v] => r.api_resource_list(g, v).ok_or_else(ApiError::no_route)?,
        ["openapi", "v3"] => r.openapi_v3_index(),
        ["openapi", "v3", "api", v] => r.openapi_v3_doc("", v).ok_or_else(ApiError::no_route)?,
        ["openapi", "v3", "apis", g, v] => r.openapi_v3_doc(g, v).ok_or_else(ApiError::no_route)?,
        _ => return Err(ApiError::no_route()),
    };
    Ok(json_response(StatusCode::OK, &body))
}
