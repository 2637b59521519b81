//! The transport rule for every URL the CLI talks to.

use std::net::IpAddr;

use url::{Host, Url};

use crate::error::{Error, Result};

/// Whether `host` is a loopback host: an IPv4 address in 127.0.0.0/8, the IPv6 address `::1`,
/// or the name `localhost` (exactly; no subdomains).
pub fn is_loopback_host(host: &Host<&str>) -> bool {
    match host {
        Host::Ipv4(ip) => IpAddr::V4(*ip).is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
        Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
    }
}

/// Parses `raw` and checks the transport rule: the scheme is `https`, or `http` to a loopback
/// host ([`is_loopback_host`]). User info (`user:pass@`) and fragments are refused too.
///
/// # Errors
/// [`Error::InsecureUrl`] naming the URL and the reason.
pub fn check_url(raw: &str) -> Result<Url> {
    let refuse = |reason: &str| Error::InsecureUrl {
        url: raw.to_string(),
        reason: reason.to_string(),
    };
    let url = Url::parse(raw).map_err(|e| refuse(&format!("not a URL ({e})")))?;
    let host = url.host().ok_or_else(|| refuse("no host"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("user info is not allowed in the URL"));
    }
    if url.fragment().is_some() {
        return Err(refuse("a fragment is not allowed"));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback_host(&host) => Ok(url),
        "http" => Err(refuse(
            "plain http is only allowed to a loopback address (127.0.0.0/8, ::1, localhost); use https",
        )),
        other => Err(refuse(&format!("unsupported scheme {other}"))),
    }
}

/// Checks an issuer URL: [`check_url`] plus no query (OIDC Discovery 1.0 §2: "no query or
/// fragment components"). Returns the string unchanged, since `iss` must match byte-for-byte.
///
/// # Errors
/// [`Error::InsecureUrl`].
pub fn check_issuer(raw: &str) -> Result<String> {
    let url = check_url(raw)?;
    if url.query().is_some() {
        return Err(Error::InsecureUrl {
            url: raw.to_string(),
            reason: "an issuer URL has no query".into(),
        });
    }
    Ok(raw.to_string())
}

/// `{issuer}/{path}` with exactly one slash between them.
pub fn join(issuer: &str, path: &str) -> String {
    format!(
        "{}/{}",
        issuer.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_rule() {
        let table: &[(&str, bool)] = &[
            ("https://console.example.org", true),
            ("https://console.example.org/oidc", true),
            ("http://127.0.0.1:8080", true),
            ("http://127.1.2.3", true),
            ("http://[::1]:3000", true),
            ("http://localhost:3000", true),
            ("http://LOCALHOST", true),
            ("http://console.example.org", false),
            ("http://10.0.0.1", false),
            ("http://128.0.0.1", false),
            ("http://[::2]", false),
            ("http://localhost.evil.test", false),
            ("http://127.0.0.1.evil.test", false),
            ("http://foo.localhost", false),
            ("ftp://127.0.0.1", false),
            ("https://user:pw@console.example.org", false),
            ("https://console.example.org/#frag", false),
            ("not a url", false),
        ];
        for (raw, ok) in table {
            assert_eq!(check_url(raw).is_ok(), *ok, "{raw}");
        }
    }

    #[test]
    fn issuer_keeps_its_bytes_and_refuses_a_query() {
        assert_eq!(
            check_issuer("https://c.example/").unwrap(),
            "https://c.example/"
        );
        assert!(check_issuer("https://c.example/?a=b").is_err());
    }

    #[test]
    fn join_has_one_slash() {
        assert_eq!(join("https://c/", "/kubeconfig"), "https://c/kubeconfig");
        assert_eq!(join("https://c/x", "kubeconfig"), "https://c/x/kubeconfig");
    }
}
