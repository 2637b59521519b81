//! The CLI's loopback redirect listener: `Expected::judge` on the request line a browser
//! (or any local process) sends to `http://127.0.0.1:<port>/callback`. The first byte picks
//! the method and whether `iss` is required; the rest is the request target, parsed as
//! hyper parses it (`http::Uri`).
//!
//! Properties: a code or an error counts only on `/callback` with `GET`, the expected
//! `state` and an acceptable `iss`; the same request with any other state never counts;
//! the code is the query's last `code`; an error and its description are sanitised (no
//! control or bidirectional-text characters, one trimmed line of at most 300 characters).
#![no_main]

use banlieue_cli::callback::{CALLBACK_PATH, Expected, Verdict};
use http::{Method, Uri};
use libfuzzer_sys::fuzz_target;

const STATE: &str = "st-FUZZ";
const ISSUER: &str = "https://console.example.org";

fuzz_target!(|data: &[u8]| {
    let Some((&selector, target)) = data.split_first() else {
        return;
    };
    let Ok(uri) = Uri::try_from(target) else {
        return;
    };
    let method = match selector & 0x7f {
        0..=95 => Method::GET,
        96..=111 => Method::POST,
        112..=119 => Method::HEAD,
        _ => Method::PUT,
    };
    let expected = Expected {
        state: STATE.into(),
        issuer: ISSUER.into(),
        iss_required: selector & 0x80 != 0,
    };
    let verdict = expected.judge(&method, &uri);

    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect();
    let last = |name: &str| {
        query
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let counts = matches!(
        verdict,
        Verdict::Code(_) | Verdict::Refused { .. } | Verdict::Empty
    );
    assert_eq!(
        verdict == Verdict::NotFound,
        uri.path() != CALLBACK_PATH,
        "{uri}"
    );
    if counts {
        assert_eq!(method, Method::GET);
        assert_eq!(last("state"), Some(STATE), "{uri}");
        match last("iss") {
            Some(iss) => assert_eq!(iss, ISSUER, "{uri}"),
            None => assert!(!expected.iss_required, "{uri}"),
        }
        // Bound to the state: anyone without it gets nowhere.
        let other = Expected {
            state: format!("{STATE}x"),
            ..expected.clone()
        };
        assert_eq!(other.judge(&method, &uri), Verdict::StateMismatch, "{uri}");
        // Not requiring iss never turns a counted callback into another one.
        let lenient = Expected {
            iss_required: false,
            ..expected.clone()
        };
        assert_eq!(lenient.judge(&method, &uri), verdict, "{uri}");
    }
    match &verdict {
        Verdict::Code(code) => {
            assert_eq!(Some(code.as_str()), last("code"), "{uri}");
            assert_eq!(last("error"), None, "{uri}");
        }
        Verdict::Refused { error, description } => {
            assert!(last("error").is_some(), "{uri}");
            terminal_safe(error);
            if let Some(description) = description {
                assert!(!description.is_empty());
                terminal_safe(description);
            }
        }
        _ => {}
    }
});

fn terminal_safe(text: &str) {
    assert!(text.chars().count() <= 300, "{text:?}");
    assert_eq!(text, text.trim(), "{text:?}");
    assert!(!text.contains("  "), "{text:?}");
    assert!(
        !text.chars().any(|c| c.is_control()
            || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
        "{text:?}"
    );
}
