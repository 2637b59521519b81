//! The two public clients the issuer serves (SPEC §4) and their redirect-URI rules.

use url::{Host, Url};

/// The command-line tool: kubectl's exec plugin and `banlieue auth login`.
pub const CLI_CLIENT_ID: &str = "banlieue-cli";
/// The console itself, for its own API.
pub const CONSOLE_CLIENT_ID: &str = "banlieue-console";

/// The audience kubectl tokens carry (the API server's `jwt[].issuer.audiences`).
pub const KUBERNETES_AUDIENCE: &str = "kubernetes";
/// The audience of tokens for the console's own API.
pub const CONSOLE_AUDIENCE: &str = "banlieue-console";

/// A registered public client (RFC 6749 §2.1: no secret, PKCE required instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub id: &'static str,
    /// Takes the CLI's loopback redirect (RFC 8252 §7.3). A client without it has no
    /// redirect URI registered, so no authorization request of it is ever honoured: the
    /// console (SPEC §4, "its own browser use, if any") has none today.
    loopback_redirect: bool,
    /// The audience when the request names none.
    pub default_audience: &'static str,
    /// Every audience it may ask tokens for.
    audiences: &'static [&'static str],
}

impl Client {
    /// The registered client with this id.
    pub fn find(id: &str) -> Option<Self> {
        match id {
            CLI_CLIENT_ID => Some(Self {
                id: CLI_CLIENT_ID,
                loopback_redirect: true,
                default_audience: KUBERNETES_AUDIENCE,
                audiences: &[KUBERNETES_AUDIENCE, CONSOLE_AUDIENCE],
            }),
            CONSOLE_CLIENT_ID => Some(Self {
                id: CONSOLE_CLIENT_ID,
                loopback_redirect: false,
                default_audience: CONSOLE_AUDIENCE,
                audiences: &[CONSOLE_AUDIENCE],
            }),
            _ => None,
        }
    }

    /// Whether `redirect_uri` is registered for this client: the CLI's loopback redirect,
    /// any port on the literal `127.0.0.1` (RFC 8252 §7.3) with path `/callback` and
    /// nothing else, compared as an exact string once parsed (RFC 6749 §3.1.2.3). `[::1]`
    /// is refused on purpose: the CLI listens on 127.0.0.1 only, so one literal address
    /// keeps the rule exact; `localhost` is refused as RFC 8252 §8.3 advises (it may
    /// resolve elsewhere).
    pub fn accepts_redirect(&self, redirect_uri: &str) -> bool {
        self.loopback_redirect && is_cli_loopback(redirect_uri)
    }

    /// Whether the client may ask for tokens for `audience`: the CLI for kubectl and for
    /// the console's API, the console only for its own.
    pub fn accepts_audience(&self, audience: &str) -> bool {
        self.audiences.contains(&audience)
    }
}

fn is_cli_loopback(redirect_uri: &str) -> bool {
    let Ok(url) = Url::parse(redirect_uri) else {
        return false;
    };
    // The parsed URL must print back exactly: no default-port elision, no case folding,
    // no percent-decoding tricks.
    let literal_prefix = redirect_uri.starts_with("http://127.0.0.1:");
    literal_prefix
        && url.scheme() == "http"
        && url.host() == Some(Host::Ipv4(std::net::Ipv4Addr::LOCALHOST))
        && url.port().is_some_and(|port| port != 0)
        && url.path() == "/callback"
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none()
        && url.as_str() == redirect_uri
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Client {
        Client::find(CLI_CLIENT_ID).unwrap()
    }

    #[test]
    fn cli_accepts_any_port_on_the_literal_loopback_address() {
        assert!(cli().accepts_redirect("http://127.0.0.1:53124/callback"));
        assert!(cli().accepts_redirect("http://127.0.0.1:1/callback"));
    }

    #[test]
    fn cli_refuses_every_other_redirect() {
        for uri in [
            "http://[::1]:53124/callback",
            "http://localhost:53124/callback",
            "http://127.0.0.1:53124/other",
            "http://127.0.0.1:53124/callback/",
            "http://127.0.0.1:53124/callback?x=1",
            "http://127.0.0.1:53124/callback#f",
            "http://127.0.0.1.evil.test:53124/callback",
            "https://127.0.0.1:53124/callback",
            "http://127.0.0.1/callback",
            "http://127.0.0.1:80/callback",
            "http://127.0.0.1:0/callback",
            "http://user@127.0.0.1:53124/callback",
            "http://127.1:53124/callback",
            "http://127.0.0.1:053124/callback",
            "http://127.0.0.1:53124/%63allback",
            "https://evil.test/callback",
            "",
        ] {
            assert!(!cli().accepts_redirect(uri), "{uri}");
        }
    }

    #[test]
    fn the_console_client_has_no_redirect_and_only_its_own_audience() {
        let console = Client::find(CONSOLE_CLIENT_ID).unwrap();
        for uri in [
            "https://console.example/oidc/callback",
            "http://127.0.0.1:53124/callback",
        ] {
            assert!(!console.accepts_redirect(uri), "{uri}");
        }
        assert!(console.accepts_audience(CONSOLE_AUDIENCE));
        assert!(!console.accepts_audience(KUBERNETES_AUDIENCE));
        assert!(
            cli().accepts_audience(KUBERNETES_AUDIENCE) && cli().accepts_audience(CONSOLE_AUDIENCE)
        );
        assert!(!cli().accepts_audience("other"));
    }

    #[test]
    fn unknown_clients_do_not_exist() {
        assert_eq!(Client::find("kubectl"), None);
        assert_eq!(Client::find(""), None);
    }
}
