//! The names Kubernetes gives objects (Kubernetes docs, "Object Names and IDs"): checked
//! before a name taken from a URL or a form goes into an API path, so nothing but a name
//! (no `/`, `?`, `..` or encoded bytes) ever reaches the API server.

/// An RFC 1123 label, as namespaces are named: 1–63 characters of `[a-z0-9-]`, starting
/// and ending with a letter or digit.
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&bytes.len())
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
}

/// An RFC 1123 subdomain, as most objects (claims, pools) are named: at most 253
/// characters of dot-separated [labels](is_dns_label).
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains_follow_rfc_1123() {
        for good in ["a", "demo", "0abc", "a-b", &"a".repeat(63)] {
            assert!(is_dns_label(good), "{good}");
            assert!(is_dns_subdomain(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "a/b",
            "?",
            "..",
            "a b",
            "a\0b",
            "é",
            &"a".repeat(64),
        ] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        assert!(is_dns_subdomain("alice-x2k.v1"));
        for bad in [
            "",
            ".",
            "a..b",
            "a.",
            ".a",
            "a/b",
            "a?watch=true",
            "%2F",
            &"a.".repeat(127),
        ] {
            assert!(!is_dns_subdomain(bad), "{bad:?}");
        }
    }
}
