//! The one error of the use cases: what a caller can act on, and who decided.

/// A boxed error kept as the cause of [`ServiceError::Unavailable`], for the log.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Who refused: the console's own rules, or Kubernetes (RBAC, admission, the API's
/// validation), whose `Status.message` is then the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// The console (its access rules or its validation of a command).
    Console,
    /// The API server.
    Kubernetes,
}

/// Why a use case did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Not allowed (HTTP 403); `reason` is Kubernetes' explanation when it decided.
    #[error("forbidden: {reason}")]
    Forbidden {
        /// Who refused.
        by: Decider,
        /// Why, in English (the API server's `Status.message` when `by` is Kubernetes).
        reason: String,
    },
    /// No such object, or not one the principal may see (HTTP 404).
    #[error("not found: {reason}")]
    NotFound {
        /// Who said so.
        by: Decider,
        /// What was missing.
        reason: String,
    },
    /// Someone else changed or made the object meanwhile (HTTP 409).
    #[error("conflict: {reason}")]
    Conflict {
        /// Who noticed.
        by: Decider,
        /// What conflicted.
        reason: String,
    },
    /// A field of the command is not acceptable (HTTP 400 from the console, 422 from
    /// Kubernetes).
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// Who refused.
        by: Decider,
        /// The command's field (or the object's field path, from Kubernetes).
        field: String,
        /// Why, in English.
        reason: String,
    },
    /// The console has no cluster configured.
    #[error("no Kubernetes cluster is configured")]
    NoCluster,
    /// The cluster or the store could not answer (transport, timeout, an unexpected
    /// status); the cause is for the log, never for the person.
    #[error("unavailable: {source}")]
    Unavailable {
        /// The underlying failure.
        #[source]
        source: BoxError,
    },
}

impl ServiceError {
    /// The console refuses a command's `field` for `reason`.
    pub fn invalid(field: &str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            by: Decider::Console,
            field: field.to_owned(),
            reason: reason.into(),
        }
    }

    /// The console's access rules refuse, for `reason`.
    pub fn forbidden(reason: impl Into<String>) -> Self {
        Self::Forbidden {
            by: Decider::Console,
            reason: reason.into(),
        }
    }

    /// The console knows no such object.
    pub fn not_found(reason: impl Into<String>) -> Self {
        Self::NotFound {
            by: Decider::Console,
            reason: reason.into(),
        }
    }

    /// A failure the person cannot act on.
    pub fn unavailable(source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            source: source.into(),
        }
    }

    /// The result code the audit log records for this refusal (`forbidden`,
    /// `not-found`, `conflict`, `invalid`, `no-cluster`, `unavailable`).
    pub fn audit_result(&self) -> &'static str {
        match self {
            Self::Forbidden { .. } => "forbidden",
            Self::NotFound { .. } => "not-found",
            Self::Conflict { .. } => "conflict",
            Self::Invalid { .. } => "invalid",
            Self::NoCluster => "no-cluster",
            Self::Unavailable { .. } => "unavailable",
        }
    }
}

impl From<kube::Error> for ServiceError {
    /// Kubernetes' answer: an API status keeps the API server's message and names it the
    /// decider; anything else (transport, TLS, decoding) is [`ServiceError::Unavailable`].
    fn from(error: kube::Error) -> Self {
        let kube::Error::Api(status) = &error else {
            return Self::unavailable(error);
        };
        let by = Decider::Kubernetes;
        let reason = status.message.clone();
        match status.code {
            401 | 403 => Self::Forbidden { by, reason },
            404 => Self::NotFound { by, reason },
            409 => Self::Conflict { by, reason },
            400 | 422 => Self::Invalid {
                by,
                field: status
                    .details
                    .as_ref()
                    .and_then(|d| d.causes.first())
                    .map(|c| c.field.clone())
                    .filter(|f| !f.is_empty())
                    .unwrap_or_else(|| "object".to_owned()),
                reason,
            },
            _ => Self::unavailable(error),
        }
    }
}

impl From<banlieue_store::StoreError> for ServiceError {
    fn from(error: banlieue_store::StoreError) -> Self {
        Self::unavailable(error)
    }
}

impl From<banlieue_identity::AdminError> for ServiceError {
    fn from(error: banlieue_identity::AdminError) -> Self {
        use banlieue_identity::AdminError;
        match error {
            AdminError::Forbidden => Self::forbidden("only admins may do this"),
            AdminError::NotFound => Self::not_found("no such user"),
            AdminError::Conflict => Self::Conflict {
                by: Decider::Console,
                reason: error.to_string(),
            },
            other => Self::unavailable(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        let mut status = kube::core::Status::failure(message, "Reason");
        status.code = code;
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn kubernetes_refusals_keep_their_reason_and_decider() {
        let forbidden = ServiceError::from(api(403, "RBAC: no"));
        assert!(matches!(
            forbidden,
            ServiceError::Forbidden { by: Decider::Kubernetes, ref reason } if reason == "RBAC: no"
        ));
        assert_eq!(
            ServiceError::from(api(404, "x")).audit_result(),
            "not-found"
        );
        assert_eq!(ServiceError::from(api(409, "x")).audit_result(), "conflict");
        assert_eq!(ServiceError::from(api(422, "x")).audit_result(), "invalid");
        assert_eq!(
            ServiceError::from(api(500, "x")).audit_result(),
            "unavailable"
        );
    }
}
