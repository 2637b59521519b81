//! Stopping: a client that never finishes its request, on the console's port or the
//! metrics one, does not hold the console up; with a shutdown delay the console goes on
//! serving, unready, before it closes its listener.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_request_does_not_hold_up_the_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_address = metrics.local_addr().unwrap();
    let listeners = server::startup::Listeners {
        console: listener,
        metrics: Some(metrics),
    };
    let config = config(dir.path(), address, &[]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::startup::serve_on(listeners, config, async move {
        let _ = stopped.await;
    }));
    // Headers without their closing blank line: the request never completes.
    let mut slow = loop {
        match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => break stream,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut slow_scrape = tokio::net::TcpStream::connect(metrics_address)
        .await
        .unwrap();
    slow_scrape
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: prometheus\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let asked = Instant::now();
    stop.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .expect("the console stops although the client is still there");
    result.unwrap().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "{:?}",
        asked.elapsed()
    );
    drop((slow, slow_scrape));
}

/// The console's settings on a SQLite database in `dir`, served at `address`, and `extra`.
fn config(dir: &Path, address: SocketAddr, extra: &[&str]) -> server::config::Config {
    let database = format!("sqlite://{}/console.db", dir.display());
    let external = format!("http://{address}");
    let mut args = vec![
        "banlieue-console",
        "--database-url",
        &database,
        "--external-url",
        &external,
    ];
    args.extend_from_slice(extra);
    server::config::Cli::try_parse_from(args)
        .unwrap()
        .settings
        .validate()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_shutdown_delay_the_console_is_unready_but_still_serves() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let listeners = server::startup::Listeners {
        console: listener,
        metrics: None,
    };
    let config = config(dir.path(), address, &["--shutdown-delay-seconds", "3"]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::startup::serve_on(listeners, config, async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    let url = |path: &str| format!("http://{address}{path}");
    let ready = loop {
        match http.get(url("/readyz")).send().await {
            Ok(response) => break response,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert_eq!(ready.status(), 200);

    let asked = Instant::now();
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A new connection (no pooled one) is still accepted and served.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let unready = fresh.get(url("/readyz")).send().await.unwrap();
    assert_eq!(unready.status(), 503);
    assert_eq!(unready.text().await.unwrap(), "shutting down");
    let page = fresh.get(url("/sign-in")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(!serving.is_finished(), "stopped before the delay ended");

    tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("the console stops after the delay")
        .unwrap()
        .unwrap();
    assert!(
        asked.elapsed() >= Duration::from_secs(3),
        "stopped after {:?}, before the 3 s delay",
        asked.elapsed()
    );
    assert!(
        fresh.get(url("/healthz")).send().await.is_err(),
        "the listener is closed once the console stopped"
    );
}
