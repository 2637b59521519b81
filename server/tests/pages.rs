//! Pages, language and the headers every response carries.

mod support;

use axum::http::{Request, StatusCode, header};
use support::*;

#[tokio::test]
async fn the_sign_in_card_speaks_the_browser_language() {
    let app = TestApp::new().await;
    let english = app.send(get("/sign-in", None)).await;
    assert_eq!(english.status, StatusCode::OK);
    assert!(english.body.contains("<html lang=\"en\""));
    assert!(english.body.contains(">Sign in<"));

    let request = Request::get("/sign-in")
        .header(header::ACCEPT_LANGUAGE, "ja-JP,ja;q=0.9,en;q=0.5")
        .body(axum::body::Body::empty())
        .unwrap();
    let japanese = app.send(request).await;
    assert!(japanese.body.contains("<html lang=\"ja\""));
    assert!(japanese.body.contains(">サインイン<"));
}

#[tokio::test]
async fn the_language_switch_remembers_the_choice_and_returns() {
    let app = TestApp::new().await;
    let response = app
        .send(post_form(
            "/locale",
            form(&[("lang", "ja"), ("next", "/sign-in")]),
            None,
        ))
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.location(), Some("/sign-in"));
    let cookie = response.header("set-cookie").unwrap();
    assert!(cookie.starts_with("banlieue-lang=ja;"), "{cookie}");
    assert!(cookie.contains("Max-Age=31536000"));
    let page = app.send(get("/sign-in", Some("banlieue-lang=ja"))).await;
    assert!(page.body.contains(">サインイン<"));

    let open_redirect = app
        .send(post_form(
            "/locale",
            form(&[("lang", "en"), ("next", "//evil.example")]),
            None,
        ))
        .await;
    assert_eq!(open_redirect.location(), Some("/"));
}

#[tokio::test]
async fn the_theme_switch_remembers_the_choice_and_returns() {
    let app = TestApp::new().await;
    // No choice: the page follows the browser.
    let page = app.send(get("/sign-in", None)).await;
    assert!(
        page.body.contains("<html lang=\"en\" class=\"\""),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("<meta name=\"color-scheme\" content=\"light dark\"")
    );

    for (theme, class, scheme) in [
        ("dark", "dark", "dark"),
        ("light", "light", "light"),
        ("system", "", "light dark"),
    ] {
        let response = app
            .send(post_form(
                "/theme",
                form(&[("theme", theme), ("next", "/sign-in")]),
                None,
            ))
            .await;
        assert_eq!(response.status, StatusCode::SEE_OTHER);
        assert_eq!(response.location(), Some("/sign-in"));
        let cookie = response.header("set-cookie").unwrap();
        assert!(
            cookie.starts_with(&format!("banlieue-theme={theme};")),
            "{cookie}"
        );
        assert!(cookie.contains("Max-Age=31536000"), "{cookie}");
        let page = app
            .send(get("/sign-in", Some(&format!("banlieue-theme={theme}"))))
            .await;
        assert!(
            page.body
                .contains(&format!("<html lang=\"en\" class=\"{class}\"")),
            "{theme}: {}",
            page.body
        );
        assert!(
            page.body
                .contains(&format!("<meta name=\"color-scheme\" content=\"{scheme}\""))
        );

        // The console's error documents follow the choice too, not only the system's
        // theme (#18): a wrong method, and a request from another site.
        let chosen = format!("banlieue-theme={theme}");
        let mut forged = post_form("/sign-out", "", Some(&chosen));
        forged
            .headers_mut()
            .insert("sec-fetch-site", "cross-site".parse().unwrap());
        for (request, status) in [
            (get("/theme", Some(&chosen)), StatusCode::METHOD_NOT_ALLOWED),
            (forged, StatusCode::FORBIDDEN),
        ] {
            let document = app.send(request).await;
            assert_eq!(document.status, status, "{theme}");
            assert!(
                document
                    .body
                    .contains(&format!("<html lang=\"en\" class=\"{class}\"")),
                "{theme}: {}",
                document.body
            );
            assert!(
                document
                    .body
                    .contains(&format!("<meta name=\"color-scheme\" content=\"{scheme}\"")),
                "{theme}: {}",
                document.body
            );
        }
    }

    // An unknown theme is not remembered; a foreign `next` is not followed.
    let odd = app
        .send(post_form(
            "/theme",
            form(&[("theme", "sepia"), ("next", "//evil.example")]),
            None,
        ))
        .await;
    assert_eq!(odd.status, StatusCode::SEE_OTHER);
    assert_eq!(odd.location(), Some("/"));
    assert_eq!(odd.header("set-cookie"), None);
    let page = app
        .send(get("/sign-in", Some("banlieue-theme=sepia")))
        .await;
    assert!(page.body.contains("<html lang=\"en\" class=\"\""));
}

#[tokio::test]
async fn pages_carry_a_nonce_csp_and_security_headers() {
    let app = TestApp::new().await;
    let page = app.send(get("/sign-in", None)).await;
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap();
    assert!(nonce.len() >= 16);
    assert!(
        page.body.contains(&format!("nonce=\"{nonce}\"")),
        "inline scripts carry the nonce"
    );
    assert!(
        !page.body.contains("<script>"),
        "no inline script without a nonce"
    );
    let second = app.send(get("/sign-in", None)).await;
    assert_ne!(
        second.header("content-security-policy").unwrap(),
        csp,
        "a fresh nonce each time"
    );

    assert_eq!(page.header("x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(
        page.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
    assert_eq!(page.header("cache-control").as_deref(), Some("no-store"));

    let redirect = app.send(get("/", None)).await;
    assert_eq!(redirect.location(), Some("/sign-in"));
    assert!(
        redirect
            .header("content-security-policy")
            .unwrap()
            .contains("script-src 'self'")
    );
}

#[tokio::test]
async fn readiness_needs_the_cluster_too() {
    let (app, dev) = TestApp::with_dev_cluster().await;
    let ready = app.send(get("/readyz", None)).await;
    assert_eq!((ready.status, ready.body.as_str()), (StatusCode::OK, "ok"));
    dev.shutdown().await;
    let unready = app.send(get("/readyz", None)).await;
    assert_eq!(
        (unready.status, unready.body.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "cluster unreachable")
    );
}

#[tokio::test]
async fn a_cluster_that_never_answers_makes_the_console_unready_not_hung() {
    // Connections are accepted (the kernel's backlog) and never answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let access = cluster::Impersonation::new(kube::Config::new(url.parse().unwrap()));
    let app = TestApp::new()
        .await
        .acting_through(std::sync::Arc::new(access), None)
        .await;
    // Far beyond the readiness timeout: only a probe that waits on the cluster fails here.
    let unready = tokio::time::timeout(
        server::READINESS_TIMEOUT * 4,
        app.send(get("/readyz", None)),
    )
    .await
    .expect("/readyz waited on a silent cluster");
    assert_eq!(
        (unready.status, unready.body.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "cluster unreachable")
    );
    drop(silent);
}

#[tokio::test]
async fn unknown_pages_are_404_once_signed_in() {
    let app = TestApp::new().await;
    app.create_user("alice", "correct horse battery", &[], false)
        .await;
    let cookie = app.sign_in("alice", "correct horse battery").await;
    let page = app.send(get("/no/such/page", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains("Page not found"));
    assert_eq!(
        app.send(get("/sign-in", Some(&cookie))).await.location(),
        Some("/")
    );
}

#[tokio::test]
async fn health_probes_answer_without_a_session() {
    let app = TestApp::new().await;
    assert_eq!(app.send(get("/healthz", None)).await.status, StatusCode::OK);
    let ready = app.send(get("/readyz", None)).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.body, "ok");
    app.store().close().await;
    assert_eq!(
        app.send(get("/readyz", None)).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[tokio::test]
async fn refusals_outside_a_form_are_console_pages_with_a_way_onward() {
    let app = TestApp::new().await;
    app.create_user("dev", "correct horse battery", &["developer"], false)
        .await;
    let dev = app.sign_in("dev", "correct horse battery").await;
    let looks_like_the_console = |page: &TestResponse| {
        page.body.contains(&format!(
            "<link rel=\"stylesheet\" href=\"{}\"",
            app::assets::stylesheet()
        )) && page.body.contains("class=\"min-h-screen bg-slate-50")
    };

    // A page for admins only, forged by a developer.
    let forged = app.send(get("/roles", Some(&dev))).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(looks_like_the_console(&forged), "{}", forged.body);
    assert!(forged.body.contains("<a href=\"/\""), "{}", forged.body);
    assert!(forged.body.contains(">Go to the dashboard<"));

    // A form posted after the session ended: a way to sign in again, in Japanese too.
    for (language, link) in [("en", ">Sign in<"), ("ja", ">サインイン<")] {
        let request = Request::post("/account/sessions/revoke-all")
            .header(header::ORIGIN, ORIGIN)
            .header(header::ACCEPT_LANGUAGE, language)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(axum::body::Body::empty())
            .unwrap();
        let ended = app.send(request).await;
        assert_eq!(ended.status, StatusCode::UNAUTHORIZED);
        assert!(looks_like_the_console(&ended), "{}", ended.body);
        assert!(ended.body.contains(&format!("<html lang=\"{language}\"")));
        assert!(
            ended.body.contains("<a href=\"/sign-in\""),
            "{}",
            ended.body
        );
        assert!(ended.body.contains(link), "{}", ended.body);
    }
}
