//! The Content-Security-Policy of every response.

/// The policy: scripts only from our origin or carrying this response's nonce, wasm
/// compilation allowed for hydration (`'wasm-unsafe-eval'`, CSP Level 3), no framing
/// (`frame-ancestors 'none'`), forms only to our origin. Without a nonce (non-HTML
/// responses) no inline script runs at all.
pub fn content_security_policy(nonce: Option<&str>) -> String {
    let scripts = match nonce {
        Some(nonce) => format!("'self' 'nonce-{nonce}' 'wasm-unsafe-eval'"),
        None => "'self' 'wasm-unsafe-eval'".to_owned(),
    };
    format!(
        "default-src 'self'; script-src {scripts}; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'"
    )
}

/// Sets the policy with this render's nonce on the page response.
#[cfg(feature = "ssr")]
pub(crate) fn set_page_csp() {
    use leptos::prelude::use_context;
    use leptos_axum::ResponseOptions;

    if let Some(response) = use_context::<ResponseOptions>() {
        let nonce = leptos::nonce::use_nonce();
        let policy = content_security_policy(nonce.as_deref());
        if let Ok(value) = http::HeaderValue::from_str(&policy) {
            response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
        }
    }
}
