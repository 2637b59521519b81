//! How long a claim takes from the request to Bound, through the JSON API (`POST
//! /api/v1/claims` with a bearer token, then the broker's `?watch=true` until Bound)
//! side by side with the dashboard's Claim form (`POST /claims` with a session, then the
//! claim watched in the cluster), in the dev cluster (the emulator, the controllers and
//! the simulated provider with VMs Ready after 200 ms, three warm). The two ways take
//! turns, ROUNDS each; every claim is released and gone before the next request.
//! Prints p50 / p99 / max of each. Run: `cargo bench -p server --bench api_claim`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use cluster::crd::VirtualMachineClaim;
use futures::StreamExt;
use http_body_util::BodyExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use support::{TestApp, form, post_form};
use tower::ServiceExt;

const ROUNDS: usize = 25;
const PASSWORD: &str = "correct horse battery";

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (api, page) = runtime.block_on(measure());
    println!("request → Bound, {ROUNDS} claims each way, in turn:");
    for (way, mut latencies) in [("JSON API (POST, watch)", api), ("dashboard form", page)] {
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
        println!(
            "  {way:<24} p50 {:>8.1?}  p99 {:>8.1?}  max {:>8.1?}",
            at(0.5),
            at(0.99),
            latencies[latencies.len() - 1]
        );
    }
}

async fn measure() -> (Vec<Duration>, Vec<Duration>) {
    let (app, dev) = TestApp::with_dev_cluster().await;
    let alice = app
        .create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    let token = app.id_token(&cookie, "banlieue-console").await;
    let alice = cluster::KubernetesIdentity::console(
        alice.name.as_str(),
        alice.roles.iter().map(|r| r.as_str()),
    );
    let claims =
        Api::<VirtualMachineClaim>::namespaced(dev.access.client_for(&alice).unwrap(), "demo");
    let (mut api, mut page) = (Vec::new(), Vec::new());
    for round in 0..2 * ROUNDS {
        let started = Instant::now();
        let name = if round % 2 == 0 {
            let name = through_the_api(&app, &token).await;
            api.push(started.elapsed());
            name
        } else {
            let name = through_the_form(&app, &cookie).await;
            bound(&claims, &name).await;
            page.push(started.elapsed());
            name
        };
        release(&app, &token, &claims, &name).await;
    }
    dev.shutdown().await;
    (api, page)
}

/// Claims through the API and reads the broker's watch until Bound; the claim's name.
async fn through_the_api(app: &TestApp, token: &str) -> String {
    let created = app
        .send(
            Request::post("/api/v1/claims")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    r#"{"namespace":"demo","pool":"sandbox","ttlSeconds":900}"#,
                ))
                .unwrap(),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let location = created.header("location").unwrap();
    let watch = app
        .router
        .clone()
        .oneshot(
            Request::get(format!("{location}?watch=true"))
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let mut body = watch.into_body();
    let mut pending = String::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("an event within 30 s")
            .expect("the watch stays open until Bound")
            .unwrap();
        let Some(data) = frame.data_ref() else {
            continue;
        };
        pending.push_str(&String::from_utf8_lossy(data));
        while let Some((line, rest)) = pending.split_once('\n') {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            if event["object"]["status"]["phase"] == "Bound" {
                return event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned();
            }
            pending = rest.to_owned();
        }
    }
}

/// Claims through the dashboard's form; the claim's name, from the redirect.
async fn through_the_form(app: &TestApp, cookie: &str) -> String {
    let body = form(&[
        ("namespace", "demo"),
        ("pool", "sandbox"),
        ("ttl_seconds", "900"),
    ]);
    let claimed = app.send(post_form("/claims", body, Some(cookie))).await;
    claimed
        .location()
        .and_then(|to| to.strip_prefix("/?claimed="))
        .unwrap_or_else(|| panic!("claimed: {}", claimed.body))
        .to_owned()
}

/// Until the cluster has `name` Bound.
async fn bound(claims: &Api<VirtualMachineClaim>, name: &str) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut changes = watcher(claims.clone(), config).applied_objects().boxed();
    while let Some(Ok(claim)) = changes.next().await {
        if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") {
            return;
        }
    }
    unreachable!("the watch ended")
}

/// Releases `name` through the API and waits until it is gone.
async fn release(app: &TestApp, token: &str, claims: &Api<VirtualMachineClaim>, name: &str) {
    let released = app
        .send(
            Request::delete(format!("/api/v1/claims/demo/{name}"))
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(released.status, 202, "{}", released.body);
    for _ in 0..300 {
        if claims.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} was not gone within 30 s");
}
