//! The Content-Security-Policy of every response.

/// The policy: scripts only from our origin or carrying this response's nonce, wasm
/// compilation allowed for hydration (`'wasm-unsafe-eval'`, CSP Level 3), no framing
/// (`frame-ancestors 'none'`), forms only to our origin, plus `form_origin` (the OIDC
/// client's redirect origin, which the authorization page's form redirects to: browsers
/// check `form-action` on every redirect of a form submission). Without a nonce
/// (non-HTML responses) no inline script runs at all.
pub fn content_security_policy(nonce: Option<&str>, form_origin: Option<&str>) -> String {
    let scripts = match nonce {
        Some(nonce) => format!("'self' 'nonce-{nonce}' 'wasm-unsafe-eval'"),
        None => "'self' 'wasm-unsafe-eval'".to_owned(),
    };
    let forms = match form_origin {
        Some(origin) if is_plain_origin(origin) => format!("'self' {origin}"),
        _ => "'self'".to_owned(),
    };
    format!(
        "default-src 'self'; script-src {scripts}; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; \
         form-action {forms}; frame-ancestors 'none'"
    )
}

/// `scheme://host[:port]` with nothing that could end the CSP directive.
fn is_plain_origin(origin: &str) -> bool {
    origin.starts_with("http")
        && origin
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":/.-[]".contains(&b))
}

/// Sets the policy with this render's nonce on the page response.
#[cfg(feature = "ssr")]
pub(crate) fn set_page_csp(form_origin: Option<&str>) {
    use leptos::prelude::use_context;
    use leptos_axum::ResponseOptions;

    if let Some(response) = use_context::<ResponseOptions>() {
        let nonce = leptos::nonce::use_nonce();
        let policy = content_security_policy(nonce.as_deref(), form_origin);
        if let Ok(value) = http::HeaderValue::from_str(&policy) {
            response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
        }
    }
}
