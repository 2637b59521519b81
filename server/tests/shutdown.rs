//! Stopping: a client that never finishes its request, on the console's port or the
//! metrics one, does not hold the console up.

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
    let database = format!("sqlite://{}/console.db", dir.path().display());
    let external = format!("http://{address}");
    let config = server::config::Cli::try_parse_from([
        "banlieue-console",
        "--database-url",
        &database,
        "--external-url",
        &external,
    ])
    .unwrap()
    .settings
    .validate()
    .unwrap();
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
