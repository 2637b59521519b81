//! Between HTTP and the use cases ([`services::Console`]): the principal of a request, and
//! the one mapping of a [`ServiceError`] to what the person sees (an internal failure is
//! logged once, under the correlation id the page shows).

use app::{AppError, PageState};
use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;
use services::{Authenticator, Decider, Principal, ServiceError};

use crate::middleware::{CurrentUser, client_ip, correlation_id, error_page, look_of};

/// What the person sees of `error`; `invalid` is the form's own message for a command
/// the console refused as invalid. Kubernetes' refusals keep the API server's message.
pub fn app_error(error: ServiceError, invalid: AppError) -> AppError {
    let kubernetes = |code: u16, message: String| AppError::Kubernetes { code, message };
    match error {
        ServiceError::Forbidden {
            by: Decider::Kubernetes,
            reason,
        } => kubernetes(403, reason),
        ServiceError::Forbidden { .. } => AppError::Forbidden,
        ServiceError::NotFound {
            by: Decider::Kubernetes,
            reason,
        } => kubernetes(404, reason),
        ServiceError::NotFound { .. } => AppError::NotFound,
        ServiceError::Conflict {
            by: Decider::Kubernetes,
            reason,
        } => kubernetes(409, reason),
        ServiceError::Conflict { .. } => AppError::Conflict,
        ServiceError::Invalid {
            by: Decider::Kubernetes,
            reason,
            ..
        } => kubernetes(422, reason),
        ServiceError::Invalid { .. } => invalid,
        ServiceError::NoCluster => AppError::NoClusterConfigured,
        ServiceError::Unavailable { source } => {
            let correlation_id = correlation_id();
            tracing::error!(%correlation_id, error = %source, "the cluster is unavailable");
            AppError::ClusterUnavailable { correlation_id }
        }
    }
}

/// The signed-in person of a request, for handlers behind the access rules; a request
/// without one is refused with the console's "Sign in to continue" page (401).
pub struct Who(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for Who {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(CurrentUser(user)) = parts.extensions.get::<CurrentUser>().cloned() else {
            return Err(error_page(look_of(&parts.headers), &AppError::NotSignedIn));
        };
        let address = client_ip(&parts.extensions);
        Ok(Self(Principal::local(
            user,
            Authenticator::Session,
            address,
        )))
    }
}

/// The request's session, when the session layer gave it one (every page route has one):
/// where a refused form's feedback waits for its page ([`crate::pages::refused`]).
pub struct PageSession(pub Option<tower_sessions::Session>);

impl<S: Send + Sync> FromRequestParts<S> for PageSession {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts.extensions.get::<tower_sessions::Session>().cloned(),
        ))
    }
}

/// The page state the middleware prepared for this request (language, who is signed
/// in, the page the path names).
pub struct PageContext(pub PageState);

impl<S: Send + Sync> FromRequestParts<S> for PageContext {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts
                .extensions
                .get::<PageState>()
                .cloned()
                .unwrap_or_default(),
        ))
    }
}
