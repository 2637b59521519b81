//! The `banlieue auth …` commands, wired from the pieces of this crate.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::cache::{Cache, CacheKey, Entry};
use crate::callback::{CallbackListener, Expected};
use crate::error::{Error, Result, chain, sanitize};
use crate::exec::{EXEC_INFO_ENV, exec_credential_json, interactive_from_exec_info};
use crate::flow::{TokenSource, entry_from, obtain, waiting_for_lock};
use crate::http::build_client;
use crate::oidc::{ClientSettings, Issuer, Tokens};
use crate::urls::{check_issuer, join};

/// Environment variable that, when set to a non-empty value other than `0`, keeps `login`
/// from opening a browser (the URL is still printed on stderr). Same as `--no-browser`.
pub const NO_BROWSER_ENV: &str = "BANLIEUE_NO_BROWSER";

/// The line prefix on stderr before the authorization URL. Tests can find the URL by it.
pub const SIGN_IN_PREFIX: &str = "banlieue: sign in at: ";

/// How much of an HTTP error body is shown, in characters.
const MAX_BODY_TEXT: usize = 300;

/// Whether a browser can be opened here at all, from the environment (`env` looks a variable
/// up). On Linux and the BSDs a browser needs a graphical display (`DISPLAY` or
/// `WAYLAND_DISPLAY`), unless `BROWSER` names a command or this is WSL (`WSL_DISTRO_NAME`,
/// where Windows' browser is used); on macOS and Windows there is always one to try.
pub fn browser_possible(env: impl Fn(&str) -> Option<OsString>) -> bool {
    if cfg!(any(target_os = "macos", target_os = "windows")) {
        return true;
    }
    ["DISPLAY", "WAYLAND_DISPLAY", "BROWSER", "WSL_DISTRO_NAME"]
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.is_empty()))
}

/// Options shared by every `auth` command.
#[derive(Clone, Debug)]
pub struct Options {
    /// Issuer URL (not yet checked).
    pub issuer: Option<String>,
    /// OAuth client id.
    pub client_id: String,
    /// Requested audience.
    pub audience: String,
    /// Extra PEM trust root.
    pub ca_file: Option<PathBuf>,
    /// Do not open a browser.
    pub no_browser: bool,
    /// How long a browser sign-in may take, in seconds.
    pub login_timeout_secs: u64,
}

impl Options {
    fn settings(&self) -> Result<ClientSettings> {
        let issuer = self
            .issuer
            .as_deref()
            .ok_or_else(|| Error::Usage("--issuer URL is required".into()))?;
        Ok(ClientSettings {
            issuer: check_issuer(issuer)?,
            client_id: self.client_id.clone(),
            audience: self.audience.clone(),
        })
    }

    fn lock_wait(&self) -> Duration {
        // A waiter may sit behind someone else's browser sign-in.
        Duration::from_secs(self.login_timeout_secs + 30)
    }
}

fn key_of(s: &ClientSettings) -> CacheKey {
    CacheKey {
        issuer: s.issuer.clone(),
        client_id: s.client_id.clone(),
        audience: s.audience.clone(),
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The [`TokenSource`] that talks to the issuer. Discovery runs on first use only, so a
/// cached token needs no network at all.
pub struct LiveSource {
    settings: ClientSettings,
    http: reqwest::Client,
    no_browser: bool,
    login_timeout: Duration,
    issuer: OnceCell<Issuer>,
}

impl LiveSource {
    fn new(opts: &Options, settings: ClientSettings) -> Result<Self> {
        Ok(LiveSource {
            http: build_client(opts.ca_file.as_deref())?,
            settings,
            no_browser: opts.no_browser,
            login_timeout: Duration::from_secs(opts.login_timeout_secs),
            issuer: OnceCell::new(),
        })
    }

    async fn issuer(&self) -> Result<&Issuer> {
        self.issuer
            .get_or_try_init(|| Issuer::discover(self.settings.clone(), self.http.clone()))
            .await
    }
}

impl TokenSource for LiveSource {
    async fn refresh(&self, refresh_token: &str) -> Result<Tokens> {
        self.issuer().await?.refresh(refresh_token).await
    }

    async fn login(&self) -> Result<Tokens> {
        let issuer = self.issuer().await?;
        let listener = CallbackListener::bind().await?;
        let request = issuer.begin_login(&listener.redirect_uri())?;
        eprintln!("{SIGN_IN_PREFIX}{}", request.url);
        if self.no_browser {
            eprintln!(
                "banlieue: open that URL in a browser on this machine; waiting for the sign-in…"
            );
        } else if !browser_possible(|k| std::env::var_os(k)) {
            eprintln!(
                "banlieue: no browser can be opened here (no DISPLAY or WAYLAND_DISPLAY, no BROWSER); open that URL in a browser on this machine; waiting for the sign-in…"
            );
        } else {
            let opened = webbrowser::open_browser_with_options(
                webbrowser::Browser::Default,
                request.url.as_str(),
                webbrowser::BrowserOptions::new().with_suppress_output(true),
            );
            match opened {
                Ok(()) => eprintln!("banlieue: opened your browser; waiting for the sign-in…"),
                Err(e) => eprintln!(
                    "banlieue: could not open a browser ({}); open that URL in a browser on this machine; waiting for the sign-in…",
                    sanitize(&e.to_string(), MAX_BODY_TEXT)
                ),
            }
        }
        let expected = Expected {
            state: request.state.secret().clone(),
            issuer: issuer.issuer().to_string(),
            iss_required: issuer.iss_parameter_required(),
        };
        let secs = self.login_timeout.as_secs();
        let callback = tokio::time::timeout(self.login_timeout, listener.wait(&expected))
            .await
            .map_err(|_| Error::LoginTimeout(secs))??;
        // The browser tab waits for this: its page tells whether the sign-in really worked.
        let result = issuer.exchange_code(callback.code, request).await;
        let page = match &result {
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        callback.reply.finish(page).await;
        result
    }
}

/// The human-readable text of an HTTP error body: the console's HTML error page is reduced
/// to its message, a JSON OAuth error to `error: error_description`; sanitised and bounded.
/// `None` when nothing readable is left.
fn body_message(body: &[u8], content_type: &str) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = if content_type.contains("html") || text.trim_start().starts_with('<') {
        html_text(&text)
    } else if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        match (v["error"].as_str(), v["error_description"].as_str()) {
            (Some(e), Some(d)) => format!("{e}: {d}"),
            (Some(e), None) => e.to_string(),
            _ => text.into_owned(),
        }
    } else {
        text.into_owned()
    };
    Some(sanitize(&text, MAX_BODY_TEXT)).filter(|t| !t.is_empty())
}

/// The text of an HTML page: the content of the element marked `role="alert"` (where the
/// console puts its message) if there is one, else of `<body>`; tags removed, the common
/// character references decoded.
fn html_text(html: &str) -> String {
    let region = match html.find("role=\"alert\"") {
        Some(i) => {
            let rest = &html[i..];
            let start = rest.find('>').map_or(rest.len(), |j| j + 1);
            let inner = &rest[start..];
            &inner[..inner.find("</").unwrap_or(inner.len())]
        }
        None => html.find("<body").map_or(html, |i| &html[i..]),
    };
    let mut text = String::with_capacity(region.len());
    let mut in_tag = false;
    for c in region.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    decode_entities(&text)
}

fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| match &rest[1..e] {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            n => n
                .strip_prefix("#x")
                .or_else(|| n.strip_prefix("#X"))
                .map(|h| u32::from_str_radix(h, 16))
                .or_else(|| n.strip_prefix('#').map(str::parse::<u32>))
                .and_then(|r| r.ok())
                .and_then(char::from_u32),
        });
        match (decoded, end) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn describe(e: &Entry, now: i64) -> String {
    let left = e.expires_at - now;
    let expiry = chrono::DateTime::from_timestamp(e.expires_at, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let state = if left > 0 {
        format!("valid for {left} s")
    } else {
        "expired".into()
    };
    let groups = if e.groups.is_empty() {
        "(none)".to_string()
    } else {
        sanitize(&e.groups.join(", "), 1000)
    };
    // The claims come from the issuer: nothing in them may drive the terminal.
    let clean = |s: &str| sanitize(s, 1000);
    format!(
        "issuer:    {}\nclient:    {}\nsubject:   {}\ngroups:    {}\naudience:  {}\nID token:  expires {} ({})\nrefresh:   {}\n",
        clean(&e.issuer),
        clean(&e.client_id),
        clean(&e.sub),
        groups,
        clean(&e.audience),
        expiry,
        state,
        if e.refresh_token.is_some() {
            "available"
        } else {
            "none (a browser sign-in will be needed)"
        }
    )
}

/// `banlieue auth token`: prints only the ExecCredential JSON on stdout.
///
/// # Errors
/// See [`obtain`].
pub async fn token(opts: &Options) -> Result<()> {
    let settings = opts.settings()?;
    let key = key_of(&settings);
    let cache = Cache::locate()?;
    cache.ensure_dirs()?;
    let slot = cache.slot(&key);
    let interactive = interactive_from_exec_info(
        std::env::var(EXEC_INFO_ENV).ok().as_deref(),
        std::io::stdin().is_terminal(),
    );
    let source = LiveSource::new(opts, settings)?;
    let entry = obtain(&slot, &key, &source, now, interactive, opts.lock_wait()).await?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}",
        exec_credential_json(&entry.id_token, entry.expires_at)
    )
    .and_then(|_| out.flush())
    .map_err(|e| Error::io("stdout", e))
}

/// `banlieue auth login`: always runs a browser sign-in and replaces the cached session.
/// Prints a summary on stderr.
///
/// # Errors
/// Those of the sign-in and of the cache.
pub async fn login(opts: &Options) -> Result<()> {
    let settings = opts.settings()?;
    let key = key_of(&settings);
    let cache = Cache::locate()?;
    cache.ensure_dirs()?;
    let slot = cache.slot(&key);
    let source = LiveSource::new(opts, settings)?;
    let wait = opts.lock_wait();
    let guard = slot
        .lock(wait, |path| source.notice(&waiting_for_lock(path, wait)))
        .await?;
    let entry = entry_from(&key, source.login().await?);
    guard.write(&entry)?;
    eprintln!(
        "banlieue: signed in as {} (groups: {}); ID token for {} valid until {}",
        sanitize(&entry.sub, 1000),
        if entry.groups.is_empty() {
            "none".into()
        } else {
            sanitize(&entry.groups.join(", "), 1000)
        },
        sanitize(&entry.audience, 1000),
        chrono::DateTime::from_timestamp(entry.expires_at, 0)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    Ok(())
}

/// `banlieue auth logout`: revokes the refresh token (RFC 7009), then deletes the cached
/// session — the deletion happens even when revocation fails.
///
/// # Errors
/// [`Error::RevocationFailed`] after deleting when the issuer could not be reached or refused;
/// cache errors.
pub async fn logout(opts: &Options) -> Result<()> {
    let settings = opts.settings()?;
    let key = key_of(&settings);
    let cache = Cache::locate()?;
    let slot = cache.slot(&key);
    if !slot.data_path().exists() {
        eprintln!("banlieue: no session cached for {}", settings.issuer);
        return Ok(());
    }
    let wait = opts.lock_wait();
    let guard = slot
        .lock(wait, |path| {
            eprintln!("banlieue: {}", waiting_for_lock(path, wait));
        })
        .await?;
    let entry = guard.read().ok().flatten();
    let revoked = match entry.as_ref().and_then(|e| e.refresh_token.as_deref()) {
        None => Ok(()),
        Some(rt) => {
            let http = build_client(opts.ca_file.as_deref())?;
            match Issuer::discover(settings.clone(), http).await {
                Ok(issuer) => issuer.revoke(rt).await,
                Err(e) => Err(e),
            }
        }
    };
    guard.remove()?;
    match revoked {
        Ok(()) => {
            eprintln!("banlieue: signed out of {}", settings.issuer);
            Ok(())
        }
        Err(e) => Err(Error::RevocationFailed(e.to_string())),
    }
}

/// `banlieue auth status`: describes the cached session(s) on stdout, without token text and
/// without network. With `--issuer` only that session (an error if there is none); without,
/// every cached session (an error if there is none at all).
///
/// # Errors
/// [`Error::NotSignedIn`], [`Error::NoSessions`].
pub fn status(opts: &Options) -> Result<()> {
    let cache = Cache::locate()?;
    let now = now();
    let entries = match &opts.issuer {
        Some(_) => {
            let settings = opts.settings()?;
            let key = key_of(&settings);
            match cache.slot(&key).read_unlocked()? {
                Some(e) => vec![e],
                None => {
                    return Err(Error::NotSignedIn {
                        issuer: key.issuer,
                        client_id: key.client_id,
                        audience: key.audience,
                    });
                }
            }
        }
        None => cache.list(),
    };
    if entries.is_empty() {
        return Err(Error::NoSessions(cache.root().to_path_buf()));
    }
    let text: Vec<String> = entries.iter().map(|e| describe(e, now)).collect();
    print!("{}", text.join("\n"));
    Ok(())
}

/// The audience of the console's own API: what `/kubeconfig` wants a bearer token for.
const CONSOLE_AUDIENCE: &str = "banlieue-console";

/// `banlieue auth kubeconfig`: signs in for the console's own audience (the cached session
/// for it, else the browser), then `GET {issuer}/kubeconfig` with that ID token as bearer
/// (RFC 6750), and prints it, or writes it to `out` atomically with mode 0600 (refusing to
/// replace an existing file unless `force`).
///
/// # Errors
/// Those of the sign-in and of the cache; [`Error::Network`] / [`Error::Protocol`] for a
/// failed download, [`Error::WouldOverwrite`], [`Error::Io`].
pub async fn kubeconfig(opts: &Options, out: Option<&Path>, force: bool) -> Result<()> {
    let mut settings = opts.settings()?;
    settings.audience = CONSOLE_AUDIENCE.to_owned();
    if let Some(path) = out.filter(|p| !force && p.exists()) {
        // Checked again, atomically, when writing; this only spares a useless sign-in.
        return Err(Error::WouldOverwrite(path.to_path_buf()));
    }
    let url = join(&settings.issuer, "kubeconfig");
    let key = key_of(&settings);
    let cache = Cache::locate()?;
    cache.ensure_dirs()?;
    let slot = cache.slot(&key);
    let source = LiveSource::new(opts, settings)?;
    let entry = obtain(&slot, &key, &source, now, true, opts.lock_wait()).await?;
    let http = build_client(opts.ca_file.as_deref())?;
    let response = http
        .get(&url)
        .header("accept", "application/yaml")
        .bearer_auth(&entry.id_token)
        .send()
        .await
        .map_err(|e| Error::Network {
            what: "kubeconfig download",
            detail: chain(&e),
        })?;
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let body = response.bytes().await.map_err(|e| Error::Network {
        what: "kubeconfig download",
        detail: chain(&e),
    })?;
    if !status.is_success() {
        return Err(Error::Protocol {
            what: "kubeconfig download",
            detail: match body_message(&body, &content_type) {
                Some(message) => format!("the console answered {}: {message}", status.as_u16()),
                None => format!("the console answered {status} to GET {url}"),
            },
        });
    }
    match out {
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&body)
                .and_then(|_| stdout.flush())
                .map_err(|e| Error::io("stdout", e))
        }
        Some(path) => {
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            crate::cache::write_atomic(&dir, path, &body, force)?;
            eprintln!("banlieue: wrote {}", path.display());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_needs_a_display_on_linux() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        if cfg!(any(target_os = "macos", target_os = "windows")) {
            assert!(browser_possible(env(&[])));
            return;
        }
        assert!(!browser_possible(env(&[])));
        assert!(!browser_possible(env(&[
            ("DISPLAY", ""),
            ("TERM", "xterm")
        ])));
        assert!(browser_possible(env(&[("DISPLAY", ":0")])));
        assert!(browser_possible(env(&[("WAYLAND_DISPLAY", "wayland-0")])));
        assert!(browser_possible(env(&[("BROWSER", "w3m")])));
        assert!(browser_possible(env(&[("WSL_DISTRO_NAME", "Ubuntu")])));
    }

    #[test]
    fn error_bodies_become_one_readable_line() {
        let page = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>banlieue console</title></head><body><main><h1>banlieue console</h1><p role=\"alert\">The console has no Kubernetes cluster configured, so there is no kubeconfig to download &amp; that&#39;s &quot;it&quot;.</p></main></body></html>";
        assert_eq!(
            body_message(page.as_bytes(), "text/html; charset=utf-8").as_deref(),
            Some(
                "The console has no Kubernetes cluster configured, so there is no kubeconfig to download & that's \"it\"."
            )
        );
        assert_eq!(
            body_message(b"<html><head><title>x</title></head><body><h1>Bad</h1> <p>gateway</p></body></html>", "text/html").as_deref(),
            Some("Bad gateway")
        );
        assert_eq!(
            body_message(
                br#"{"error":"invalid_request","error_description":"no"}"#,
                "application/json"
            )
            .as_deref(),
            Some("invalid_request: no")
        );
        assert_eq!(
            body_message(b"plain\n\x1b[31mred\x1b[0m", "text/plain").as_deref(),
            Some("plain red")
        );
        assert_eq!(body_message(b"", "text/plain"), None);
        assert_eq!(body_message(b"<html></html>", "text/html"), None);
        let long = body_message("x".repeat(10_000).as_bytes(), "text/plain").unwrap();
        assert_eq!(long.chars().count(), MAX_BODY_TEXT);
        assert_eq!(
            decode_entities("a &lt;b&gt; &#x41;&#66; &unknown; & end"),
            "a <b> AB &unknown; & end"
        );
    }
}
