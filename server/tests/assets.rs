//! The site's files as a browser gets them: the precompressed copy its `Accept-Encoding`
//! takes (brotli before gzip), the file itself otherwise; a year's `immutable` caching
//! for names carrying a content hash, revalidation for others, `no-store` for pages.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use support::{TestApp, TestResponse, get};

const WASM: &str = "/pkg/banlieue-console.7mJ3VbbYBzoyBBmH_JFqmA.wasm";

/// A site as `cargo leptos build --release --precompress` leaves it: a hashed wasm with
/// its brotli and gzip copies (bodies told apart by their text), and an unhashed file.
fn site() -> tempfile::TempDir {
    let site = tempfile::tempdir().unwrap();
    let pkg = site.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    let wasm = pkg.join(WASM.trim_start_matches("/pkg/"));
    std::fs::write(&wasm, "the wasm itself").unwrap();
    std::fs::write(wasm.with_extension("wasm.br"), "brotli copy").unwrap();
    std::fs::write(wasm.with_extension("wasm.gz"), "gzip copy").unwrap();
    std::fs::write(pkg.join("unhashed.js"), "export {}").unwrap();
    site
}

async fn fetch(app: &TestApp, path: &str, accept_encoding: Option<&str>) -> TestResponse {
    let mut request = Request::get(path);
    if let Some(encodings) = accept_encoding {
        request = request.header(header::ACCEPT_ENCODING, encodings);
    }
    app.send(request.body(Body::empty()).unwrap()).await
}

#[tokio::test]
async fn the_wasm_comes_in_the_encoding_the_browser_accepts() {
    let site = site();
    let app = TestApp::serving_site(site.path()).await;
    let cases = [
        (Some("gzip, deflate, br, zstd"), Some("br"), "brotli copy"),
        (Some("br;q=1.0, gzip;q=0.8"), Some("br"), "brotli copy"),
        (Some("gzip"), Some("gzip"), "gzip copy"),
        (Some("identity"), None, "the wasm itself"),
        (None, None, "the wasm itself"),
    ];
    for (accepted, encoding, body) in cases {
        let response = fetch(&app, WASM, accepted).await;
        assert_eq!(response.status, StatusCode::OK, "{accepted:?}");
        assert_eq!(
            response.header("content-encoding").as_deref(),
            encoding,
            "{accepted:?}"
        );
        assert_eq!(response.body, body, "{accepted:?}");
        assert_eq!(
            response.header("content-type").as_deref(),
            Some("application/wasm")
        );
        assert_eq!(
            response.header("vary").as_deref(),
            Some("accept-encoding"),
            "a cache must not hand one encoding to a browser that asked for another"
        );
    }
}

#[tokio::test]
async fn hashed_names_are_kept_a_year_others_checked_and_pages_never_stored() {
    let site = site();
    let app = TestApp::serving_site(site.path()).await;

    let hashed = fetch(&app, WASM, Some("br")).await;
    assert_eq!(
        hashed.header("cache-control").as_deref(),
        Some("public, max-age=31536000, immutable")
    );
    // The security headers wrap the files too.
    assert_eq!(
        hashed.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );

    let unhashed = fetch(&app, "/pkg/unhashed.js", Some("br")).await;
    assert_eq!(unhashed.status, StatusCode::OK);
    assert_eq!(
        unhashed.header("cache-control").as_deref(),
        Some("no-cache")
    );

    let missing = fetch(
        &app,
        "/pkg/banlieue-console.AAAAAAAAAAAAAAAAAAAAAA.wasm",
        None,
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.header("cache-control"), None);

    let page = app.send(get("/sign-in", None)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.header("cache-control").as_deref(), Some("no-store"));
}
