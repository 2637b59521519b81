//! Where the ConsoleTenant documents come from (`BANLIEUE_TENANTS_SOURCE`): the API
//! server, listing the ConsoleTenants of the console's namespace, or a file.

use std::path::PathBuf;

use cluster::crd::ConsoleTenant;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

use crate::document::{self, API_VERSION, DocumentError, KIND, RawDocument};

/// A place to read tenants from.
#[derive(Clone)]
pub enum TenantSource {
    /// The ConsoleTenants of `namespace`, listed through the API server with `client`
    /// (the console's own identity).
    Kubernetes {
        /// The console's client.
        client: kube::Client,
        /// The console's namespace.
        namespace: String,
    },
    /// A YAML or JSON stream of ConsoleTenant documents, or of lists of them.
    File {
        /// The file (`BANLIEUE_TENANTS_FILE`).
        path: PathBuf,
    },
}

/// Why a source could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read the tenants file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The API server did not answer the list, or refused it.
    #[error("cannot list the ConsoleTenants of namespace {namespace}: {source}")]
    Kubernetes {
        /// The namespace listed.
        namespace: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The file is not a YAML stream.
    #[error(transparent)]
    Stream(#[from] DocumentError),
}

impl TenantSource {
    /// What this source is, for messages: `the ConsoleTenants of namespace banlieue-system`
    /// or `the tenants file /etc/banlieue/tenants.yaml`.
    pub fn describe(&self) -> String {
        match self {
            Self::Kubernetes { namespace, .. } => {
                format!("the ConsoleTenants of namespace {namespace}")
            }
            Self::File { path } => format!("the tenants file {}", path.display()),
        }
    }

    /// Every document the source holds now, unchecked.
    ///
    /// Errors: [`ReadError`].
    pub async fn read(&self) -> Result<Vec<RawDocument>, ReadError> {
        match self {
            Self::File { path } => {
                let text =
                    tokio::fs::read_to_string(path)
                        .await
                        .map_err(|source| ReadError::File {
                            path: path.clone(),
                            source,
                        })?;
                Ok(document::parse_stream(&path.display().to_string(), &text)?)
            }
            Self::Kubernetes { client, namespace } => {
                // Listed as plain JSON, so the documents go through the very checks a file's
                // do (the API server has applied the CRD's schema already).
                let api: Api<DynamicObject> = Api::namespaced_with(
                    client.clone(),
                    namespace,
                    &ApiResource::erase::<ConsoleTenant>(&()),
                );
                let list = api.list(&ListParams::default()).await.map_err(|source| {
                    ReadError::Kubernetes {
                        namespace: namespace.clone(),
                        source,
                    }
                })?;
                Ok(list
                    .items
                    .into_iter()
                    .map(|object| {
                        let mut content =
                            serde_json::to_value(object).expect("an object serializes");
                        // List items carry their type; set it anyway, as the list's.
                        content["apiVersion"] = API_VERSION.into();
                        content["kind"] = KIND.into();
                        let name = content
                            .pointer("/metadata/name")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or("?");
                        RawDocument {
                            label: format!("ConsoleTenant {namespace}/{name}"),
                            content,
                        }
                    })
                    .collect())
            }
        }
    }
}
