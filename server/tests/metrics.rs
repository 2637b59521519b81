//! `/metrics` (SPEC §9) on the metrics listener, never on the console's port: no
//! credentials, in the OpenMetrics text format, counting what really happened — sign-ins by result here, claims and binds against the dev cluster
//! (tokens and refresh reuse are in `oidc.rs`, next to the OIDC flow's helpers).

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use support::{TestApp, form, get, post_form, sample};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PASSWORD: &str = "correct horse battery";

#[tokio::test]
async fn sign_ins_are_counted_by_result_and_served_without_a_session() {
    let app = TestApp::new().await;
    let on_the_console_port = app.send(get("/metrics", None)).await;
    assert_eq!(
        (
            on_the_console_port.status,
            on_the_console_port.header("location").as_deref()
        ),
        (StatusCode::SEE_OTHER, Some("/sign-in?next=%2Fmetrics")),
        "the console's port serves no metrics: it is a page like any other"
    );
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let before = app.metrics().await;
    assert_eq!(
        sample(&before, "banlieue_sign_ins_total{result=\"success\"}"),
        Some(0.0),
        "known results are exported from the start:\n{before}"
    );

    let wrong = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", "not her password")]),
            None,
        ))
        .await;
    assert_ne!(wrong.status, StatusCode::SEE_OTHER, "{}", wrong.body);
    app.sign_in("alice", PASSWORD).await;

    let response = app.scrape().await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(
        response.header("content-type").as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(
        response.session_cookie().is_none(),
        "a scrape opens no session"
    );
    let text = response.body;
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("# TYPE banlieue_sign_ins counter"), "{text}");
    assert!(
        text.lines()
            .any(|l| l == "banlieue_sign_ins_total{result=\"success\"} 1"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "banlieue_sign_ins_total{result=\"invalid-credentials\"} 1"),
        "{text}"
    );
    assert_eq!(
        sample(&text, "banlieue_sign_ins_total{result=\"throttled\"}"),
        Some(0.0)
    );
    // No controllers in this process: their metrics are absent, not zero.
    assert!(!text.contains("banlieue_reconciles"), "{text}");
    assert!(!text.contains("banlieue_claims"), "{text}");
}

/// The sum of every sample of `name` (all label sets).
fn sum_of(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_claim_shows_in_claims_by_phase_bind_latency_and_reconciles() {
    let (app, _dev) = TestApp::with_dev_cluster().await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = app.sign_in("alice", PASSWORD).await;

    // The pool fills in the background; the form is refused until it is listed.
    let mut claimed = None;
    for _ in 0..300 {
        let response = app
            .send(post_form(
                "/claims",
                form(&[
                    ("namespace", "demo"),
                    ("pool", "sandbox"),
                    ("ttl_seconds", "900"),
                ]),
                Some(&cookie),
            ))
            .await;
        // A refusal redirects to the dashboard too, without the claim's name.
        if response
            .location()
            .is_some_and(|to| to.starts_with("/?claimed="))
        {
            claimed = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    claimed.expect("the claim form is accepted");

    // The controllers are asynchronous: poll the scrape, never read it once.
    let mut text = String::new();
    for _ in 0..300 {
        text = app.metrics().await;
        if sample(&text, "banlieue_claims{phase=\"Bound\"}") == Some(1.0)
            && sample(&text, "banlieue_claim_bind_latency_seconds_count").is_some_and(|n| n >= 1.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        sample(&text, "banlieue_claims{phase=\"Bound\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "banlieue_claims{phase=\"Pending\"}"),
        Some(0.0),
        "{text}"
    );
    let binds = sample(&text, "banlieue_claim_bind_latency_seconds_count").unwrap();
    assert!(binds >= 1.0, "{text}");
    let latency = sample(&text, "banlieue_claim_bind_latency_seconds_sum").unwrap();
    assert!(
        (0.0..300.0).contains(&latency),
        "a warm member binds in seconds: {latency}"
    );
    assert!(sample(&text, "banlieue_claim_binds_total").unwrap() >= 1.0);
    assert!(sum_of(&text, "banlieue_reconciles_total") > 0.0, "{text}");
    assert!(
        sample(&text, "banlieue_reconciles_total{controller=\"claim\"}").unwrap() > 0.0,
        "{text}"
    );
    assert!(
        text.contains("banlieue_reconcile_errors_total{controller=\"claim\"}"),
        "{text}"
    );
    // The identity side is in the same scrape.
    assert_eq!(
        sample(&text, "banlieue_sign_ins_total{result=\"success\"}"),
        Some(1.0)
    );
}

/// `GET /metrics` over a real connection: the response head and body.
async fn scrape(address: std::net::SocketAddr) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: prometheus\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

/// The console as `serve` starts it, with the dev cluster, on a loopback port and its
/// metrics listener on another; extra `args` appended. Runs until the test's runtime
/// ends. Returns the console's address and the metrics listener's.
async fn serve_with_dev_cluster(
    dir: &std::path::Path,
    args: &[&str],
) -> (std::net::SocketAddr, std::net::SocketAddr) {
    use clap::Parser;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_address = metrics.local_addr().unwrap();
    let external = format!("http://{address}");
    let database = format!("sqlite://{}/console.db", dir.display());
    let cluster_dir = dir.join("cluster");
    let mut all = vec![
        "banlieue-console",
        "--external-url",
        &external,
        "--database-url",
        &database,
        "--dev-cluster",
        "--dev-cluster-listen",
        "127.0.0.1:0",
        "--dev-cluster-dir",
        cluster_dir.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let config = server::config::Cli::try_parse_from(all)
        .unwrap()
        .settings
        .validate()
        .unwrap();
    let listeners = server::startup::Listeners {
        console: listener,
        metrics: Some(metrics),
    };
    tokio::spawn(server::startup::serve_on(
        listeners,
        config,
        std::future::pending(),
    ));
    (address, metrics_address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exports_the_controllers_metrics_only_when_it_runs_them() {
    let with = tempfile::tempdir().unwrap();
    let without = tempfile::tempdir().unwrap();
    let (console, running) = serve_with_dev_cluster(with.path(), &[]).await;
    let (_, not_running) =
        serve_with_dev_cluster(without.path(), &["--run-controllers=false"]).await;

    let mut last = String::new();
    // The listener is bound before start-up: a scrape waits until the console serves.
    for _ in 0..300 {
        let (head, body) = scrape(running).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_ascii_lowercase().contains(
                "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"
            ),
            "{head}"
        );
        last = body;
        // The demo pool is reconciled, and the claim cache is followed (no claims yet).
        if sample(&last, "banlieue_reconciles_total{controller=\"pool\"}").is_some_and(|n| n > 0.0)
            && sample(&last, "banlieue_claims{phase=\"Pending\"}") == Some(0.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        sample(&last, "banlieue_reconciles_total{controller=\"pool\"}").is_some_and(|n| n > 0.0),
        "{last}"
    );
    assert_eq!(
        sample(&last, "banlieue_claims{phase=\"Bound\"}"),
        Some(0.0),
        "{last}"
    );
    assert_eq!(
        sample(&last, "banlieue_claim_bind_latency_seconds_count"),
        Some(0.0)
    );

    let (head, _) = scrape(console).await;
    assert!(
        head.starts_with("HTTP/1.1 303") && head.contains("location: /sign-in"),
        "the console's port serves no metrics: {head}"
    );

    let (head, body) = scrape(not_running).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        body.contains("banlieue_sign_ins_total{result=\"success\"} 0"),
        "{body}"
    );
    assert!(!body.contains("banlieue_reconciles"), "{body}");
    assert!(!body.contains("banlieue_claims"), "{body}");
}
