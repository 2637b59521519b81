//! The crate's error type.

/// What can go wrong in the controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed (transport, authorization, or an unexpected status).
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// No usable cluster configuration (kubeconfig or in-cluster).
    #[error("cannot configure the Kubernetes client: {0}")]
    Config(String),
    /// A banlieue CRD is not installed in the cluster.
    #[error(
        "the CustomResourceDefinition {crd} is not installed; install the CRDs with \
         `kubectl apply -f charts/banlieue-console/crds/` (or the Helm chart) and start again"
    )]
    CrdMissing {
        /// `<plural>.banlieue.io`.
        crd: String,
    },
    /// A manifest of the chart could not be read or is of a kind the API server does not
    /// serve.
    #[error("chart manifest {name}: {reason}")]
    Manifest {
        /// The object's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The API server did not answer its readiness check with 200 in time
    /// ([`crate::Impersonation::check_ready`]).
    #[error("the API server is not ready: {0}")]
    Unready(String),
    /// Leader election failed (the Lease could not be read or written).
    #[error("leader election: {0}")]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
    /// The leader-election task ended while the controllers still needed it.
    #[error("leader election stopped unexpectedly")]
    LeaseLost,
    /// The simulated provider's EK CA or an EK certificate could not be made or read.
    #[error("simulated EK certificate authority: {0}")]
    Attestation(String),
    /// An object from the API server lacked a field the API always sets.
    #[error("{kind} object without metadata.{field}")]
    MissingField {
        /// Kind of the object.
        kind: &'static str,
        /// The missing field.
        field: &'static str,
    },
}

/// `true` for an API error with this HTTP status code.
pub(crate) fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}
