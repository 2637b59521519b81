//! HTTPS served by the console itself (`BANLIEUE_TLS_CERT_FILE` / `BANLIEUE_TLS_KEY_FILE`):
//! a client trusting the test CA gets the console; the pair is reloaded when the files
//! change and a pair that cannot be loaded leaves the previous one serving; the peer
//! address, a stalled handshake and the shutdown under TLS; configuration errors.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use tokio::io::AsyncReadExt;

/// A CA and a server certificate it signed for 127.0.0.1, with the server's key.
struct Pair {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
    cert_der: Vec<u8>,
}

fn pair(ca_name: &str) -> Pair {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "banlieue-console");
    let cert = leaf.signed_by(&key, &ca, &ca_key).unwrap();
    Pair {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().to_vec(),
    }
}

/// Replaces `path` at once (write beside it, then rename), as a secret mount or
/// cert-manager does.
fn replace(path: &Path, content: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, content).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// A client trusting only `cas`, on a fresh connection pool, telling the peer's
/// certificate.
fn client(cas: &[&Pair]) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_certs_only(
            cas.iter()
                .map(|pair| reqwest::Certificate::from_pem(pair.ca_pem.as_bytes()).unwrap()),
        )
        .tls_info(true)
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The certificate the console presents to a new connection, and the health answer.
async fn served_certificate(url: &str, cas: &[&Pair]) -> Vec<u8> {
    let response = client(cas).get(format!("{url}/healthz")).send().await;
    let response = response.unwrap_or_else(|e| panic!("GET {url}/healthz: {e:?}"));
    assert_eq!(response.status(), 200);
    let certificate = peer_certificate(&response);
    assert_eq!(response.text().await.unwrap().trim(), "ok");
    certificate
}

fn peer_certificate(response: &reqwest::Response) -> Vec<u8> {
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .expect("a TLS connection")
        .to_vec()
}

/// Polls until a new connection is served `expected`, for at most `within`.
async fn wait_for_certificate(url: &str, cas: &[&Pair], expected: &Pair, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if served_certificate(url, cas).await == expected.cert_der {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn files(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("tls.crt"), dir.join("tls.key"))
}

fn write_pair(dir: &Path, pair: &Pair) -> (PathBuf, PathBuf) {
    let (cert, key) = files(dir);
    std::fs::write(&cert, &pair.cert_pem).unwrap();
    std::fs::write(&key, &pair.key_pem).unwrap();
    (cert, key)
}

/// More than two reload intervals: long enough for the console to have read the files.
const SETTLE: Duration = server::tls::RELOAD_INTERVAL
    .saturating_mul(2)
    .saturating_add(Duration::from_millis(1500));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_serves_https_and_follows_its_certificate_files() {
    let dir = tempfile::tempdir().unwrap();
    let first = pair("first-ca");
    let (cert_file, key_file) = write_pair(dir.path(), &first);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let url = format!("https://{address}");
    let database = format!("sqlite://{}/console.db", dir.path().display());
    let config = server::config::Cli::try_parse_from([
        "banlieue-console",
        "--database-url",
        &database,
        "--external-url",
        &url,
        "--trusted-proxies",
        "127.0.0.1",
        "--tls-cert-file",
        cert_file.to_str().unwrap(),
        "--tls-key-file",
        key_file.to_str().unwrap(),
    ])
    .unwrap()
    .settings
    .validate()
    .unwrap();
    assert!(config.tls.is_some());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listeners = server::startup::Listeners {
        console: listener,
        metrics: None,
    };
    let serving = tokio::spawn(server::startup::serve_on(listeners, config, async move {
        let _ = stopped.await;
    }));

    // A client that opens TCP and never says hello: it must not hold anyone up.
    let mut stalled = tokio::net::TcpStream::connect(address).await.unwrap();
    let stalled_since = Instant::now();

    // (1) HTTPS with the configured certificate, HTTP/1.1 by ALPN; no plain HTTP.
    let deadline = Instant::now() + Duration::from_secs(60);
    let response = loop {
        match client(&[&first]).get(format!("{url}/healthz")).send().await {
            Ok(response) => break response,
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "the console never answered: {error:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    assert_eq!(peer_certificate(&response), first.cert_der);
    let plain = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(format!("http://{address}/healthz"))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP answered: {plain:?}");
    // A client that does not trust the CA is refused by the handshake.
    let other = pair("other-ca");
    assert!(
        client(&[&other])
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_err()
    );

    // The peer address reaches the client-address layer under TLS: 127.0.0.1 is a
    // trusted proxy, so its X-Forwarded-For is believed; without the header the peer
    // itself is the client. Both show in the audit log of the failed sign-ins.
    let sign_in = |forwarded: Option<&'static str>| {
        let mut request = client(&[&first])
            .post(format!("{url}/sign-in"))
            .header("origin", url.as_str())
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .body("user_name=nobody&password=wrong");
        if let Some(forwarded) = forwarded {
            request = request.header("x-forwarded-for", forwarded);
        }
        request.send()
    };
    // (The sign-in card comes back with its error: 200.)
    let refused = sign_in(Some("203.0.113.7")).await.unwrap();
    assert_eq!(refused.status(), 200);
    let refused = sign_in(None).await.unwrap();
    assert_eq!(refused.status(), 200);
    let store = banlieue_store::Store::open(&database).await.unwrap();
    let sources: Vec<String> = store
        .recent_audit(10)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.action == "session.sign-in")
        .map(|event| event.source_ip)
        .collect();
    assert_eq!(sources, ["127.0.0.1", "203.0.113.7"], "newest first");
    store.close().await;

    // (2) A new pair, from another CA, replaces the files: new connections get it, while
    // a connection opened before keeps the certificate it was opened with.
    let kept = client(&[&first]);
    let before = kept.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(peer_certificate(&before), first.cert_der);
    before.text().await.unwrap();
    let second = pair("second-ca");
    replace(&key_file, &second.key_pem);
    replace(&cert_file, &second.cert_pem);
    let both = [&first, &second];
    wait_for_certificate(&url, &both, &second, Duration::from_secs(15)).await;
    let still = kept.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(still.status(), 200);
    assert_eq!(
        peer_certificate(&still),
        first.cert_der,
        "an open connection keeps its certificate"
    );
    drop(kept);

    // (3) Garbage in the certificate file: the previous pair goes on serving.
    replace(&cert_file, "this is not a certificate\n");
    tokio::time::sleep(SETTLE).await;
    assert_eq!(served_certificate(&url, &both).await, second.cert_der);
    // A rotation caught halfway (the new certificate, the old key; then no key at all):
    // still the previous pair.
    let third = pair("third-ca");
    replace(&cert_file, &third.cert_pem);
    tokio::time::sleep(SETTLE).await;
    assert_eq!(served_certificate(&url, &both).await, second.cert_der);
    std::fs::remove_file(&key_file).unwrap();
    tokio::time::sleep(SETTLE).await;
    assert_eq!(served_certificate(&url, &both).await, second.cert_der);
    // The rotation completes: its pair serves.
    replace(&key_file, &third.key_pem);
    let all = [&first, &second, &third];
    wait_for_certificate(&url, &all, &third, Duration::from_secs(15)).await;

    // The stalled handshake was given up after the handshake timeout (10 s).
    let mut byte = [0u8; 1];
    let waited = Duration::from_secs(16).saturating_sub(stalled_since.elapsed());
    let closed = tokio::time::timeout(waited, stalled.read(&mut byte))
        .await
        .expect("the stalled handshake is closed after the handshake timeout");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");

    // A shutdown is not held up by a handshake under way.
    let mut stalled = tokio::net::TcpStream::connect(address).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked = Instant::now();
    stop.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .expect("the console stops");
    result.unwrap().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "a stalled handshake held up the shutdown: {:?}",
        asked.elapsed()
    );
    let closed = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut byte)).await;
    assert!(
        matches!(closed, Ok(Ok(0) | Err(_))),
        "the stalled connection is closed at shutdown: {closed:?}"
    );
}

fn validate(args: &[&str]) -> Result<server::config::Config, String> {
    server::config::Cli::try_parse_from(["banlieue-console"].iter().chain(args))
        .unwrap()
        .settings
        .validate()
        .map_err(|error| error.to_string())
}

#[test]
fn tls_configuration_errors_name_the_variable_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let good = pair("ca");
    let (cert, key) = write_pair(dir.path(), &good);
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());

    // Both: HTTPS, and the default external URL says so.
    let config = validate(&["--tls-cert-file", cert, "--tls-key-file", key]).unwrap();
    assert_eq!(config.external_url, "https://127.0.0.1:3000");
    assert!(config.https);
    let tls = config.tls.unwrap();
    assert_eq!(tls.cert_file, Path::new(cert));
    assert_eq!(tls.key_file, Path::new(key));
    // An http external URL for a console that only speaks https would be a lie.
    let error = validate(&[
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--external-url",
        "http://console.example.org",
    ])
    .unwrap_err();
    assert!(
        error.contains("must be https when the console serves TLS"),
        "{error}"
    );
    // Neither: HTTP.
    let config = validate(&[]).unwrap();
    assert!(config.tls.is_none());
    assert_eq!(config.external_url, "http://127.0.0.1:3000");

    // Only one of the two.
    let error = validate(&["--tls-cert-file", cert]).unwrap_err();
    assert!(
        error.starts_with("BANLIEUE_TLS_CERT_FILE / --tls-cert-file is set but BANLIEUE_TLS_KEY_FILE / --tls-key-file is not")
            && error.contains("give both"),
        "{error}"
    );
    let error = validate(&["--tls-key-file", key]).unwrap_err();
    assert!(
        error.starts_with("BANLIEUE_TLS_KEY_FILE / --tls-key-file is set but BANLIEUE_TLS_CERT_FILE / --tls-cert-file is not"),
        "{error}"
    );

    // Unreadable files.
    let missing = dir.path().join("missing.pem");
    let missing = missing.to_str().unwrap();
    let error = validate(&["--tls-cert-file", missing, "--tls-key-file", key]).unwrap_err();
    assert!(
        error.starts_with("BANLIEUE_TLS_CERT_FILE") && error.contains(missing),
        "{error}"
    );
    assert!(error.contains("cannot read it"), "{error}");
    let error = validate(&["--tls-cert-file", cert, "--tls-key-file", missing]).unwrap_err();
    assert!(
        error.starts_with("BANLIEUE_TLS_KEY_FILE") && error.contains(missing),
        "{error}"
    );
    let folder = dir.path().to_str().unwrap();
    let error = validate(&["--tls-cert-file", folder, "--tls-key-file", key]).unwrap_err();
    assert!(error.starts_with("BANLIEUE_TLS_CERT_FILE"), "{error}");

    // Not PEM, or the wrong kind of PEM.
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let garbage = garbage.to_str().unwrap();
    let error = validate(&["--tls-cert-file", garbage, "--tls-key-file", key]).unwrap_err();
    assert!(
        error.starts_with("BANLIEUE_TLS_CERT_FILE") && error.contains("no PEM certificate"),
        "{error}"
    );
    let error = validate(&["--tls-cert-file", cert, "--tls-key-file", cert]).unwrap_err();
    assert!(
        error.starts_with("BANLIEUE_TLS_KEY_FILE") && error.contains("no PEM private key"),
        "{error}"
    );
    let broken = dir.path().join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let error = validate(&[
        "--tls-cert-file",
        broken.to_str().unwrap(),
        "--tls-key-file",
        key,
    ])
    .unwrap_err();
    assert!(error.starts_with("BANLIEUE_TLS_CERT_FILE"), "{error}");

    // A key that is not the certificate's.
    let other = pair("other-ca");
    let other_key = dir.path().join("other.key");
    std::fs::write(&other_key, &other.key_pem).unwrap();
    let other_key = other_key.to_str().unwrap();
    let error = validate(&["--tls-cert-file", cert, "--tls-key-file", other_key]).unwrap_err();
    assert!(
        error.starts_with("BANLIEUE_TLS_KEY_FILE")
            && error.contains(other_key)
            && error.contains(cert)
            && error.contains("is not the private key of the certificate"),
        "{error}"
    );
}

#[test]
fn check_config_loads_the_certificate_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let good = pair("ca");
    let (cert, key) = write_pair(dir.path(), &good);
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let check = |key: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_banlieue-console"))
            .env_clear()
            .env("LEPTOS_SITE_ROOT", &site)
            .env(
                "BANLIEUE_DATABASE_URL",
                format!("sqlite://{}/console.db", dir.path().display()),
            )
            .env("BANLIEUE_TLS_CERT_FILE", &cert)
            .env("BANLIEUE_TLS_KEY_FILE", key)
            .arg("check-config")
            .output()
            .unwrap()
    };
    let ok = check(&key);
    assert!(ok.status.success(), "{ok:?}");
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(
        said.contains("https://127.0.0.1:3000") && said.contains("HTTPS"),
        "{said}"
    );

    let other = pair("other-ca");
    let other_key = dir.path().join("other.key");
    std::fs::write(&other_key, &other.key_pem).unwrap();
    let refused = check(&other_key);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("BANLIEUE_TLS_KEY_FILE") && !message.contains("panicked"),
        "{message}"
    );
}
