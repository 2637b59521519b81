//! The `banlieue auth …` commands, wired from the pieces of this crate.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::cache::{Cache, CacheKey, Entry};
use crate::callback::CallbackListener;
use crate::error::{Error, Result, chain};
use crate::exec::{EXEC_INFO_ENV, exec_credential_json, interactive_from_exec_info};
use crate::flow::{TokenSource, entry_from, obtain};
use crate::http::build_client;
use crate::oidc::{ClientSettings, Issuer, Tokens};
use crate::urls::{check_issuer, join};

/// Environment variable that, when set to a non-empty value other than `0`, keeps `login`
/// from opening a browser (the URL is still printed on stderr). Same as `--no-browser`.
pub const NO_BROWSER_ENV: &str = "BANLIEUE_NO_BROWSER";

/// The line prefix on stderr before the authorization URL. Tests can find the URL by it.
pub const SIGN_IN_PREFIX: &str = "banlieue: sign in at: ";

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
        } else {
            let opened = webbrowser::open_browser_with_options(
                webbrowser::Browser::Default,
                request.url.as_str(),
                webbrowser::BrowserOptions::new().with_suppress_output(true),
            );
            match opened {
                Ok(()) => eprintln!("banlieue: opened your browser; waiting for the sign-in…"),
                Err(e) => eprintln!(
                    "banlieue: could not open a browser ({e}); open the URL above on this machine; waiting…"
                ),
            }
        }
        let secs = self.login_timeout.as_secs();
        let code = tokio::time::timeout(self.login_timeout, listener.wait(request.state.secret()))
            .await
            .map_err(|_| Error::LoginTimeout(secs))??;
        issuer.exchange_code(code, request).await
    }
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
        e.groups.join(", ")
    };
    format!(
        "issuer:    {}\nclient:    {}\nsubject:   {}\ngroups:    {}\naudience:  {}\nID token:  expires {} ({})\nrefresh:   {}\n",
        e.issuer,
        e.client_id,
        e.sub,
        groups,
        e.audience,
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
    let interactive = interactive_from_exec_info(std::env::var(EXEC_INFO_ENV).ok().as_deref());
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
    let guard = slot.lock(opts.lock_wait()).await?;
    let entry = entry_from(&key, source.login().await?);
    guard.write(&entry)?;
    eprintln!(
        "banlieue: signed in as {} (groups: {}); ID token for {} valid until {}",
        entry.sub,
        if entry.groups.is_empty() {
            "none".into()
        } else {
            entry.groups.join(", ")
        },
        entry.audience,
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
    let guard = slot.lock(opts.lock_wait()).await?;
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
/// every cached session.
///
/// # Errors
/// [`Error::NotSignedIn`].
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
        println!("no cached sessions in {}", cache.root().display());
    }
    let text: Vec<String> = entries.iter().map(|e| describe(e, now)).collect();
    print!("{}", text.join("\n"));
    Ok(())
}

/// `banlieue auth kubeconfig`: `GET {issuer}/kubeconfig` and print it, or write it to `out`
/// atomically with mode 0600 (refusing to replace an existing file unless `force`).
///
/// # Errors
/// [`Error::Network`] / [`Error::Protocol`] for a failed download, [`Error::WouldOverwrite`],
/// [`Error::Io`].
pub async fn kubeconfig(opts: &Options, out: Option<&Path>, force: bool) -> Result<()> {
    let settings = opts.settings()?;
    if let Some(path) = out.filter(|p| !force && p.exists()) {
        // Checked again, atomically, when writing; this only spares a useless download.
        return Err(Error::WouldOverwrite(path.to_path_buf()));
    }
    let http = build_client(opts.ca_file.as_deref())?;
    let url = join(&settings.issuer, "kubeconfig");
    let response = http
        .get(&url)
        .header("accept", "application/yaml")
        .send()
        .await
        .map_err(|e| Error::Network {
            what: "kubeconfig download",
            detail: chain(&e),
        })?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| Error::Network {
        what: "kubeconfig download",
        detail: chain(&e),
    })?;
    if !status.is_success() {
        return Err(Error::Protocol {
            what: "kubeconfig download",
            detail: format!("GET {url} answered {status}"),
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
