//! The HTTP client: reqwest with rustls, timeouts, no redirects, an optional extra trust root,
//! and an adapter so `openidconnect` sends its requests through it.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use openidconnect::{AsyncHttpClient, HttpRequest, HttpResponse};

use crate::error::{Error, Result, chain};
use crate::urls::check_url;

/// Time allowed to open a TCP + TLS connection, in seconds.
pub const CONNECT_TIMEOUT_SECS: u64 = 10;
/// Time allowed for a whole request (connect, send, read the body), in seconds.
pub const REQUEST_TIMEOUT_SECS: u64 = 30;

/// Builds the client used for every call to the issuer.
///
/// * TLS by rustls with the platform verifier; `ca_file` (PEM, one or more certificates) is
///   added as an extra trust root, merged with the system ones.
/// * Redirects are not followed (an OAuth client must not be steered elsewhere).
/// * Connect timeout [`CONNECT_TIMEOUT_SECS`], total timeout [`REQUEST_TIMEOUT_SECS`].
///
/// # Errors
/// [`Error::Io`] if `ca_file` cannot be read, [`Error::Tls`] if it holds no valid certificate
/// or the client cannot be built.
pub fn build_client(ca_file: Option<&Path>) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("banlieue/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECS))
        .timeout(Duration::from_secs(REQUEST_TIMEOUT_SECS));
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| Error::Tls(format!("{}: {}", path.display(), chain(&e))))?;
        if certs.is_empty() {
            return Err(Error::Tls(format!(
                "{}: no PEM certificate found",
                path.display()
            )));
        }
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(|e| Error::Tls(chain(&e)))
}

/// Failure of one HTTP exchange made for `openidconnect`.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL breaks the transport rule ([`check_url`]).
    #[error("{0}")]
    Refused(String),
    /// reqwest failed (connect, TLS, timeout, body).
    #[error(transparent)]
    Reqwest(#[from] reqwest::Error),
    /// The response could not be turned back into an `http::Response`.
    #[error(transparent)]
    Http(#[from] http::Error),
}

/// Adapter implementing `openidconnect`'s [`AsyncHttpClient`] over our reqwest client. Every
/// request URL (including endpoints taken from discovery) is checked with [`check_url`] first.
#[derive(Clone, Debug)]
pub struct OidcHttp(pub reqwest::Client);

impl<'c> AsyncHttpClient<'c> for OidcHttp {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            check_url(&request.uri().to_string()).map_err(|e| HttpError::Refused(e.to_string()))?;
            let request = reqwest::Request::try_from(request)?;
            let response = self.0.execute(request).await?;
            let mut builder = http::Response::builder()
                .status(response.status())
                .version(response.version());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            let body = response.bytes().await?;
            Ok(builder.body(body.to_vec())?)
        })
    }
}
