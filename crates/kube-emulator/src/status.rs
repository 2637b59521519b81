//! `metav1.Status` errors, as the Kubernetes API returns them.
//!
//! Shapes and reasons follow k8s.io/apimachinery/pkg/api/errors
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#api-errors>).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One field problem inside an `Invalid` status (`details.causes[]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, …
    pub(crate) reason: String,
    /// Human-readable text, e.g. `Invalid value: "x": must be an integer`.
    pub(crate) message: String,
    /// Dotted field path, e.g. `spec.ttlSeconds`.
    pub(crate) field: String,
}

/// An API error rendered as a `Status` object with the HTTP code of its `reason`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code (404, 409, 422, …).
    pub code: u16,
    /// `metav1.StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// The full message as the real server writes it.
    pub(crate) message: String,
    /// `details.group`, `details.kind` (the resource plural, as the server does), `details.name`.
    pub(crate) details: Option<Box<(String, String, String)>>,
    /// `details.causes`.
    pub(crate) causes: Vec<Cause>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `<plural>.<group>` or `<plural>` for the core group, as used in messages.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
        }
    }

    fn with_details(mut self, group: &str, plural: &str, name: &str) -> Self {
        self.details = Some(Box::new((
            group.to_string(),
            plural.to_string(),
            name.to_string(),
        )));
        self
    }

    /// 404 `NotFound`: `<resource> "<name>" not found`.
    pub(crate) fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 409 `AlreadyExists`.
    pub(crate) fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 409 `Conflict` for a stale `resourceVersion` (optimistic concurrency).
    pub(crate) fn conflict(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 409 `Conflict` with a custom explanation (e.g. a UID precondition).
    pub(crate) fn conflict_msg(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 422 `Invalid`: `<Kind>.<group> "<name>" is invalid: <causes joined>`.
    pub(crate) fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let summary: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
        );
        e.details = Some(Box::new((
            group.to_string(),
            kind.to_string(),
            name.to_string(),
        )));
        e.causes = causes;
        e
    }

    /// 400 `BadRequest`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`.
    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `Forbidden` with the authorizer's message already formatted.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 405 `MethodNotAllowed`.
    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 415 `UnsupportedMediaType`.
    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {content_type}"
            ),
        )
    }

    /// 410 `Expired` for a watch or list from a compacted resourceVersion.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 404 for an unknown URL (no such resource type).
    pub(crate) fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 500 `InternalError`.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// Custom code/reason (used by admission policies).
    pub(crate) fn custom(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(code, reason, message)
    }

    /// The `Status` object (`kind: Status, apiVersion: v1`).
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.details.is_some() || !self.causes.is_empty() {
            let mut details = serde_json::Map::new();
            if let Some((group, kind, name)) = self.details.as_deref() {
                if !name.is_empty() {
                    details.insert("name".into(), json!(name));
                }
                if !group.is_empty() {
                    details.insert("group".into(), json!(group));
                }
                details.insert("kind".into(), json!(kind));
            }
            if !self.causes.is_empty() {
                details.insert(
                    "causes".into(),
                    Value::Array(
                        self.causes
                            .iter()
                            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                            .collect(),
                    ),
                );
            }
            status["details"] = Value::Object(details);
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.to_status())
    }
}

/// A JSON response with `Content-Type: application/json`.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(bytes))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Result alias for API operations.
pub type ApiResult<T> = Result<T, ApiError>;
