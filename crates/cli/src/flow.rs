//! What `banlieue auth token` does: decide between the cached ID token, a refresh and a
//! browser sign-in, under the session's file lock.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use crate::cache::{CacheKey, Entry, Slot};
use crate::error::{Error, Result};
use crate::oidc::Tokens;

/// A cached ID token is used only with at least this many seconds left (SPEC §4).
pub const MIN_REMAINING_SECS: i64 = 30;

/// What to do to get a usable ID token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The cached ID token has at least [`MIN_REMAINING_SECS`] left.
    UseCached,
    /// The ID token is missing or about to expire, but a refresh token is cached.
    Refresh,
    /// Nothing usable is cached: sign in with the browser.
    Login,
}

/// Decides from a cache snapshot and the current time (seconds since the Unix epoch).
pub fn decide(entry: Option<&Entry>, now: i64) -> Decision {
    match entry {
        Some(e) if e.expires_at - now >= MIN_REMAINING_SECS => Decision::UseCached,
        Some(e) if e.refresh_token.is_some() => Decision::Refresh,
        _ => Decision::Login,
    }
}

/// Where new tokens come from. The real one talks to the issuer
/// ([`crate::commands::LiveSource`]); tests count calls.
pub trait TokenSource {
    /// Trades a refresh token for new tokens (RFC 6749 §6).
    /// Must return [`Error::SessionEnded`] when the issuer answers `invalid_grant`.
    fn refresh(&self, refresh_token: &str) -> impl Future<Output = Result<Tokens>>;
    /// Runs the browser sign-in (authorization code + PKCE).
    fn login(&self) -> impl Future<Output = Result<Tokens>>;
    /// Tells the person something on the way (the real source prints it on stderr, prefixed
    /// with `banlieue: `; never on stdout, which carries only the ExecCredential).
    fn notice(&self, message: &str) {
        eprintln!("banlieue: {message}");
    }
}

/// What the person is told while another `banlieue` process holds the cache slot's lock
/// `path` (for at most `wait`): that process may be waiting for its browser sign-in.
pub fn waiting_for_lock(path: &Path, wait: Duration) -> String {
    format!(
        "another banlieue command is signing in for this issuer (it holds {}, perhaps \
         while its browser sign-in waits); waiting up to {} s for it",
        path.display(),
        wait.as_secs()
    )
}

/// Builds the cache entry for `key` from validated tokens.
pub fn entry_from(key: &CacheKey, t: Tokens) -> Entry {
    Entry {
        issuer: key.issuer.clone(),
        client_id: key.client_id.clone(),
        audience: key.audience.clone(),
        id_token: t.id_token,
        expires_at: t.expires_at,
        refresh_token: t.refresh_token,
        sub: t.sub,
        groups: t.groups,
    }
}

/// Returns an ID token with at least [`MIN_REMAINING_SECS`] left, following SPEC §4: cached →
/// refresh → browser sign-in (only when `interactive`).
///
/// The whole decision runs under the session's exclusive lock, and the cache is read only
/// after the lock is held: a process that waited while another one refreshed finds the fresh
/// token and does not refresh again (which would retire the token the other one just got).
/// A refresh refused with `invalid_grant` falls back to sign-in when `interactive`, after
/// telling the person why ([`TokenSource::notice`]).
/// An unreadable cache entry is treated as absent (and overwritten).
///
/// # Errors
/// [`Error::NotInteractive`] when a sign-in is needed but not allowed; [`Error::SessionEnded`]
/// likewise after `invalid_grant`; errors of the source; [`Error::LockTimeout`] after
/// `lock_wait`; [`Error::Io`].
pub async fn obtain<S: TokenSource>(
    slot: &Slot,
    key: &CacheKey,
    source: &S,
    now: impl Fn() -> i64,
    interactive: bool,
    lock_wait: Duration,
) -> Result<Entry> {
    let guard = slot
        .lock(lock_wait, |path| {
            source.notice(&waiting_for_lock(path, lock_wait));
        })
        .await?;
    let cached = match guard.read() {
        Ok(e) => e.filter(|e| e.key() == *key),
        Err(Error::CorruptCache { .. }) => None,
        Err(e) => return Err(e),
    };
    let not_interactive = || Error::NotInteractive {
        issuer: key.issuer.clone(),
    };
    let tokens = match (decide(cached.as_ref(), now()), cached) {
        (Decision::UseCached, Some(e)) => return Ok(e),
        (Decision::Refresh, Some(e)) => {
            let rt = e.refresh_token.as_deref().unwrap_or_default();
            match source.refresh(rt).await {
                Ok(t) => t,
                Err(ended @ Error::SessionEnded { .. }) => {
                    // The refresh token is dead: forget it whatever happens next.
                    guard.remove()?;
                    if !interactive {
                        return Err(ended);
                    }
                    source.notice(&format!("{ended}; signing in again with the browser"));
                    source.login().await?
                }
                Err(e) => return Err(e),
            }
        }
        _ => {
            if !interactive {
                return Err(not_interactive());
            }
            source.login().await?
        }
    };
    let entry = entry_from(key, tokens);
    guard.write(&entry)?;
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Cache;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    fn key() -> CacheKey {
        CacheKey {
            issuer: "https://c.example".into(),
            client_id: "banlieue-cli".into(),
            audience: "kubernetes".into(),
        }
    }

    fn entry(exp: i64, rt: Option<&str>) -> Entry {
        entry_from(&key(), tokens(exp, rt))
    }

    fn tokens(exp: i64, rt: Option<&str>) -> Tokens {
        Tokens {
            id_token: format!("id-{exp}"),
            refresh_token: rt.map(Into::into),
            expires_at: exp,
            sub: "alice".into(),
            groups: vec!["admin".into()],
        }
    }

    #[test]
    fn thirty_second_rule() {
        let now = 1_000;
        let table = [
            (None, Decision::Login),
            (Some(entry(now + 3600, None)), Decision::UseCached),
            (Some(entry(now + 30, Some("r"))), Decision::UseCached),
            (Some(entry(now + 30, None)), Decision::UseCached),
            (Some(entry(now + 29, Some("r"))), Decision::Refresh),
            (Some(entry(now, Some("r"))), Decision::Refresh),
            (Some(entry(now - 600, Some("r"))), Decision::Refresh),
            (Some(entry(now + 29, None)), Decision::Login),
            (Some(entry(now - 600, None)), Decision::Login),
        ];
        for (e, want) in table {
            assert_eq!(decide(e.as_ref(), now), want, "{e:?}");
        }
    }

    /// Counts calls; refresh takes `delay` to widen the race window.
    struct Counting {
        refreshes: AtomicUsize,
        logins: AtomicUsize,
        notices: std::sync::Mutex<Vec<String>>,
        delay: Duration,
        refresh_result: fn(&str) -> Result<Tokens>,
    }

    impl Counting {
        fn new(refresh_result: fn(&str) -> Result<Tokens>) -> Self {
            Counting {
                refreshes: AtomicUsize::new(0),
                logins: AtomicUsize::new(0),
                notices: std::sync::Mutex::new(Vec::new()),
                delay: Duration::from_millis(300),
                refresh_result,
            }
        }
    }

    impl TokenSource for Counting {
        async fn refresh(&self, rt: &str) -> Result<Tokens> {
            self.refreshes.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            (self.refresh_result)(rt)
        }
        async fn login(&self) -> Result<Tokens> {
            self.logins.fetch_add(1, Ordering::SeqCst);
            assert_eq!(
                self.notices.lock().unwrap().len(),
                self.refreshes.load(Ordering::SeqCst).min(1),
                "a failed refresh is explained before the sign-in"
            );
            Ok(tokens(10_000, Some("rt-login")))
        }
        fn notice(&self, message: &str) {
            self.notices.lock().unwrap().push(message.to_string());
        }
    }

    fn ended() -> Result<Tokens> {
        Err(Error::SessionEnded {
            description: Some("the user's session has ended; sign in again".into()),
        })
    }

    const NOW: i64 = 1_000;
    const WAIT: Duration = Duration::from_secs(10);

    fn seeded(e: Option<Entry>) -> (tempfile::TempDir, Slot) {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        cache.ensure_dirs().unwrap();
        let slot = cache.slot(&key());
        if let Some(e) = e {
            std::fs::write(slot.data_path(), serde_json::to_vec(&e).unwrap()).unwrap();
        }
        (dir, slot)
    }

    #[test]
    fn racing_threads_refresh_once() {
        // Eight threads, each with its own runtime and its own open of the lock file (as
        // separate kubectl-spawned processes would have), start together on an expired token.
        let (_dir, slot) = seeded(Some(entry(NOW - 5, Some("rt-0"))));
        let source = Arc::new(Counting::new(|rt| {
            assert_eq!(rt, "rt-0");
            Ok(tokens(NOW + 300, Some("rt-1")))
        }));
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (slot, source, barrier) = (slot.clone(), source.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                        .unwrap();
                    barrier.wait();
                    rt.block_on(obtain(&slot, &key(), &*source, || NOW, false, WAIT))
                })
            })
            .collect();
        for h in handles {
            let e = h.join().unwrap().unwrap();
            assert_eq!(e.id_token, format!("id-{}", NOW + 300));
            assert_eq!(e.refresh_token.as_deref(), Some("rt-1"));
        }
        assert_eq!(source.refreshes.load(Ordering::SeqCst), 1);
        assert_eq!(source.logins.load(Ordering::SeqCst), 0);
        let stored = slot.read_unlocked().unwrap().unwrap();
        assert_eq!(stored.refresh_token.as_deref(), Some("rt-1"));
    }

    #[tokio::test]
    async fn fresh_cache_is_used_without_calls() {
        let (_dir, slot) = seeded(Some(entry(NOW + 31, Some("rt"))));
        let s = Counting::new(|_| unreachable!());
        let e = obtain(&slot, &key(), &s, || NOW, false, WAIT)
            .await
            .unwrap();
        assert_eq!(e.expires_at, NOW + 31);
        assert_eq!(s.refreshes.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn nothing_cached_and_not_interactive_fails_clearly() {
        let (_dir, slot) = seeded(None);
        let s = Counting::new(|_| unreachable!());
        let err = obtain(&slot, &key(), &s, || NOW, false, WAIT)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NotInteractive { .. }), "{err}");
        assert!(err.to_string().contains("banlieue auth login"));
        assert_eq!(s.logins.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn invalid_grant_falls_back_to_login_when_interactive_and_says_why() {
        let (_dir, slot) = seeded(Some(entry(NOW - 5, Some("dead"))));
        let mut s = Counting::new(|_| ended());
        s.delay = Duration::ZERO;
        let e = obtain(&slot, &key(), &s, || NOW, true, WAIT).await.unwrap();
        assert_eq!(e.refresh_token.as_deref(), Some("rt-login"));
        assert_eq!(s.logins.load(Ordering::SeqCst), 1);
        let notices = s.notices.lock().unwrap().clone();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].contains("invalid_grant: the user's session has ended"),
            "{notices:?}"
        );
        assert_eq!(slot.read_unlocked().unwrap(), Some(e));
    }

    #[tokio::test]
    async fn invalid_grant_when_not_interactive_drops_the_dead_session() {
        let (_dir, slot) = seeded(Some(entry(NOW - 5, Some("dead"))));
        let mut s = Counting::new(|_| ended());
        s.delay = Duration::ZERO;
        let err = obtain(&slot, &key(), &s, || NOW, false, WAIT)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::SessionEnded { .. }), "{err}");
        assert!(
            err.to_string().contains("the user's session has ended"),
            "{err}"
        );
        assert_eq!(s.logins.load(Ordering::SeqCst), 0);
        assert_eq!(slot.read_unlocked().unwrap(), None);
    }

    #[tokio::test]
    async fn other_refresh_errors_keep_the_session() {
        let (_dir, slot) = seeded(Some(entry(NOW - 5, Some("rt"))));
        let mut s = Counting::new(|_| {
            Err(Error::Network {
                what: "token endpoint (refresh)",
                detail: "connection refused".into(),
            })
        });
        s.delay = Duration::ZERO;
        let err = obtain(&slot, &key(), &s, || NOW, true, WAIT)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Network { .. }));
        assert_eq!(s.logins.load(Ordering::SeqCst), 0);
        assert!(slot.read_unlocked().unwrap().is_some());
    }

    #[tokio::test]
    async fn corrupt_cache_is_replaced_by_a_login() {
        let (_dir, slot) = seeded(None);
        std::fs::write(slot.data_path(), b"{oops").unwrap();
        let s = Counting::new(|_| unreachable!());
        let e = obtain(&slot, &key(), &s, || NOW, true, WAIT).await.unwrap();
        assert_eq!(e.refresh_token.as_deref(), Some("rt-login"));
    }
}
