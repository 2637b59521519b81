//! Sign-in, sessions, must-change, sign-out and the refusals around them, through the
//! whole router (middleware, session store, pages).

mod support;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::{StatusCode, header};
use banlieue_identity::ThrottlePolicy;
use support::*;

const PASSWORD: &str = "correct horse battery";

#[tokio::test]
async fn sign_in_with_must_change_leads_to_the_password_page_and_then_the_dashboard() {
    let app = TestApp::new().await;
    app.create_user("admin", PASSWORD, &["admin"], true).await;

    let response = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "admin"), ("password", PASSWORD)]),
            None,
        ))
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.location(), Some("/change-password"));
    let cookie = response.session_cookie().unwrap();
    let set_cookie = response.header("set-cookie").unwrap();
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(set_cookie.contains(flag), "{set_cookie}");
    }
    assert!(
        !set_cookie.contains("Secure"),
        "plain http gets no Secure flag"
    );

    // The server, not the page, keeps the user on the password page.
    let dashboard = app.send(get("/", Some(&cookie))).await;
    assert_eq!(dashboard.status, StatusCode::SEE_OTHER);
    assert_eq!(dashboard.location(), Some("/change-password"));
    let other_post = app.send(post_form("/anything", "", Some(&cookie))).await;
    assert_eq!(other_post.status, StatusCode::FORBIDDEN);

    let page = app.send(get("/change-password", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("data-testid=\"must-change\""));
    // The first admin's password was printed at the first start, not set by an
    // administrator: the page says what holds for every one-time password (#18).
    assert!(
        page.body
            .contains("This password was meant for one sign-in only. Choose your own"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("administrator"), "{}", page.body);

    let changed = app
        .send(post_form(
            "/change-password",
            form(&[
                ("current_password", PASSWORD),
                ("new_password", "a brand new passphrase"),
                ("confirm_password", "a brand new passphrase"),
            ]),
            Some(&cookie),
        ))
        .await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    assert_eq!(changed.location(), Some("/"));
    let new_cookie = changed.session_cookie().unwrap();

    let dashboard = app.send(get("/", Some(&new_cookie))).await;
    assert_eq!(dashboard.status, StatusCode::OK);
    assert!(dashboard.body.contains("Welcome, admin."));
    assert!(dashboard.body.contains("action=\"/sign-out\""));
}

#[tokio::test]
async fn unknown_user_and_wrong_password_get_the_same_answer() {
    let app = TestApp::unthrottled().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let wrong = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", "nope")]),
            None,
        ))
        .await;
    let unknown = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "mallory"), ("password", "nope")]),
            None,
        ))
        .await;
    assert_eq!(wrong.status, StatusCode::OK);
    assert_eq!(
        wrong.alert().as_deref(),
        Some("The user name or password is wrong.")
    );
    assert_eq!(wrong.status, unknown.status);
    // The typed name is kept in the form, so compare with the names swapped in.
    assert_eq!(
        wrong.body_without_nonce().replace("alice", "NAME"),
        unknown.body_without_nonce().replace("mallory", "NAME")
    );
    assert!(
        wrong.session_cookie().is_none(),
        "a failed sign-in creates no session"
    );
}

/// Public reports against other consoles: empty passwords short-cutting the hash, and
/// disabled or must-change users answering differently.
#[tokio::test]
async fn every_refused_sign_in_costs_one_verification_and_looks_the_same() {
    let app = TestApp::unthrottled().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let disabled = app.create_user("dora", PASSWORD, &[], false).await;
    app.store()
        .set_disabled(disabled.id, true, time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    app.create_user("mona", PASSWORD, &[], true).await;

    let cases = [
        ("alice", ""),
        ("nobody", ""),
        ("alice", "wrong password"),
        ("nobody", "wrong password"),
        ("dora", "wrong password"),
        ("mona", "wrong password"),
    ];
    let mut reference: Option<(StatusCode, String)> = None;
    for (name, password) in cases {
        for _ in 0..50 {
            let before = app.accounts.hasher().verifications();
            let response = app
                .send(post_form(
                    "/sign-in",
                    form(&[("user_name", name), ("password", password)]),
                    None,
                ))
                .await;
            assert_eq!(
                app.accounts.hasher().verifications(),
                before + 1,
                "({name}, {password:?}) must cost exactly one argon2id verification"
            );
            let body = response.body_without_nonce().replace(name, "NAME");
            match &reference {
                None => reference = Some((response.status, body)),
                Some((status, reference_body)) => {
                    assert_eq!(response.status, *status, "({name}, {password:?})");
                    assert_eq!(&body, reference_body, "({name}, {password:?})");
                }
            }
        }
    }
    // Disabled users cannot sign in even with the right password.
    let response = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "dora"), ("password", PASSWORD)]),
            None,
        ))
        .await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(response.session_cookie().is_none());
}

#[tokio::test]
async fn passwords_are_never_truncated() {
    let app = TestApp::unthrottled().await;
    let long = "p".repeat(100);
    app.create_user("lena", &long, &[], false).await;
    let altered = format!("{}{}", &long[..72], "q".repeat(28));
    let response = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "lena"), ("password", &altered)]),
            None,
        ))
        .await;
    assert!(response.session_cookie().is_none());
    app.sign_in("lena", &long).await;
}

#[tokio::test]
async fn oversized_and_malformed_forms_are_refused_before_hashing() {
    let app = TestApp::unthrottled().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    let before = app.accounts.hasher().verifications();

    let megabyte = "x".repeat(1 << 20);
    let started = Instant::now();
    let huge = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", &megabyte)]),
            None,
        ))
        .await;
    assert_eq!(huge.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        huge.alert().as_deref(),
        Some("The form was too large to accept.")
    );
    let huge_change = app
        .send(post_form(
            "/change-password",
            form(&[
                ("current_password", &megabyte),
                ("new_password", "x"),
                ("confirm_password", "x"),
            ]),
            Some(&cookie),
        ))
        .await;
    assert_eq!(huge_change.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused without hashing"
    );

    let ten_kb = "y".repeat(10 * 1024);
    let long = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", &ten_kb)]),
            None,
        ))
        .await;
    assert_eq!(long.status, StatusCode::OK);
    assert_eq!(
        long.alert().as_deref(),
        Some("Passwords are at most 128 bytes long.")
    );

    let invalid_utf8 = app
        .send(post_form(
            "/sign-in",
            &b"user_name=alice&password=%FF%FE"[..],
            None,
        ))
        .await;
    assert_eq!(invalid_utf8.status, StatusCode::BAD_REQUEST);
    assert!(invalid_utf8.alert().unwrap().contains("could not be read"));

    let empty = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", ""), ("password", "")]),
            None,
        ))
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    assert_eq!(empty.alert().as_deref(), Some("Enter your user name."));

    assert_eq!(
        app.accounts.hasher().verifications(),
        before,
        "no hashing on any of these"
    );
}

#[tokio::test]
async fn cross_site_posts_are_refused() {
    let app = TestApp::new().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let body = form(&[("user_name", "alice"), ("password", PASSWORD)]);
    let cross_site = axum::http::Request::post("/sign-in")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ORIGIN, "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .header(header::ACCEPT_LANGUAGE, "ja")
        .body(body.clone().into())
        .unwrap();
    let response = app.send(cross_site).await;
    assert_eq!(response.status, StatusCode::FORBIDDEN);
    assert_eq!(
        response.alert().as_deref(),
        Some("別のサイトからのリクエストのため拒否しました。")
    );
    assert!(response.session_cookie().is_none());

    let no_origin = axum::http::Request::post("/sign-in")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body.into())
        .unwrap();
    assert_eq!(app.send(no_origin).await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_forged_cross_site_post_riding_a_session_is_audited_as_its_person() {
    let app = TestApp::new().await;
    app.create_user("alice", PASSWORD, &["admin"], false).await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    let forged = |cookie: Option<&str>| {
        let mut request = axum::http::Request::post("/users/alice/disable")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ORIGIN, "https://evil.example")
            .header("sec-fetch-site", "cross-site");
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        request.body(axum::body::Body::from("version=1")).unwrap()
    };
    assert_eq!(
        app.send(forged(Some(&cookie))).await.status,
        StatusCode::FORBIDDEN
    );
    // Without a session it names nobody: no row (a flood would otherwise fill the log).
    assert_eq!(app.send(forged(None)).await.status, StatusCode::FORBIDDEN);
    let events = app.store().recent_audit(10).await.unwrap();
    let refused: Vec<_> = events
        .iter()
        .filter(|e| e.action == "request.cross-site")
        .map(|e| (e.actor.as_str(), e.target.as_str(), e.result.as_str()))
        .collect();
    assert_eq!(refused, [("alice", "POST /users/alice/disable", "refused")]);
    let row = events
        .iter()
        .find(|e| e.action == "request.cross-site")
        .unwrap();
    assert!(row.detail.contains("https://evil.example"), "{row:?}");
    // A hostile page firing forgeries without end writes one row a minute, not one each.
    for _ in 0..50 {
        assert_eq!(
            app.send(forged(Some(&cookie))).await.status,
            StatusCode::FORBIDDEN
        );
    }
    let rows = app.store().recent_audit(100).await.unwrap();
    assert_eq!(
        rows.iter()
            .filter(|e| e.action == "request.cross-site")
            .count(),
        1,
        "throttled per person"
    );
    // The person is still enabled.
    assert_eq!(
        app.send(get("/", Some(&cookie))).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn session_ids_rotate_and_old_ones_die() {
    let app = TestApp::new().await;
    app.create_user("admin", PASSWORD, &["admin"], true).await;
    // An id planted before sign-in (fixation attempt).
    let planted = "banlieue-session=AAAAAAAAAAAAAAAAAAAAAA";
    let signed_in = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "admin"), ("password", PASSWORD)]),
            Some(planted),
        ))
        .await;
    let after_sign_in = signed_in.session_cookie().unwrap();
    assert_ne!(after_sign_in, planted);

    let changed = app
        .send(post_form(
            "/change-password",
            form(&[
                ("current_password", PASSWORD),
                ("new_password", "another long passphrase"),
                ("confirm_password", "another long passphrase"),
            ]),
            Some(&after_sign_in),
        ))
        .await;
    let after_change = changed.session_cookie().unwrap();
    assert_ne!(after_change, after_sign_in);
    assert_ne!(after_change, planted);

    for dead in [planted, after_sign_in.as_str()] {
        let response = app.send(get("/", Some(dead))).await;
        assert_eq!(response.location(), Some("/sign-in"), "{dead} must be dead");
    }
    assert_eq!(
        app.send(get("/", Some(&after_change))).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn sign_out_deletes_the_session_on_the_server_and_is_audited() {
    let app = TestApp::new().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    assert_eq!(
        app.send(get("/", Some(&cookie))).await.status,
        StatusCode::OK
    );
    let out = app.send(post_form("/sign-out", "", Some(&cookie))).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.location(), Some("/sign-in"));
    // Replaying the old cookie finds nothing.
    let replay = app.send(get("/", Some(&cookie))).await;
    assert_eq!(replay.location(), Some("/sign-in"));
    let events = app.store().recent_audit(10).await.unwrap();
    let signed_out: Vec<_> = events
        .iter()
        .filter(|e| e.action == "session.sign-out")
        .map(|e| (e.actor.as_str(), e.target.as_str(), e.result.as_str()))
        .collect();
    assert_eq!(signed_out, [("alice", "alice", "success")]);
}

#[tokio::test]
async fn changing_the_password_ends_other_sessions_but_not_this_one() {
    let app = TestApp::new().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let laptop = app.sign_in("alice", PASSWORD).await;
    let phone = app.sign_in("alice", PASSWORD).await;

    let change = |current: &'static str, new: &'static str, confirm: &'static str| {
        post_form(
            "/change-password",
            form(&[
                ("current_password", current),
                ("new_password", new),
                ("confirm_password", confirm),
            ]),
            Some(&laptop),
        )
    };
    let differ = app
        .send(change(PASSWORD, "new passphrase one", "new passphrase two"))
        .await;
    assert_eq!(
        differ.alert().as_deref(),
        Some("The two new passwords are not the same.")
    );
    let short = app.send(change(PASSWORD, "short", "short")).await;
    assert_eq!(
        short.alert().as_deref(),
        Some("The new password must be at least 12 bytes long.")
    );
    let same = app.send(change(PASSWORD, PASSWORD, PASSWORD)).await;
    assert_eq!(
        same.alert().as_deref(),
        Some("The new password must differ from the current one.")
    );
    let wrong = app
        .send(change(
            "not my password",
            "new passphrase one",
            "new passphrase one",
        ))
        .await;
    assert_eq!(
        wrong.alert().as_deref(),
        Some("The current password is wrong.")
    );
    assert_eq!(
        app.send(get("/", Some(&phone))).await.status,
        StatusCode::OK,
        "refusals change nothing"
    );

    let ok = app
        .send(change(PASSWORD, "new passphrase one", "new passphrase one"))
        .await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
    let laptop = ok.session_cookie().unwrap();
    assert_eq!(
        app.send(get("/", Some(&laptop))).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(get("/", Some(&phone))).await.location(),
        Some("/sign-in")
    );
    app.sign_in("alice", "new passphrase one").await;
}

#[tokio::test]
async fn disabling_a_user_ends_their_session() {
    let app = TestApp::new().await;
    let user = app.create_user("alice", PASSWORD, &[], false).await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    app.store()
        .set_disabled(user.id, true, time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!(
        app.send(get("/", Some(&cookie))).await.location(),
        Some("/sign-in")
    );
}

#[tokio::test]
async fn repeated_failures_are_throttled_alike_for_known_and_unknown_users() {
    // A minute, so the block outlasts every request below even on a slow machine; a
    // user's ceiling of five, to reach it from five addresses.
    let app = TestApp::with_throttle(ThrottlePolicy {
        base_delay: std::time::Duration::from_secs(60),
        free_failures_per_user: 5,
        ..ThrottlePolicy::default()
    })
    .await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let attempt = |name: &'static str, ip: [u8; 4]| {
        post_form_from(
            "/sign-in",
            form(&[("user_name", name), ("password", "wrong")]),
            None,
            IpAddr::from(ip),
        )
    };
    for name in ["alice", "nobody"] {
        for i in 0..5 {
            let response = app.send(attempt(name, [127, 0, 1, i])).await;
            assert_eq!(
                response.status,
                StatusCode::OK,
                "five failures are answered"
            );
        }
        // The next attempt, from another address too, waits.
        let blocked = app.send(attempt(name, [127, 0, 2, 1])).await;
        assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS, "{name}");
        assert_eq!(blocked.header("retry-after").as_deref(), Some("60"));
        assert!(blocked.alert().unwrap().contains("Try again in 60 seconds"));
    }
    // Even the right password waits while the user is blocked.
    let right = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", PASSWORD)]),
            None,
        ))
        .await;
    assert_eq!(right.status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_parallel_flood_is_counted_before_hashing_and_others_still_sign_in() {
    let app = TestApp::new().await;
    app.create_user("admin", PASSWORD, &["admin"], false).await;
    app.create_user("bob", PASSWORD, &[], false).await;
    let before = app.accounts.hasher().verifications();
    let attacker = IpAddr::from([198, 51, 100, 7]);
    let flood = (0..200).map(|_| {
        app.send(post_form_from(
            "/sign-in",
            form(&[("user_name", "admin"), ("password", "guess")]),
            None,
            attacker,
        ))
    });
    let bob = app.send(post_form_from(
        "/sign-in",
        form(&[("user_name", "bob"), ("password", PASSWORD)]),
        None,
        IpAddr::from([203, 0, 113, 9]),
    ));
    let (flood, bob) = tokio::join!(futures::future::join_all(flood), bob);
    assert_eq!(bob.status, StatusCode::SEE_OTHER, "{}", bob.body);
    let answered = flood.iter().filter(|r| r.status == StatusCode::OK).count();
    let refused = flood
        .iter()
        .filter(|r| r.status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!(answered + refused, 200);
    // One attempt per address (and per name) is checked at a time, and five failures
    // block the address: at most five of the 200 were verified, whatever the timing.
    let verified = app.accounts.hasher().verifications() - before - 1;
    assert!(
        (1..=5).contains(&verified) && answered as u64 == verified,
        "{verified} verified, {answered} answered"
    );
    // The refusals wrote a summary row, not 200.
    let throttled_rows = app
        .store()
        .recent_audit(500)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.result == "throttled")
        .count();
    assert!(
        throttled_rows <= 2,
        "{throttled_rows} audit rows for the refusals"
    );
    let metrics = app.metrics().await;
    assert_eq!(
        sample(&metrics, r#"banlieue_sign_ins_total{result="throttled"}"#),
        Some(refused as f64),
        "the metric counts every refusal"
    );
}

#[tokio::test]
async fn nobody_elsewhere_can_lock_a_person_out_of_their_usual_address() {
    let app = TestApp::with_throttle(ThrottlePolicy {
        base_delay: std::time::Duration::from_secs(60),
        free_failures_per_user: 10,
        ..ThrottlePolicy::default()
    })
    .await;
    app.create_user("admin", PASSWORD, &["admin"], false).await;
    let usual = IpAddr::from([192, 0, 2, 10]);
    let sign_in = |password: &'static str, from: IpAddr| {
        app.send(post_form_from(
            "/sign-in",
            form(&[("user_name", "admin"), ("password", password)]),
            None,
            from,
        ))
    };
    assert_eq!(sign_in(PASSWORD, usual).await.status, StatusCode::SEE_OTHER);
    // An attacker guesses from ten other addresses, three times each: each address is
    // within its own five, together they pass the user's ceiling of ten.
    for i in 0..10u8 {
        for _ in 0..3 {
            sign_in("guess", IpAddr::from([198, 51, 100, i])).await;
        }
    }
    let fresh = sign_in(PASSWORD, IpAddr::from([203, 0, 113, 1])).await;
    assert_eq!(
        fresh.status,
        StatusCode::TOO_MANY_REQUESTS,
        "a new address waits once the user's ceiling is reached"
    );
    assert_eq!(
        sign_in(PASSWORD, usual).await.status,
        StatusCode::SEE_OTHER,
        "the usual address signs in with the right password"
    );
    // The usual address keeps its own back-off.
    for _ in 0..5 {
        sign_in("typo", usual).await;
    }
    assert_eq!(
        sign_in(PASSWORD, usual).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_full_hash_queue_answers_503_at_once() {
    // Parameters that make a hash take a while, so the queue fills.
    let hasher = banlieue_identity::PasswordHasher::with_params(
        argon2::Params::new(32 * 1024, 2, 1, None).unwrap(),
    );
    let app = TestApp::with_hasher(hasher, ThrottlePolicy::default()).await;
    let attempts = (0..40u8).map(|i| {
        let name = format!("user{i}");
        app.send(post_form_from(
            "/sign-in",
            form(&[("user_name", &name), ("password", "guess")]),
            None,
            IpAddr::from([198, 51, i, 1]),
        ))
    });
    let before = app.accounts.hasher().verifications();
    let responses = futures::future::join_all(attempts).await;
    let busy: Vec<_> = responses
        .iter()
        .filter(|r| r.status == StatusCode::SERVICE_UNAVAILABLE)
        .collect();
    let checked = app.accounts.hasher().verifications() - before;
    assert!(!busy.is_empty(), "some attempts found the queue full");
    assert_eq!(
        busy.len() as u64 + checked,
        40,
        "the refused ones were not hashed"
    );
    assert!(
        busy.iter()
            .all(|r| r.header("retry-after").as_deref() == Some("1"))
    );
    assert!(busy[0].alert().unwrap().contains("Try again in one second"));
    // Fresh names from fresh addresses share no throttle key: the refusals still write
    // one row for the window, not one each; the metric counts every one.
    let busy_rows = app
        .store()
        .recent_audit(500)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.result == "busy")
        .count();
    assert_eq!(busy_rows, 1, "{} refusals", busy.len());
    assert_eq!(
        sample(
            &app.metrics().await,
            r#"banlieue_sign_ins_total{result="busy"}"#
        ),
        Some(busy.len() as f64)
    );
}

#[tokio::test]
async fn a_flood_from_many_addresses_leaves_room_for_a_person_at_their_usual_address() {
    let hasher = banlieue_identity::PasswordHasher::with_params(
        argon2::Params::new(32 * 1024, 2, 1, None).unwrap(),
    );
    let app = Arc::new(TestApp::with_hasher(hasher, ThrottlePolicy::default()).await);
    app.create_user("bob", PASSWORD, &[], false).await;
    let usual = IpAddr::from([203, 0, 113, 9]);
    let bob = || {
        app.send(post_form_from(
            "/sign-in",
            form(&[("user_name", "bob"), ("password", PASSWORD)]),
            None,
            usual,
        ))
    };
    assert_eq!(
        bob().await.status,
        StatusCode::SEE_OTHER,
        "bob's usual address"
    );
    // A new name from a new address each time: every attempt passes the back-off, so
    // only the hash queue stands in the flood's way.
    let busy = Arc::new(AtomicUsize::new(0));
    let flood: Vec<_> = (0..200u16)
        .map(|i| {
            let (app, busy) = (app.clone(), busy.clone());
            tokio::spawn(async move {
                let name = format!("user{i}");
                let response = app
                    .send(post_form_from(
                        "/sign-in",
                        form(&[("user_name", &name), ("password", "guess")]),
                        None,
                        IpAddr::from([198, 51, (i >> 8) as u8, i as u8]),
                    ))
                    .await;
                if response.status == StatusCode::SERVICE_UNAVAILABLE {
                    busy.fetch_add(1, Ordering::AcqRel);
                }
                response.status
            })
        })
        .collect();
    while busy.load(Ordering::Acquire) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The anonymous lane is full now; bob's sign-in queues in his own.
    let during = bob().await;
    assert_eq!(during.status, StatusCode::SEE_OTHER, "{}", during.body);
    let statuses = futures::future::join_all(flood).await;
    assert!(statuses.iter().all(|s| matches!(
        *s.as_ref().unwrap(),
        StatusCode::OK | StatusCode::SERVICE_UNAVAILABLE
    )));
}

#[tokio::test]
async fn per_source_throttling_covers_every_name() {
    let app = TestApp::with_throttle(ThrottlePolicy {
        base_delay: std::time::Duration::from_secs(60),
        ..ThrottlePolicy::default()
    })
    .await;
    for i in 0..5 {
        let name = format!("user{i}");
        app.send(post_form(
            "/sign-in",
            form(&[("user_name", &name), ("password", "x")]),
            None,
        ))
        .await;
    }
    let response = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "fresh"), ("password", "x")]),
            None,
        ))
        .await;
    assert_eq!(response.status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn sign_ins_are_audited() {
    let app = TestApp::unthrottled().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    app.send(post_form(
        "/sign-in",
        form(&[("user_name", "alice"), ("password", "bad")]),
        None,
    ))
    .await;
    app.sign_in("alice", PASSWORD).await;
    // (The oldest row is alice's creation.)
    let events = app.store().recent_audit(2).await.unwrap();
    let summary: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e.actor.as_str(),
                e.action.as_str(),
                e.target.as_str(),
                e.result.as_str(),
                e.source_ip.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alice", "session.sign-in", "alice", "success", "127.0.0.1"),
            (
                "-",
                "session.sign-in",
                "alice",
                "invalid-credentials",
                "127.0.0.1"
            ),
        ]
    );
}

#[tokio::test]
async fn old_hash_parameters_are_upgraded_at_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/console.db", dir.path().display());
    let store = banlieue_store::Store::open(&url).await.unwrap();
    let old = TestApp::on_store(
        store.clone(),
        cheap_hasher(),
        ThrottlePolicy::default(),
        tempfile::tempdir().unwrap(),
    )
    .await;
    let user = old.create_user("alice", PASSWORD, &[], false).await;
    assert!(
        store
            .password_phc(user.id)
            .await
            .unwrap()
            .unwrap()
            .contains("m=1024,t=1,p=1")
    );

    let stronger = banlieue_identity::PasswordHasher::with_params(
        argon2::Params::new(2048, 2, 1, None).unwrap(),
    );
    let new = TestApp::on_store(store.clone(), stronger, ThrottlePolicy::default(), dir).await;
    new.sign_in("alice", PASSWORD).await;
    let phc = store.password_phc(user.id).await.unwrap().unwrap();
    assert!(phc.contains("m=2048,t=2,p=1"), "{phc}");
    new.sign_in("alice", PASSWORD).await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_address_is_the_clients() {
    let failed_from = |peer: [u8; 4], forwarded: &str| {
        let mut request = post_form_from(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", "bad")]),
            None,
            IpAddr::from(peer),
        );
        request
            .headers_mut()
            .insert("x-forwarded-for", forwarded.parse().unwrap());
        request
    };
    let sources = |app: &TestApp| {
        let store = app.store().clone();
        async move {
            let events = store.recent_audit(10).await.unwrap();
            events.into_iter().map(|e| e.source_ip).collect::<Vec<_>>()
        }
    };

    let proxied = TestApp::with_args(&["--trusted-proxies", "10.0.0.0/8, 192.0.2.1"]).await;
    proxied
        .send(failed_from([10, 0, 0, 5], "198.51.100.1, 203.0.113.9"))
        .await;
    proxied
        .send(failed_from([192, 0, 2, 1], "203.0.113.10"))
        .await;
    proxied
        .send(failed_from([198, 51, 100, 2], "203.0.113.11"))
        .await;
    assert_eq!(
        sources(&proxied).await,
        ["198.51.100.2", "203.0.113.10", "203.0.113.9"],
        "newest first: a stranger's header is ignored, each proxy's is believed"
    );

    let direct = TestApp::with_args(&[]).await;
    direct.send(failed_from([10, 0, 0, 5], "203.0.113.9")).await;
    assert_eq!(sources(&direct).await, ["10.0.0.5"]);
}

#[tokio::test]
async fn a_deep_link_survives_the_sign_in_but_never_leads_off_the_site() {
    let app = TestApp::new().await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let asked = app.send(get("/account?tab=sessions", None)).await;
    assert_eq!(asked.status, StatusCode::SEE_OTHER);
    let to_sign_in = asked.location().unwrap().to_owned();
    assert_eq!(to_sign_in, "/sign-in?next=%2Faccount%3Ftab%3Dsessions");
    let page = app.send(get(&to_sign_in, None)).await;
    assert!(
        page.body
            .contains("action=\"/sign-in?next=%2Faccount%3Ftab%3Dsessions\""),
        "the form posts the return path along: {}",
        page.body
    );
    let credentials = || form(&[("user_name", "alice"), ("password", PASSWORD)]);
    // A refusal keeps it too.
    let wrong = app
        .send(post_form(
            &to_sign_in,
            form(&[("user_name", "alice"), ("password", "wrong")]),
            None,
        ))
        .await;
    assert!(wrong.body.contains("action=\"/sign-in?next=%2Faccount"));
    let signed_in = app.send(post_form(&to_sign_in, credentials(), None)).await;
    assert_eq!(signed_in.status, StatusCode::SEE_OTHER);
    assert_eq!(signed_in.location(), Some("/account?tab=sessions"));

    // The dashboard needs no return path; other sites, schemes and the sign-in page
    // itself are never followed.
    let root = app.send(get("/", None)).await;
    assert_eq!(root.location(), Some("/sign-in"));
    for next in [
        "https%3A%2F%2Fevil.example%2F",
        "%2F%2Fevil.example",
        "%2F%5Cevil.example",
        "%2F%09%2Fevil.example",
        "javascript%3Aalert(1)",
        "%2Fsign-in%3Fnext%3D%252Fusers",
        "%2Fsign-out",
    ] {
        let signed_in = app
            .send(post_form(
                &format!("/sign-in?next={next}"),
                credentials(),
                None,
            ))
            .await;
        assert_eq!(signed_in.location(), Some("/"), "next={next}");
    }
}
