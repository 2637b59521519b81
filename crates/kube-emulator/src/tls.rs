//! TLS for the emulator: a throw-away CA and a server certificate for `127.0.0.1`,
//! `localhost` and `::1`, generated at start with `rcgen`.
//!
//! kubectl only sends bearer tokens over TLS (client-go's `clientcmd` drops user
//! credentials for `http://` servers), so TLS is on by default.

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A generated CA and the server certificate it signed (PEM).
pub struct Certs {
    /// CA certificate (what clients trust).
    pub ca_pem: String,
    /// Server certificate.
    pub(crate) cert_der: rustls::pki_types::CertificateDer<'static>,
    /// Server private key (PKCS#8 DER).
    pub(crate) key_der: Vec<u8>,
}

/// Generates a CA and a server certificate valid for loopback names.
///
/// Errors: an `rcgen` failure message.
pub fn generate() -> Result<Certs, String> {
    let ca_key = KeyPair::generate().map_err(|e| e.to_string())?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kube-emulator-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).map_err(|e| e.to_string())?;
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])
    .map_err(|e| e.to_string())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .map_err(|e| e.to_string())?;
    Ok(Certs {
        ca_pem: ca.pem(),
        cert_der: cert.der().clone(),
        key_der: key.serialize_der(),
    })
}

/// Builds a rustls acceptor (HTTP/1.1 ALPN) for the certificates.
///
/// Errors: a rustls configuration failure.
pub fn acceptor(certs: &Certs) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certs.key_der.clone().into());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![certs.cert_der.clone()], key)
        .map_err(|e| e.to_string())?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(cfg)))
}

/// A listener that completes TLS handshakes concurrently (a slow client cannot stall others).
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Wraps a bound TCP listener.
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, addr)) = tcp.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                // As Go's net/http (kube-apiserver): no Nagle delay on small watch events.
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let hs = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        acceptor.accept(stream),
                    )
                    .await;
                    if let Ok(Ok(tls)) = hs {
                        let _ = tx.send((tls, addr)).await;
                    }
                });
            }
        });
        Ok(Self { rx, local, task })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(x) => x,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
