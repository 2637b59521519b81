//! HTTPS served by the console itself: the certificate and key from
//! `BANLIEUE_TLS_CERT_FILE` / `BANLIEUE_TLS_KEY_FILE`, reloaded when the files change, and
//! a listener that completes TLS handshakes beside the HTTP server.
//!
//! [`TlsFiles::load`] reads and checks a pair (PEM, the key matching the certificate);
//! [`CertResolver`] hands rustls the pair in force; [`TlsListener`] is what `axum::serve`
//! accepts connections from, and with [`TlsListener::with_reloading`] it reads the files
//! every few seconds, serving a new valid pair to new connections and keeping the
//! previous one (with a warning) when the files hold none.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How often [`TlsListener::with_reloading`] reads the files to see whether they changed.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// How long a client has to complete its TLS handshake before its connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate and key files (`BANLIEUE_TLS_CERT_FILE` / `BANLIEUE_TLS_KEY_FILE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the server certificate first, then any intermediates.
    pub cert_file: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, PKCS#1 RSA or SEC1 EC).
    pub key_file: PathBuf,
}

/// Why a certificate and key pair cannot be used. Each message names the variable and
/// the file, and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// The certificate file cannot be read or holds no usable certificate.
    #[error(
        "BANLIEUE_TLS_CERT_FILE / --tls-cert-file: cannot use {path}: {problem}; give a PEM file with the server certificate first, then its intermediates"
    )]
    Cert { path: String, problem: String },
    /// The key file cannot be read or holds no usable private key.
    #[error(
        "BANLIEUE_TLS_KEY_FILE / --tls-key-file: cannot use {path}: {problem}; give the PEM private key of the certificate (PKCS#8, RSA or EC)"
    )]
    Key { path: String, problem: String },
    /// The key is a valid key, but not the certificate's.
    #[error(
        "BANLIEUE_TLS_KEY_FILE / --tls-key-file: {key} is not the private key of the certificate in {cert} (BANLIEUE_TLS_CERT_FILE); give the key the certificate was issued for"
    )]
    Mismatch { cert: String, key: String },
}

impl TlsFiles {
    /// Reads both files and checks them: a certificate chain and a private key in PEM,
    /// the key matching the first certificate.
    ///
    /// Errors: [`TlsError`] naming the file that is wrong and why.
    pub fn load(&self) -> Result<Arc<CertifiedKey>, TlsError> {
        let (cert_pem, key_pem) = self.read();
        self.parse(&cert_pem, &key_pem)
    }

    fn read(&self) -> (std::io::Result<Vec<u8>>, std::io::Result<Vec<u8>>) {
        (
            std::fs::read(&self.cert_file),
            std::fs::read(&self.key_file),
        )
    }

    fn cert_error(&self, problem: impl Into<String>) -> TlsError {
        TlsError::Cert {
            path: self.cert_file.display().to_string(),
            problem: problem.into(),
        }
    }

    fn key_error(&self, problem: impl Into<String>) -> TlsError {
        TlsError::Key {
            path: self.key_file.display().to_string(),
            problem: problem.into(),
        }
    }

    fn parse(
        &self,
        cert_pem: &std::io::Result<Vec<u8>>,
        key_pem: &std::io::Result<Vec<u8>>,
    ) -> Result<Arc<CertifiedKey>, TlsError> {
        let cert_pem = cert_pem
            .as_ref()
            .map_err(|e| self.cert_error(format!("cannot read it: {e}")))?;
        let key_pem = key_pem
            .as_ref()
            .map_err(|e| self.key_error(format!("cannot read it: {e}")))?;
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.cert_error(pem_problem(&e)))?;
        if chain.is_empty() {
            return Err(self.cert_error("it holds no PEM certificate (BEGIN CERTIFICATE)"));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => self.key_error(
                "it holds no PEM private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
            ),
            e => self.key_error(pem_problem(&e)),
        })?;
        let key = provider()
            .key_provider
            .load_private_key(key)
            .map_err(|e| self.key_error(format!("it is not a usable private key: {e}")))?;
        let certified = CertifiedKey::new(chain, key);
        match certified.keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
                Ok(Arc::new(certified))
            }
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                Err(TlsError::Mismatch {
                    cert: self.cert_file.display().to_string(),
                    key: self.key_file.display().to_string(),
                })
            }
            Err(e) => Err(self.cert_error(format!("its first certificate is not valid: {e}"))),
        }
    }
}

fn pem_problem(error: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match error {
        Error::MissingSectionEnd { .. } => "a PEM section has no END line".into(),
        Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed".into(),
        Error::Base64Decode(_) => "a PEM section is not valid base64".into(),
        other => format!("it is not valid PEM: {other}"),
    }
}

/// rustls with the aws-lc-rs provider (the one the rest of the workspace uses).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The certificate and key in force, handed to every new TLS connection (existing
/// connections keep the pair they were opened with).
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertResolver {
    /// A resolver serving `initial` until [`CertResolver::replace`].
    pub fn new(initial: Arc<CertifiedKey>) -> Self {
        Self {
            current: RwLock::new(initial),
        }
    }

    /// The pair new connections get.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `next` to connections from now on.
    pub fn replace(&self, next: Arc<CertifiedKey>) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Every `interval`, reads `files`; when their content changed, loads the new pair into
/// `resolver`. A pair that cannot be loaded (bad PEM, a key that is not the certificate's,
/// a file missing halfway through a rotation) leaves the previous pair serving and logs a
/// warning naming the file and the reason, once per change of the files. Runs until
/// dropped with the [`TlsListener`] that owns it.
async fn watch(
    files: TlsFiles,
    resolver: Arc<CertResolver>,
    interval: Duration,
    mut seen: Fingerprint,
) {
    // `seen`: what the pair in force was loaded from, or the contents last tried; only a
    // change of either file is looked at again.
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let read = {
            let files = files.clone();
            match tokio::task::spawn_blocking(move || files.read()).await {
                Ok(read) => read,
                Err(_) => continue,
            }
        };
        let fingerprint = content_fingerprint(&read);
        if fingerprint == seen {
            continue;
        }
        seen = fingerprint;
        match files.parse(&read.0, &read.1) {
            Ok(pair) => {
                resolver.replace(pair);
                tracing::info!(
                    cert_file = %files.cert_file.display(),
                    key_file = %files.key_file.display(),
                    "TLS certificate reloaded; new connections use it"
                );
            }
            Err(error) => tracing::warn!(
                %error,
                "the TLS certificate files changed but cannot be used; still serving the previous certificate"
            ),
        }
    }
}

/// The two files' contents, or the kind of error reading each: equal when nothing changed.
type Fingerprint = (
    Result<Vec<u8>, std::io::ErrorKind>,
    Result<Vec<u8>, std::io::ErrorKind>,
);

fn content_fingerprint(read: &(std::io::Result<Vec<u8>>, std::io::Result<Vec<u8>>)) -> Fingerprint {
    let one = |read: &std::io::Result<Vec<u8>>| match read {
        Ok(bytes) => Ok(bytes.clone()),
        Err(error) => Err(error.kind()),
    };
    (one(&read.0), one(&read.1))
}

/// A rustls acceptor resolving its certificate through `resolver`, offering HTTP/1.1 by
/// ALPN (the console's HTTP server speaks HTTP/1.1 only), TLS 1.2 and 1.3.
pub fn acceptor(resolver: Arc<CertResolver>) -> TlsAcceptor {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports the default TLS versions")
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// A TCP listener whose connections come out TLS-decrypted. Handshakes run beside each
/// other, each at most [`HANDSHAKE_TIMEOUT`], so a client that stalls its handshake holds
/// up neither other clients nor a shutdown. Dropping it stops accepting, abandons the
/// handshakes under way and stops reloading the certificate.
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
    watching: Option<tokio::task::JoinHandle<()>>,
}

impl TlsListener {
    /// Accepts on `tcp` and hands each connection to `acceptor`.
    ///
    /// Errors: the listener's local address cannot be read.
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, handshaken) = mpsc::channel(64);
        let accepting = tokio::spawn(accept_loop(tcp, acceptor, tx));
        Ok(Self {
            handshaken,
            local,
            accepting,
            watching: None,
        })
    }

    /// Serves the pair in `files`, read again every `interval` for as long as this
    /// listener lives: when their content changed, a valid new pair serves new
    /// connections; one that cannot be loaded (bad PEM, a key that is not the
    /// certificate's, a file missing halfway through a rotation) leaves the previous pair
    /// serving and logs a warning naming the file and the reason.
    ///
    /// Errors: [`TlsError`] when the pair cannot be loaded now; an I/O error when `tcp`'s
    /// local address cannot be read.
    pub fn with_reloading(
        tcp: TcpListener,
        files: TlsFiles,
        interval: Duration,
    ) -> anyhow::Result<Self> {
        let read = files.read();
        let resolver = Arc::new(CertResolver::new(files.parse(&read.0, &read.1)?));
        let mut listener = Self::new(tcp, acceptor(resolver.clone()))?;
        let seen = content_fingerprint(&read);
        listener.watching = Some(tokio::spawn(watch(files, resolver, interval, seen)));
        Ok(listener)
    }
}

async fn accept_loop(
    mut tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshaken: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let mut handshakes = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            // axum's own accept: connection errors skipped, others (EMFILE) logged and
            // retried after a second.
            (stream, peer) = axum::serve::Listener::accept(&mut tcp) => {
                let acceptor = acceptor.clone();
                let handshaken = handshaken.clone();
                handshakes.spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = handshaken.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                        }
                        Err(_) => {
                            tracing::debug!(%peer, timeout = ?HANDSHAKE_TIMEOUT, "TLS handshake timed out");
                        }
                    }
                });
            }
            Some(_) = handshakes.join_next(), if !handshakes.is_empty() => {}
        }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
        if let Some(watching) = &self.watching {
            watching.abort();
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accept loop ended (it does not, short of a panic): accept nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
