//! The site's files under `/pkg`: the wasm bundle, its JavaScript and the CSS. A release
//! build (`cargo leptos build --release --precompress`) writes a brotli (`.br`) and a gzip
//! (`.gz`) copy beside each; tower-http's `ServeDir` sends the one the browser's
//! `Accept-Encoding` takes, else the file itself. Hashed names (`hash-files`, see
//! [`app::assets`]) change with their content, so the browser may keep them a year
//! without asking again; any other file is checked each time.

use std::path::Path;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use leptos::prelude::LeptosOptions;
use tower_http::services::ServeDir;

/// Where the files are served: the site's `pkg` directory (`site-pkg-dir`).
pub const PREFIX: &str = "/pkg";

/// `Cache-Control` of a file whose name carries its content's hash (RFC 8246).
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `Cache-Control` of a file whose name does not: the browser revalidates it each time.
pub const REVALIDATE: &str = "no-cache";

/// The files of `<site root>/<site pkg dir>`, precompressed copies first, with their
/// cache headers (to nest at [`PREFIX`]).
pub fn router<S: Clone + Send + Sync + 'static>(leptos: &LeptosOptions) -> Router<S> {
    let dir = Path::new(&*leptos.site_root).join(&*leptos.site_pkg_dir);
    let files = ServeDir::new(dir).precompressed_br().precompressed_gzip();
    Router::new()
        .fallback_service(files)
        .layer(from_fn(cache_headers))
}

/// Adds `Cache-Control` to a file found (by the name asked for: a compressed copy is the
/// same file) and `Vary: Accept-Encoding`, since the body depends on that header.
async fn cache_headers(request: Request, next: Next) -> Response {
    let immutable = file_name(request.uri().path()).is_some_and(is_hashed);
    let mut response = next.run(request).await;
    let found = matches!(
        response.status(),
        StatusCode::OK | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED
    );
    let headers = response.headers_mut();
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if found {
        let policy = if immutable { IMMUTABLE } else { REVALIDATE };
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(policy));
    }
    response
}

/// The last segment of `path`.
fn file_name(path: &str) -> Option<&str> {
    path.rsplit('/').next().filter(|name| !name.is_empty())
}

/// Whether `name` is one cargo-leptos hashed: `<stem>.<hash>.<extension>`, the hash the
/// file's MD5 in unpadded base64url, 22 characters (cargo-leptos 0.3 `compile/hash.rs`).
fn is_hashed(name: &str) -> bool {
    let mut parts = name.rsplitn(3, '.');
    let (Some(_extension), Some(hash), Some(stem)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !stem.is_empty()
        && hash.len() == 22
        && hash
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_carrying_a_content_hash_are_immutable() {
        let cases = [
            ("banlieue-console.kq1fX2kqJZ5Zb0o9oFY6dw.css", true),
            ("banlieue-console.7mJ3VbbYBzoyBBmH_JFqmA.wasm", true),
            ("banlieue-console.Jh2tJ1QPsXyOdzj-vk5sFA.js", true),
            ("banlieue-console.css", false),
            ("banlieue-console.wasm", false),
            (".kq1fX2kqJZ5Zb0o9oFY6dw.css", false),
            ("banlieue-console.kq1fX2kqJZ5Zb0o9oFY6d.css", false),
            ("banlieue-console.kq1fX2kqJZ5Zb0o9oFY6dw+.css", false),
            ("banlieue-console.kq1fX2kqJZ5Zb0o9oFY6d=.css", false),
            ("kq1fX2kqJZ5Zb0o9oFY6dw", false),
        ];
        for (name, hashed) in cases {
            assert_eq!(is_hashed(name), hashed, "{name}");
        }
    }

    #[test]
    fn the_file_name_is_the_last_segment() {
        assert_eq!(file_name("/a/b.css"), Some("b.css"));
        assert_eq!(file_name("/b.css"), Some("b.css"));
        assert_eq!(file_name("/snippets/"), None);
    }
}
