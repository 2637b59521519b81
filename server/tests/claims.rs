//! The dashboard against the dev cluster (the Kubernetes emulator with the chart, the
//! controllers and the simulated provider), as different people: everything is done as
//! them through impersonation, so Kubernetes RBAC and admission decide.

mod support;

use axum::body::Body;
use axum::http::StatusCode;
use cluster::attestation::EndorsementCertificate;
use cluster::crd::VirtualMachine;
use cluster::ek_authority::EkAuthority;
use http_body_util::BodyExt;
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::{TestApp, form, get, post_form};
use tower::ServiceExt;

const PASSWORD: &str = "correct horse battery";

/// The dashboard's claim form for `pool` in `demo`, lasting `ttl` seconds.
fn claim_form(pool: &str, ttl: &str) -> String {
    form(&[("namespace", "demo"), ("pool", pool), ("ttl_seconds", ttl)])
}

/// Claims a 15-minute sandbox from `pool` in `demo` as the holder of `cookie`; the claim's
/// name.
async fn claim(app: &TestApp, cookie: &str, pool: &str) -> String {
    let claimed = app
        .send(post_form("/claims", claim_form(pool, "900"), Some(cookie)))
        .await;
    assert_eq!(claimed.status, StatusCode::SEE_OTHER, "{}", claimed.body);
    claimed
        .location()
        .and_then(|to| to.strip_prefix("/?claimed="))
        .expect("back to the dashboard with the claim's name")
        .to_owned()
}

/// Reloads the dashboard until `done` holds for its HTML (the controllers work in the
/// background); fails after a generous bound.
async fn dashboard_until(app: &TestApp, cookie: &str, done: impl Fn(&str) -> bool) -> String {
    for _ in 0..300 {
        let page = app.send(get("/", Some(cookie))).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        if done(&page.body) {
            return page.body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the dashboard never reached the expected state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_developer_claims_a_sandbox_sees_it_bound_and_releases_it() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = app.sign_in("alice", PASSWORD).await;

    let page = dashboard_until(&app, &cookie, |b| b.contains("3 ready")).await;
    assert!(
        page.contains("data-pool=\"sandbox\""),
        "the demo pool is listed"
    );
    assert!(page.contains("Claim a sandbox"), "a developer may claim");
    assert!(
        page.contains("data-testid=\"no-claims\"") && !page.contains("claims-table"),
        "no sandbox yet: the sentence says so, and no empty table shows its header"
    );

    let claimed = app
        .send(post_form(
            "/claims",
            claim_form("sandbox", "900"),
            Some(&cookie),
        ))
        .await;
    assert_eq!(claimed.status, StatusCode::SEE_OTHER, "{}", claimed.body);
    let back = claimed.location().unwrap().to_owned();
    assert!(back.starts_with("/?claimed=alice-"), "{back}");
    let page = app.send(get(&back, Some(&cookie))).await;
    assert!(page.body.contains("role=\"status\""), "{}", page.body);

    let bound = dashboard_until(&app, &cookie, |b| b.contains("data-phase=\"Bound\"")).await;
    assert!(bound.contains("data-testid=\"countdown\""));
    assert!(
        bound.contains("ssh sandbox@"),
        "a connect command for the address"
    );
    assert!(bound.contains("data-testid=\"claims-table\""));
    assert!(
        !bound.contains(">Copy<"),
        "no copy button before hydration: without JavaScript it would do nothing"
    );
    let name = bound
        .split("data-claim=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    assert!(name.starts_with("alice-"), "{name}");
    assert!(
        !bound.contains("all-claims-table"),
        "a developer sees only their own"
    );

    // An operator oversees every claim, with its subject.
    app.create_user("oscar", PASSWORD, &["operator"], false)
        .await;
    let operator = app.sign_in("oscar", PASSWORD).await;
    let overview = app.send(get("/", Some(&operator))).await;
    let all = overview
        .body
        .split("all-claims-table")
        .nth(1)
        .expect("All sandboxes");
    assert!(all.contains(&name) && all.contains(">alice<"), "{all}");

    // Another developer may not release it: the release policy names who may.
    app.create_user("dave", PASSWORD, &["developer"], false)
        .await;
    let dave = app.sign_in("dave", PASSWORD).await;
    let refused = app
        .send(post_form(
            &format!("/claims/demo/{name}/release"),
            "",
            Some(&dave),
        ))
        .await;
    let refused = app.refused_page(refused, "/", &dave).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.alert().unwrap().contains("may release"),
        "{}",
        refused.body
    );

    let released = app
        .send(post_form(
            &format!("/claims/demo/{name}/release"),
            "",
            Some(&cookie),
        ))
        .await;
    assert_eq!(released.status, StatusCode::SEE_OTHER, "{}", released.body);
    dashboard_until(&app, &cookie, |b| !b.contains(&name)).await;
    let events = app.store().recent_audit(50).await.unwrap();
    for action in ["claim.create", "claim.release"] {
        assert!(
            events.iter().any(|e| e.action == action
                && e.actor == "alice"
                && e.target == format!("demo/{name}")),
            "{action} audited: {events:?}"
        );
    }
    dev.shutdown().await;
}

/// The text of the element marked `data-testid="<id>"` in `html`.
fn testid_text<'a>(html: &'a str, id: &str) -> &'a str {
    let marked = html
        .split_once(&format!("data-testid=\"{id}\""))
        .unwrap_or_else(|| panic!("{id} missing in {html}"))
        .1;
    let text = &marked[marked.find('>').unwrap() + 1..];
    &text[..text.find('<').unwrap()]
}

/// Reads server-sent events from `body` until one's data satisfies `done`; returns it.
async fn event_until(body: &mut Body, done: impl Fn(&str) -> bool) -> String {
    loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(30), body.frame())
            .await
            .expect("an event within 30 s")
            .expect("the stream stays open")
            .unwrap();
        if let Some(data) = frame.data_ref() {
            let text = String::from_utf8_lossy(data).into_owned();
            if done(&text) {
                return text;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_page_shows_the_sandbox_follows_it_live_and_says_when_it_is_gone() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let alice = app.sign_in("alice", PASSWORD).await;
    dashboard_until(&app, &alice, |b| b.contains("3 ready")).await;
    let name = claim(&app, &alice, "sandbox").await;
    let page_path = format!("/claims/demo/{name}");

    // Live: the page's stream carries the claim once Bound, with its VM.
    let events = app
        .router
        .clone()
        .oneshot(get(&format!("/events{page_path}"), Some(&alice)))
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    let mut body = events.into_body();
    let bound = event_until(&mut body, |e| e.contains("\"phase\":\"Bound\"")).await;
    let vm = bound
        .split("\"virtual_machine\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the bound VM in the snapshot")
        .to_owned();

    let page = app.send(get(&page_path, Some(&alice))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for (field, expected) in [
        ("claim-name", name.as_str()),
        ("claim-vm", vm.as_str()),
        ("claim-pool", "demo/sandbox"),
        ("claim-subject", "alice"),
    ] {
        assert_eq!(testid_text(&page.body, field), expected, "{field}");
    }
    // Whom the sandbox is for signed in here, which the page says in words, not as a bare
    // issuer URL (#18, first-time confusion).
    assert!(page.body.contains("Signed in through"), "{}", page.body);
    let through = testid_text(&page.body, "claim-issuer");
    assert!(
        through.starts_with("this console (http://") && through.ends_with(')'),
        "{through}"
    );
    assert!(testid_text(&page.body, "countdown").contains("minutes"));
    assert!(testid_text(&page.body, "connect").starts_with("ssh sandbox@"));
    // Attestation: the member's EK certificate, its fingerprint and issuer, verified.
    let member = vm_of(&dev, &vm).await;
    let published = &member.status.unwrap().tpm_endorsement_certificates;
    assert_eq!(published.len(), 1);
    let certificate = EndorsementCertificate::from_pem(&published[0]).unwrap();
    assert_eq!(
        testid_text(&page.body, "ek-fingerprint"),
        certificate.fingerprint_sha256
    );
    assert_eq!(testid_text(&page.body, "ek-issuer"), certificate.issuer);
    assert!(
        page.body.contains(r#"data-trust="claim-ek-trusted""#)
            && page.body.contains(r#"data-verified="true""#),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(&format!("action=\"{page_path}/release\"")),
        "the owner may release"
    );
    let dashboard = app.send(get("/", Some(&alice))).await;
    assert!(
        dashboard.body.contains(&format!("href=\"{page_path}\"")),
        "the dashboard links the claim"
    );

    // Another developer may read it, but is not offered Release (it is not theirs).
    app.create_user("dave", PASSWORD, &["developer"], false)
        .await;
    let dave = app.sign_in("dave", PASSWORD).await;
    let theirs = app.send(get(&page_path, Some(&dave))).await;
    assert_eq!(theirs.status, StatusCode::OK, "{}", theirs.body);
    assert!(!theirs.body.contains("/release\""), "{}", theirs.body);

    let released = app
        .send(post_form(&format!("{page_path}/release"), "", Some(&alice)))
        .await;
    assert_eq!(released.status, StatusCode::SEE_OTHER, "{}", released.body);
    event_until(&mut body, |e| e.contains("\"gone\":true")).await;
    for path in [page_path.as_str(), "/claims/demo/no-such-claim"] {
        let gone = app.send(get(path, Some(&alice))).await;
        assert_eq!(gone.status, StatusCode::NOT_FOUND);
        assert!(testid_text(&gone.body, "claim-gone").contains("does not exist"));
    }
    dev.shutdown().await;
}

/// The VM `name` in `demo`, read as the console.
async fn vm_of(dev: &server::dev_cluster::DevCluster, name: &str) -> VirtualMachine {
    Api::<VirtualMachine>::namespaced(dev.access.console_client().unwrap(), "demo")
        .get(name)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_whose_ek_certificate_does_not_chain_is_shown_untrusted() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let alice = app.sign_in("alice", PASSWORD).await;
    dashboard_until(&app, &alice, |b| b.contains("3 ready")).await;
    let name = claim(&app, &alice, "sandbox").await;
    let page_path = format!("/claims/demo/{name}");
    let vm = loop {
        let page = app.send(get(&page_path, Some(&alice))).await;
        if page.body.contains(r#"data-verified="true""#) {
            break testid_text(&page.body, "claim-vm").to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    // Someone with write access to the VM's status publishes an EK of their own CA.
    let now = time::OffsetDateTime::now_utc();
    let forged = EkAuthority::generate(now)
        .unwrap()
        .issue("urn:banlieue:vm:demo:forged", now)
        .unwrap();
    let fingerprint = EndorsementCertificate::from_pem(&forged)
        .unwrap()
        .fingerprint_sha256;
    Api::<VirtualMachine>::namespaced(dev.access.console_client().unwrap(), "demo")
        .patch_status(
            &vm,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"tpmEndorsementCertificates": [forged]}})),
        )
        .await
        .unwrap();
    let mut page = app.send(get(&page_path, Some(&alice))).await;
    for _ in 0..300 {
        if page.body.contains(r#"data-verified="false""#) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        page = app.send(get(&page_path, Some(&alice))).await;
    }
    assert_eq!(testid_text(&page.body, "ek-fingerprint"), fingerprint);
    assert!(
        page.body.contains(r#"data-trust="claim-ek-untrusted""#),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("Not verified: do not trust this sandbox")
            && page.body.contains("UntrustedCertificate"),
        "{}",
        page.body
    );
    dev.shutdown().await;
}

/// Reads `body` until the stream ends; fails if it does not within 30 s or if any event
/// contains `never`.
/// Reads `body` to its end, which must come within 30 s and never carry `never`;
/// returns whether its last event said the session ended.
async fn stream_ends(body: &mut Body, never: &str) -> bool {
    let mut last = String::new();
    loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(30), body.frame())
            .await
            .expect("the stream ends within 30 s");
        let Some(frame) = frame else {
            return last.contains(&format!("event: {}", app::SESSION_ENDED_EVENT));
        };
        if let Some(data) = frame.unwrap().data_ref() {
            let text = String::from_utf8_lossy(data);
            assert!(
                !text.contains(never),
                "sent after it should have ended: {text}"
            );
            if !text.trim().is_empty() {
                last = text.into_owned();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_streams_end_with_the_session_and_with_the_console() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    let otto = app
        .create_user("otto", PASSWORD, &["operator"], false)
        .await;
    app.create_user("dora", PASSWORD, &["developer"], false)
        .await;
    let otto_cookie = app.sign_in("otto", PASSWORD).await;
    let dora = app.sign_in("dora", PASSWORD).await;
    dashboard_until(&app, &dora, |b| b.contains("3 ready")).await;
    let open = |path: &'static str, cookie: String| {
        let router = app.router.clone();
        async move {
            let response = router.oneshot(get(path, Some(&cookie))).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            response.into_body()
        }
    };

    // Disabled: otto's open stream stops, and dora's new claim never reaches it.
    let mut otto_stream = open("/events/dashboard", otto_cookie.clone()).await;
    event_until(&mut otto_stream, |e| e.contains("\"cluster\":true")).await;
    app.store()
        .set_disabled(otto.id, true, time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    let name = claim(&app, &dora, "sandbox").await;
    assert!(
        stream_ends(&mut otto_stream, &name).await,
        "the last event says the session ended"
    );

    // Signed out: the same.
    let mut dora_stream = open("/events/dashboard", dora.clone()).await;
    event_until(&mut dora_stream, |e| e.contains(&name)).await;
    app.send(post_form("/sign-out", "", Some(&dora))).await;
    assert!(stream_ends(&mut dora_stream, "\"gone\"").await);

    // Shutting down ends every stream, so the graceful shutdown does not wait on them.
    let dora = app.sign_in("dora", PASSWORD).await;
    let mut dora_stream = open("/events/dashboard", dora).await;
    event_until(&mut dora_stream, |e| e.contains(&name)).await;
    app.stopping.cancel();
    assert!(
        !stream_ends(&mut dora_stream, "\"never sent\"").await,
        "a shutdown is not the session's end"
    );
    dev.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_in_claim_addresses_must_be_kubernetes_names() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("dora", PASSWORD, &["developer"], false)
        .await;
    app.create_user("cora", PASSWORD, &[], false).await;
    let dora = app.sign_in("dora", PASSWORD).await;
    dashboard_until(&app, &dora, |b| b.contains("3 ready")).await;
    let name = claim(&app, &dora, "sandbox").await;
    for path in [
        "/claims/demo/%3Fwatch=true".to_owned(),
        "/claims/demo/%3F".to_owned(),
        "/claims/demo/%20".to_owned(),
        "/claims/demo/a%00b".to_owned(),
        format!("/claims/demo/{name}%2Fstatus"),
        "/claims/demo/..%2Fvirtualmachinepools%2Fsandbox".to_owned(),
        format!("/claims/demo/{name}%3Fx=1"),
        "/claims/Demo/x".to_owned(),
        "/events/claims/demo/%3Fwatch=true".to_owned(),
    ] {
        let page = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            app.send(get(&path, Some(&dora))),
        )
        .await
        .unwrap_or_else(|_| panic!("{path} answers"));
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
    }
    for path in [
        format!("/claims/demo/{name}%3FdryRun=All/release"),
        "/claims/demo/%3F/release".to_owned(),
    ] {
        let refused = app.send(post_form(&path, "", Some(&dora))).await;
        assert_eq!(refused.status, StatusCode::NOT_FOUND, "{path}");
    }
    let page = app
        .send(get(&format!("/claims/demo/{name}"), Some(&dora)))
        .await;
    assert_eq!(page.status, StatusCode::OK, "the claim is still there");

    // A claim the person may not read: Kubernetes' refusal, not an endless empty stream.
    let cora = app.sign_in("cora", PASSWORD).await;
    let events = app
        .send(get(&format!("/events/claims/demo/{name}"), Some(&cora)))
        .await;
    assert_eq!(events.status, StatusCode::FORBIDDEN);
    dev.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_pools_but_kubernetes_refuses_a_forged_claim() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("victor", PASSWORD, &["viewer"], false)
        .await;
    let cookie = app.sign_in("victor", PASSWORD).await;
    let page = dashboard_until(&app, &cookie, |b| b.contains("data-pool=\"sandbox\"")).await;
    assert!(
        !page.contains("Claim a sandbox"),
        "no claim button for a viewer"
    );

    let forged = app
        .send(post_form(
            "/claims",
            claim_form("sandbox", "900"),
            Some(&cookie),
        ))
        .await;
    let forged = app.refused_page(forged, "/", &cookie).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    let alert = forged.alert().unwrap();
    assert!(alert.contains("Kubernetes refused"), "{alert}");
    assert!(
        alert.contains("console:victor"),
        "the API server's reason: {alert}"
    );
    let audited = app.store().recent_audit(10).await.unwrap();
    let row = audited
        .iter()
        .find(|e| e.action == "claim.create")
        .expect("the refused claim is audited");
    assert_eq!(
        (row.actor.as_str(), row.result.as_str()),
        ("victor", "forbidden")
    );
    assert!(row.detail.contains("console:victor"), "{}", row.detail);
    dev.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_form_with_a_lifetime_not_offered_is_refused() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    let refused = app
        .send(post_form(
            "/claims",
            claim_form("sandbox", "999999"),
            Some(&cookie),
        ))
        .await;
    let refused = app.refused_page(refused, "/", &cookie).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let nowhere = app
        .send(post_form(
            "/claims",
            claim_form("nope", "900"),
            Some(&cookie),
        ))
        .await;
    let nowhere = app.refused_page(nowhere, "/", &cookie).await;
    assert_eq!(nowhere.status, StatusCode::BAD_REQUEST, "no such pool");
    // The form keeps the lifetime it asked for.
    assert!(
        nowhere.body.contains("value=\"900\" selected"),
        "{}",
        nowhere.body
    );
    for pool in ["?watch=true", "sandbox/status", "..", ""] {
        let odd = app
            .send(post_form("/claims", claim_form(pool, "900"), Some(&cookie)))
            .await;
        let odd = app.refused_page(odd, "/", &cookie).await;
        assert_eq!(odd.status, StatusCode::BAD_REQUEST, "{pool:?}");
    }
    let audited = app.store().recent_audit(20).await.unwrap();
    let refusals = audited
        .iter()
        .filter(|e| e.action == "claim.create" && e.actor == "alice" && e.result == "invalid")
        .count();
    assert_eq!(refusals, 6, "every refused claim form leaves one audit row");
    dev.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_can_i_do_shows_kubernetes_answers_for_the_person() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("victor", PASSWORD, &["viewer"], false)
        .await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cell = |body: &str, resource: &str, verb: &str| -> bool {
        let row = body
            .split(&format!("data-resource=\"{resource}\""))
            .nth(1)
            .unwrap();
        let cell = row.split(&format!("data-verb=\"{verb}\"")).nth(1).unwrap();
        cell.trim_start().starts_with("data-allowed=\"true\"")
    };
    let viewer = app.sign_in("victor", PASSWORD).await;
    let page = app.send(get("/account", Some(&viewer))).await;
    assert!(page.body.contains("access-table"), "{}", page.body);
    assert!(cell(&page.body, "virtualmachineclaims", "list"));
    assert!(!cell(&page.body, "virtualmachineclaims", "create"));
    let developer = app.sign_in("alice", PASSWORD).await;
    let page = app.send(get("/account", Some(&developer))).await;
    assert!(cell(&page.body, "virtualmachineclaims", "create"));
    assert!(!cell(&page.body, "virtualmachinepools", "create"));
    dev.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_creates_a_custom_role_that_changes_a_users_rights() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("ada", PASSWORD, &["admin"], false).await;
    app.create_user("bob", PASSWORD, &["claimer"], false).await;
    app.create_user("dave", PASSWORD, &["developer"], false)
        .await;
    let admin = app.sign_in("ada", PASSWORD).await;
    let bob = app.sign_in("bob", PASSWORD).await;
    let may_claim = |body: &str| {
        body.split("data-resource=\"virtualmachineclaims\"")
            .nth(1)
            .and_then(|row| row.split("data-verb=\"create\"").nth(1))
            .is_some_and(|cell| cell.trim_start().starts_with("data-allowed=\"true\""))
    };
    assert!(!may_claim(
        &app.send(get("/account", Some(&bob))).await.body
    ));

    let page = app.send(get("/roles", Some(&admin))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("data-role=\"developer\""),
        "built-in roles listed"
    );
    let saved = app
        .send(post_form(
            "/roles",
            form(&[
                ("name", "claimer"),
                ("grant.virtualmachineclaims.create", "on"),
                ("grant.virtualmachineclaims.list", "on"),
            ]),
            Some(&admin),
        ))
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let page = app.send(get("/roles", Some(&admin))).await;
    let row = page
        .body
        .split("data-role=\"claimer\"")
        .nth(1)
        .expect("the custom role");
    assert!(
        row.contains("list, create — virtualmachineclaims (banlieue.io)"),
        "{row}"
    );
    assert!(
        row.contains(">ada, bob<"),
        "its author and its holder: {row}"
    );
    assert!(may_claim(&app.send(get("/account", Some(&bob))).await.body));

    // Its author holds it now, so she may grant it on a user's page.
    let carl = app
        .create_user("carl", PASSWORD, &["developer"], false)
        .await;
    let granted = app
        .send(post_form(
            "/users/carl",
            form(&[
                ("display_name", ""),
                ("email", ""),
                ("roles", "developer claimer"),
                ("version", &carl.version.to_string()),
            ]),
            Some(&admin),
        ))
        .await;
    assert!(
        granted.status.is_success() || granted.status.is_redirection(),
        "{}",
        granted.body
    );
    let carl = app.user("carl").await;
    assert!(carl.roles.contains("claimer"), "{:?}", carl.roles);
    // The user forms offer it beside the built-in roles, as a checkbox.
    let users = app.send(get("/users", Some(&admin))).await;
    assert!(
        users
            .body
            .contains("type=\"checkbox\" name=\"roles\" value=\"claimer\""),
        "{}",
        users.body
    );

    // The blank form cannot replace a role by naming it: creating is not editing.
    let rules_of = |body: &str| {
        let row = body
            .split("data-role=\"claimer\"")
            .nth(1)
            .unwrap_or_default();
        row[..row.find("</tr>").unwrap_or(row.len())].to_owned()
    };
    let before = rules_of(&app.send(get("/roles", Some(&admin))).await.body);
    let replaced = app
        .send(post_form(
            "/roles",
            form(&[("name", "claimer"), ("grant.virtualmachines.get", "on")]),
            Some(&admin),
        ))
        .await;
    let replaced = app.refused_page(replaced, "/roles", &admin).await;
    assert_eq!(replaced.status, StatusCode::CONFLICT, "{}", replaced.body);
    assert!(
        replaced
            .alert()
            .unwrap()
            .starts_with("A role with this name exists"),
        "{:?}",
        replaced.alert()
    );
    assert!(
        ticked(&replaced.body, "grant.virtualmachines.get"),
        "what was ticked is kept"
    );
    assert_eq!(
        rules_of(&app.send(get("/roles", Some(&admin))).await.body),
        before,
        "its rules are unchanged"
    );

    // Another admin who changes the role does not come to hold it; an edit carries the
    // version it was opened on, and a stale one is refused.
    app.create_user("eve", PASSWORD, &["admin"], false).await;
    let eve = app.sign_in("eve", PASSWORD).await;
    let edit_form = app.send(get("/roles?edit=claimer", Some(&eve))).await.body;
    assert!(edit_form.contains("Change the custom role"), "{edit_form}");
    let version = edit_form
        .split("name=\"version\" value=\"")
        .nth(1)
        .map(|v| v[..v.find('"').unwrap()].to_owned())
        .expect("the edit form carries the role's version");
    let edit = |version: &str, extra: &'static str| {
        form(&[
            ("version", version),
            ("name", "claimer"),
            ("grant.virtualmachineclaims.create", "on"),
            ("grant.virtualmachineclaims.list", "on"),
            (extra, "on"),
        ])
    };
    let changed = app
        .send(post_form(
            "/roles",
            edit(&version, "grant.virtualmachineclaims.get"),
            Some(&eve),
        ))
        .await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    let stale = app
        .send(post_form(
            "/roles",
            edit(&version, "grant.virtualmachineclaims.delete"),
            Some(&admin),
        ))
        .await;
    let stale = app.refused_page(stale, "/roles?edit=claimer", &admin).await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert!(
        stale
            .alert()
            .unwrap()
            .starts_with("Someone else changed this role"),
        "{:?}",
        stale.alert()
    );
    assert!(
        ticked(&stale.body, "grant.virtualmachineclaims.get")
            && !ticked(&stale.body, "grant.virtualmachineclaims.delete"),
        "the form shows the role as it is now"
    );
    assert!(!app.user("eve").await.roles.contains("claimer"));
    let events = app.store().recent_audit(50).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.actor == "eve" && e.action == "role.update" && e.target == "claimer"),
        "{events:?}"
    );

    let deleted = app
        .send(post_form("/roles/claimer/delete", "", Some(&admin)))
        .await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER, "{}", deleted.body);
    assert!(!may_claim(
        &app.send(get("/account", Some(&bob))).await.body
    ));

    // Only admins reach the page; a built-in name cannot be taken.
    let dave = app.sign_in("dave", PASSWORD).await;
    assert_eq!(
        app.send(get("/roles", Some(&dave))).await.status,
        StatusCode::FORBIDDEN
    );
    let taken = app
        .send(post_form(
            "/roles",
            form(&[("name", "admin"), ("grant.virtualmachines.get", "on")]),
            Some(&admin),
        ))
        .await;
    let taken = app.refused_page(taken, "/roles", &admin).await;
    assert_eq!(taken.status, StatusCode::BAD_REQUEST);
    dev.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_manage_pools_and_developers_are_refused_by_kubernetes() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("oscar", PASSWORD, &["operator"], false)
        .await;
    app.create_user("dave", PASSWORD, &["developer"], false)
        .await;
    let oscar = app.sign_in("oscar", PASSWORD).await;
    let pool = |name: &'static str, max: &'static str| {
        form(&[
            ("namespace", "demo"),
            ("name", name),
            ("warm_replicas", "1"),
            ("max_replicas", max),
            ("image_revision", "r1"),
            ("image", "banlieue/sandbox:r1"),
            ("cpu", "1"),
            ("memory", "2Gi"),
            ("provider", "simulated"),
        ])
    };
    let saved = app
        .send(post_form("/pools", pool("small", "2"), Some(&oscar)))
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let page = app.send(get("/pools?edit=demo/small", Some(&oscar))).await;
    assert!(page.body.contains("data-pool=\"small\""), "listed");
    assert!(
        page.body.contains("action=\"/pools\"") && page.body.contains("/pools/demo/small/delete"),
        "an operator gets the form and the Edit / Delete buttons"
    );
    assert!(!page.body.contains("pools-read-only"));
    assert!(
        page.body.contains("value=\"banlieue/sandbox:r1\""),
        "the edit form is filled"
    );
    let bad = app
        .send(post_form("/pools", pool("small", "0"), Some(&oscar)))
        .await;
    let bad = app.refused_page(bad, "/pools", &oscar).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(
        bad.body.contains("value=\"small\""),
        "what was typed is kept"
    );
    let odd = app
        .send(post_form("/pools/demo/%3F/delete", "", Some(&oscar)))
        .await;
    assert_eq!(odd.status, StatusCode::NOT_FOUND, "not a pool name");
    for (field, value) in [
        ("memory", "lots"),
        ("provider", "Not A Name"),
        ("cpu", "5000"),
        ("max_replicas", "99999"),
    ] {
        let stored = match field {
            "memory" => "2Gi",
            "provider" => "simulated",
            "cpu" => "1",
            _ => "2",
        };
        let typed = pool("small", "2").replace(&form(&[(field, stored)]), &form(&[(field, value)]));
        let refused = app.send(post_form("/pools", typed, Some(&oscar))).await;
        let refused = app.refused_page(refused, "/pools", &oscar).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{field} {value}");
        assert!(refused.alert().unwrap().contains("memory"), "{field}");
    }
    let deleted = app
        .send(post_form("/pools/demo/small/delete", "", Some(&oscar)))
        .await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER);
    let page = app.send(get("/pools", Some(&oscar))).await;
    assert!(!page.body.contains("data-pool=\"small\""));

    let dave = app.sign_in("dave", PASSWORD).await;
    // A developer may look at the pools, but Kubernetes would refuse any change: no form,
    // no Edit / Delete, and a sentence saying why.
    let looking = app.send(get("/pools", Some(&dave))).await;
    assert_eq!(looking.status, StatusCode::OK, "{}", looking.body);
    assert!(
        looking.body.contains("data-pool=\"sandbox\""),
        "{}",
        looking.body
    );
    assert!(
        !looking.body.contains("action=\"/pools\""),
        "{}",
        looking.body
    );
    assert!(!looking.body.contains("/delete\""), "{}", looking.body);
    assert!(!looking.body.contains("?edit="), "{}", looking.body);
    assert!(looking.body.contains("data-testid=\"pools-read-only\""));
    let refused = app
        .send(post_form("/pools", pool("mine", "2"), Some(&dave)))
        .await;
    let refused = app.refused_page(refused, "/pools", &dave).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(refused.alert().unwrap().contains("console:dave"));
    let audited = app.store().recent_audit(50).await.unwrap();
    let saves: Vec<(&str, &str)> = audited
        .iter()
        .filter(|e| e.action == "pool.save" && e.actor == "dave")
        .map(|e| (e.target.as_str(), e.result.as_str()))
        .collect();
    assert_eq!(saves, [("demo/mine", "forbidden")]);
    dev.shutdown().await;
}

/// Whether the header links to `/pools`.
fn links_to_pools(html: &str) -> bool {
    html.contains("href=\"/pools\"")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pools_link_shows_when_kubernetes_lets_the_person_list_pools() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    // Developers and viewers may list pools (the page shows them read-only), operators
    // manage them; a person without a role may not.
    for (name, roles) in [
        ("vera", &["viewer"][..]),
        ("dave", &["developer"][..]),
        ("oscar", &["operator"][..]),
        ("nobody", &[][..]),
    ] {
        app.create_user(name, PASSWORD, roles, false).await;
        let cookie = app.sign_in(name, PASSWORD).await;
        let dashboard = app.send(get("/", Some(&cookie))).await;
        assert_eq!(dashboard.status, StatusCode::OK, "{}", dashboard.body);
        let account = app.send(get("/account", Some(&cookie))).await;
        let pools = app.send(get("/pools", Some(&cookie))).await;
        let expected = name != "nobody";
        for page in [&dashboard, &account] {
            assert_eq!(
                links_to_pools(&page.body),
                expected,
                "{name}: {}",
                page.body
            );
        }
        if expected {
            assert_eq!(pools.status, StatusCode::OK, "{name}: {}", pools.body);
        }
    }
    dev.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_claim_says_why_in_the_persons_language() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("oscar", PASSWORD, &["operator"], false)
        .await;
    let oscar = app.sign_in("oscar", PASSWORD).await;
    // A pool that keeps nothing warm: a claim waits for a member that never comes.
    let saved = app
        .send(post_form(
            "/pools",
            form(&[
                ("namespace", "demo"),
                ("name", "cold"),
                ("warm_replicas", "0"),
                ("max_replicas", "1"),
                ("image_revision", "r1"),
                ("image", "banlieue/sandbox:r1"),
                ("cpu", "1"),
                ("memory", "1Gi"),
                ("provider", "simulated"),
            ]),
            Some(&oscar),
        ))
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let name = claim(&app, &oscar, "cold").await;
    let path = format!("/claims/demo/{name}");
    let mut page = String::new();
    for _ in 0..300 {
        page = app.send(get(&path, Some(&oscar))).await.body;
        if page.contains("data-testid=\"claim-reason\"") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        testid_text(&page, "claim-reason"),
        "Waiting: no sandbox of pool cold is free yet; it is bound as soon as one is ready."
    );
    let mut japanese = get(&path, Some(&oscar));
    japanese
        .headers_mut()
        .insert("accept-language", "ja".parse().unwrap());
    let page = app.send(japanese).await.body;
    assert!(
        testid_text(&page, "claim-reason").starts_with("待機中: プール cold に"),
        "{page}"
    );
    dev.shutdown().await;
}

/// Whether the checkbox `name` is ticked in `html`.
fn ticked(html: &str, name: &str) -> bool {
    let input = html
        .split_once(&format!("name=\"{name}\""))
        .unwrap_or_else(|| panic!("{name} missing in {html}"))
        .1;
    input[..input.find('>').unwrap()].contains("checked")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_role_form_keeps_what_was_typed_and_ticked() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    app.create_user("ada", PASSWORD, &["admin"], false).await;
    let admin = app.sign_in("ada", PASSWORD).await;

    // No custom role yet: a sentence, not an empty table.
    let page = app.send(get("/roles", Some(&admin))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("custom-roles-table-empty"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("data-testid=\"custom-roles-table\""));
    assert!(page.body.contains("data-testid=\"builtin-roles-table\""));
    assert!(!ticked(&page.body, "grant.virtualmachineclaims.create"));

    // A refused name is told the rule it broke (#18, first-time confusion); a role
    // without a permission is told that.
    let name_rule = "A role's name is a lower-case letter followed by at most 30 lower-case \
                     letters, digits or '-' (such as ci-runner), and not a built-in role's \
                     name (viewer, developer, operator, admin).";
    assert!(
        page.body
            .contains("not viewer, developer, operator or admin"),
        "the form states the rule"
    );
    for (name, grants, alert) in [
        (
            "Bad_Name",
            &[
                "grant.virtualmachineclaims.create",
                "grant.virtualmachines.get",
            ][..],
            name_rule,
        ),
        ("admin", &["grant.virtualmachinepools.list"][..], name_rule),
        (
            "a-name-of-thirty-two-characters1",
            &["grant.virtualmachinepools.list"][..],
            name_rule,
        ),
        (
            "keeper",
            &[][..],
            "Tick at least one permission for the role.",
        ),
    ] {
        let mut fields = vec![("name", name)];
        fields.extend(grants.iter().map(|g| (*g, "on")));
        let refused = app
            .send(post_form("/roles", form(&fields), Some(&admin)))
            .await;
        let refused = app.refused_page(refused, "/roles", &admin).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{name}");
        assert_eq!(refused.alert().as_deref(), Some(alert), "{name}");
        assert!(
            refused
                .body
                .contains(&format!("name=\"name\" value=\"{name}\"")),
            "{name} is typed again: {}",
            refused.body
        );
        for resource in [
            "virtualmachinepools",
            "virtualmachineclaims",
            "virtualmachines",
        ] {
            for verb in services::CUSTOM_ROLE_VERBS {
                let field = format!("grant.{resource}.{verb}");
                assert_eq!(
                    ticked(&refused.body, &field),
                    grants.contains(&field.as_str()),
                    "{name}: {field}"
                );
            }
        }
    }
    dev.shutdown().await;
}

#[tokio::test]
async fn a_cluster_that_stalls_gets_a_page_saying_so_within_the_request_timeout() {
    // A cluster that takes connections and never answers them.
    let (url, held) = banlieue_testbed::silent_cluster().await;
    let timeout = std::time::Duration::from_secs(1);
    let access = std::sync::Arc::new(
        cluster::Impersonation::new(kube::Config::new(url.parse().unwrap()))
            .with_request_timeout(timeout),
    );
    let app = TestApp::new().await.acting_through(access, None).await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    let started = std::time::Instant::now();
    let page = app.send(get("/", Some(&cookie))).await;
    assert_eq!(
        page.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("The Kubernetes cluster did not answer in time"),
        "{}",
        page.body
    );
    assert!(started.elapsed() < timeout * 5, "{:?}", started.elapsed());
    held.abort();
}
