//! Between HTTP and the use cases ([`services::Console`]): the principal of a request, and
//! the one mapping of a [`ServiceError`] to what the person sees (an internal failure is
//! logged once, under the correlation id the page shows).

use app::AppError;
use axum::extract::Request;
use services::{Authenticator, Decider, Principal, ServiceError};

use crate::middleware::{CurrentUser, client_ip, correlation_id};

/// The signed-in person of a request behind the access rules (which admit only signed-in
/// people to the handlers that call this), authenticated by their session.
pub fn principal(request: &Request) -> Principal {
    let user = request
        .extensions()
        .get::<CurrentUser>()
        .map(|c| c.0.clone())
        .expect("the access rules admit only signed-in users here");
    Principal::local(
        user,
        Authenticator::Session,
        client_ip(request.extensions()),
    )
}

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
            tracing::error!(%correlation_id, error = %source, "request failed");
            AppError::Internal { correlation_id }
        }
    }
}
