//! The JSON API against its own OpenAPI document, by schemathesis (PyPI, a property-based
//! API fuzzer): every operation with generated valid and invalid requests, as an operator
//! on the dev cluster. No answer may be a 5xx, refuse a request the document allows in
//! form while taking one it does not, or differ from what the document declares (status,
//! content type, headers, schema).
//!
//! `scripts/test` installs schemathesis (`scripts/install-tools`) and names it in
//! `BANLIEUE_SCHEMATHESIS`; without that variable the test says on stderr that it was
//! skipped.

mod support;

use std::net::SocketAddr;

use support::TestApp;

/// The variable naming the schemathesis executable (`st`).
const SCHEMATHESIS: &str = "BANLIEUE_SCHEMATHESIS";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_nothing_the_document_does_not_say() {
    let Some(schemathesis) = std::env::var_os(SCHEMATHESIS) else {
        eprintln!("skipped: {SCHEMATHESIS} names no schemathesis executable");
        return;
    };
    let (app, _dev) = TestApp::with_dev_cluster().await;
    app.create_user("olga", "correct horse battery", &["operator"], false)
        .await;
    let cookie = app.sign_in("olga", "correct horse battery").await;
    let token = app.id_token(&cookie, "banlieue-console").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service = app
        .router
        .clone()
        .into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await });

    let report = tempfile::tempdir().unwrap();
    let args = vec![
        "run".to_owned(),
        format!("{base}/api/v1/openapi.json"),
        "--url".into(),
        format!("{base}/api/v1"),
        "--checks".into(),
        "all".into(),
        // A request valid in form may still be refused for what it means (a pool that
        // does not exist, a lifetime the console does not offer): 4xx by design.
        "--exclude-checks".into(),
        "positive_data_acceptance".into(),
        "--header".into(),
        format!("Authorization: Bearer {token}"),
        "--max-examples".into(),
        "40".into(),
        "--seed".into(),
        "20261203".into(),
        // A watch streams until the claim is gone: bounded here, not a failure.
        "--request-timeout".into(),
        "10".into(),
        // One worker: with two, hypothesis parses lambdas' sources in two threads at
        // once, and Python 3.11's ast module then fails ("AST constructor recursion
        // depth mismatch", CPython gh-106905).
        "--workers".into(),
        "1".into(),
        "--report-dir".into(),
        report.path().display().to_string(),
    ];
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(schemathesis)
            .args(&args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{said}"
    );
    // It did test every operation of the document (an empty document would pass).
    assert!(
        said.contains("Selected: 6/6") && said.contains("Tested: 6"),
        "not every operation was tested:\n{said}"
    );
}
