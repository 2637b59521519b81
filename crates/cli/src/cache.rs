//! The token cache: one JSON file per (issuer, client id, audience) under the user's config
//! directory, in a `sessions/` directory of mode 0700, files 0600, replaced atomically,
//! guarded by a file lock. A configuration directory that already exists is never chmod-ed.
//!
//! Layout: `<config>/banlieue/sessions/<key>.json` and `<key>.lock`, where `<key>` is the first
//! 32 hex digits of SHA-256(`issuer` NUL `client_id` NUL `audience`). The lock lives in its own
//! file because the data file is replaced by rename, which would orphan a lock taken on it.

use std::fs::{DirBuilder, File, OpenOptions, TryLockError};
use std::io::Write;
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Environment variable that overrides the configuration directory (used by tests).
pub const CONFIG_DIR_ENV: &str = "BANLIEUE_CONFIG_DIR";

/// How often a waiter retries the lock, in milliseconds.
const LOCK_POLL_MS: u64 = 50;

/// Which session a cache entry belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey {
    /// Issuer URL, byte-for-byte.
    pub issuer: String,
    /// OAuth client id.
    pub client_id: String,
    /// Requested audience.
    pub audience: String,
}

impl CacheKey {
    /// The file stem: 32 hex digits of SHA-256(`issuer` NUL `client_id` NUL `audience`).
    pub fn stem(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.issuer.as_bytes());
        h.update([0]);
        h.update(self.client_id.as_bytes());
        h.update([0]);
        h.update(self.audience.as_bytes());
        h.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// One cached session. Holds secrets: written only with mode 0600.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Issuer URL.
    pub issuer: String,
    /// OAuth client id.
    pub client_id: String,
    /// Audience the ID token was issued for.
    pub audience: String,
    /// The ID token (compact JWS).
    pub id_token: String,
    /// The ID token's `exp`, seconds since the Unix epoch.
    pub expires_at: i64,
    /// The current refresh token, if any.
    pub refresh_token: Option<String>,
    /// `sub` of the ID token.
    pub sub: String,
    /// `groups` of the ID token.
    #[serde(default)]
    pub groups: Vec<String>,
}

impl Entry {
    /// The key this entry is stored under.
    pub fn key(&self) -> CacheKey {
        CacheKey {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            audience: self.audience.clone(),
        }
    }
}

/// The cache directory (`<config>/banlieue`).
#[derive(Clone, Debug)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// `$BANLIEUE_CONFIG_DIR` if set and not empty, else the platform config directory plus
    /// `banlieue` (`$XDG_CONFIG_HOME/banlieue` or `~/.config/banlieue` on Linux, via the
    /// `directories` crate).
    ///
    /// # Errors
    /// [`Error::Usage`] when no home directory can be found.
    pub fn locate() -> Result<Self> {
        if let Some(dir) = std::env::var_os(CONFIG_DIR_ENV).filter(|d| !d.is_empty()) {
            return Ok(Cache::at(dir));
        }
        let base = directories::BaseDirs::new().ok_or_else(|| {
            Error::Usage(format!(
                "no home directory found; set {CONFIG_DIR_ENV} to a directory for the token cache"
            ))
        })?;
        Ok(Cache::at(base.config_dir().join("banlieue")))
    }

    /// A cache rooted at `root` (created on first write).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Cache { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn sessions(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// Prepares the cache for writing.
    ///
    /// * The root is created (mode 0700, with any missing parents) if it does not exist. An
    ///   existing root is never modified — it may be the person's own directory, or a shared
    ///   one such as `/tmp` — but it is refused if other users can write to it without the
    ///   sticky bit (they could then swap `sessions/` for their own).
    /// * `sessions/`, the CLI's own directory, is created with mode 0700; if it exists it must
    ///   be a real directory (not a symbolic link) owned by the current user, and is tightened
    ///   to 0700. Session files inside are 0600.
    ///
    /// # Errors
    /// [`Error::UnsafeCacheDir`]; [`Error::Io`].
    pub fn ensure_dirs(&self) -> Result<()> {
        let root = &self.root;
        match std::fs::metadata(root) {
            Ok(meta) => check_existing_root(root, &meta)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut b = DirBuilder::new();
                b.recursive(true);
                #[cfg(unix)]
                b.mode(0o700);
                b.create(root).map_err(|e| Error::io(root, e))?;
            }
            Err(e) => return Err(Error::io(root, e)),
        }
        let sessions = self.sessions();
        let mut b = DirBuilder::new();
        #[cfg(unix)]
        b.mode(0o700);
        match b.create(&sessions) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let meta =
                    std::fs::symlink_metadata(&sessions).map_err(|e| Error::io(&sessions, e))?;
                check_own_directory(&sessions, &meta)?;
            }
            Err(e) => return Err(Error::io(&sessions, e)),
        }
        #[cfg(unix)]
        std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io(&sessions, e))?;
        Ok(())
    }

    /// The files of one session.
    pub fn slot(&self, key: &CacheKey) -> Slot {
        let stem = key.stem();
        Slot {
            dir: self.sessions(),
            data: self.sessions().join(format!("{stem}.json")),
            lock: self.sessions().join(format!("{stem}.lock")),
        }
    }

    /// Every readable entry, for `status` without `--issuer`. Unreadable files are skipped.
    /// No lock is taken (a read sees either the old or the new file, never a mix).
    pub fn list(&self) -> Vec<Entry> {
        let Ok(dir) = std::fs::read_dir(self.sessions()) else {
            return Vec::new();
        };
        let mut out: Vec<Entry> = dir
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter_map(|p| read_entry(&p).ok().flatten())
            .collect();
        out.sort_by(|a, b| (&a.issuer, &a.audience).cmp(&(&b.issuer, &b.audience)));
        out
    }
}

/// A root given by the person is used as it is, unless others can replace what is in it.
fn check_existing_root(root: &Path, meta: &std::fs::Metadata) -> Result<()> {
    if !meta.is_dir() {
        return Err(Error::UnsafeCacheDir {
            path: root.to_path_buf(),
            reason: format!("it is not a directory; set {CONFIG_DIR_ENV} to a directory"),
        });
    }
    #[cfg(unix)]
    {
        let mode = meta.permissions().mode();
        let sticky = mode & 0o1000 != 0;
        if mode & 0o022 != 0 && !sticky {
            return Err(Error::UnsafeCacheDir {
                path: root.to_path_buf(),
                reason: format!(
                    "other users can write to it (mode {:o}); remove their write permission (chmod go-w) or set {CONFIG_DIR_ENV} to a private directory",
                    mode & 0o7777
                ),
            });
        }
    }
    Ok(())
}

/// `sessions/` must be ours: a real directory owned by the current user.
fn check_own_directory(dir: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let refuse = |reason: String| Error::UnsafeCacheDir {
        path: dir.to_path_buf(),
        reason,
    };
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(refuse(
            "it is not a directory (a symbolic link or a file is not followed); remove it, or set BANLIEUE_CONFIG_DIR elsewhere".into(),
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return Err(refuse(format!(
                "it belongs to user id {}, not to you (user id {me}); set {CONFIG_DIR_ENV} to a private directory",
                meta.uid()
            )));
        }
    }
    Ok(())
}

/// The data and lock files of one session.
#[derive(Clone, Debug)]
pub struct Slot {
    dir: PathBuf,
    data: PathBuf,
    lock: PathBuf,
}

impl Slot {
    /// The data file.
    pub fn data_path(&self) -> &Path {
        &self.data
    }

    fn open_lock_file(&self) -> Result<File> {
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        o.mode(0o600);
        o.open(&self.lock).map_err(|e| Error::io(&self.lock, e))
    }

    /// Takes the exclusive lock, polling every 50 ms, for at most `wait`. When another
    /// process holds it, calls `waiting` once with the lock file's path first, so the
    /// person learns why nothing happens (that process may be waiting for its browser).
    /// Creates the directories first ([`Cache::ensure_dirs`] must have run for the root).
    ///
    /// # Errors
    /// [`Error::LockTimeout`] after `wait`; [`Error::Io`].
    pub async fn lock(&self, wait: Duration, waiting: impl FnOnce(&Path)) -> Result<Guard> {
        let file = self.open_lock_file()?;
        let start = Instant::now();
        let mut waiting = Some(waiting);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(self.guard(file)),
                Err(TryLockError::WouldBlock) => {
                    if let Some(waiting) = waiting.take() {
                        waiting(&self.lock);
                    }
                    if start.elapsed() >= wait {
                        return Err(Error::LockTimeout {
                            path: self.lock.clone(),
                            secs: wait.as_secs(),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(LOCK_POLL_MS)).await;
                }
                Err(TryLockError::Error(e)) => return Err(Error::io(&self.lock, e)),
            }
        }
    }

    fn guard(&self, file: File) -> Guard {
        Guard {
            _file: file,
            slot: self.clone(),
        }
    }

    /// Reads the entry without taking the lock.
    ///
    /// # Errors
    /// As [`Guard::read`].
    pub fn read_unlocked(&self) -> Result<Option<Entry>> {
        read_entry(&self.data)
    }
}

/// Proof of holding a session's exclusive lock; released on drop (the lock file is closed).
#[derive(Debug)]
pub struct Guard {
    _file: File,
    slot: Slot,
}

impl Guard {
    /// Reads the entry: `Ok(None)` if there is none.
    ///
    /// # Errors
    /// [`Error::CorruptCache`] if the file is not a valid entry; [`Error::Io`].
    pub fn read(&self) -> Result<Option<Entry>> {
        read_entry(&self.slot.data)
    }

    /// Replaces the entry atomically: writes a temporary file (mode 0600) in the same
    /// directory, flushes it to disk, then renames it over the data file.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn write(&self, entry: &Entry) -> Result<()> {
        write_atomic(
            &self.slot.dir,
            &self.slot.data,
            &serde_json::to_vec_pretty(entry).expect("entry serializes"),
            true,
        )
    }

    /// Deletes the entry; `Ok(false)` if there was none.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn remove(&self) -> Result<bool> {
        match std::fs::remove_file(&self.slot.data) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(&self.slot.data, e)),
        }
    }
}

fn read_entry(path: &Path) -> Result<Option<Entry>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::CorruptCache {
                path: path.to_path_buf(),
                detail: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Writes `bytes` to `target` atomically: a temporary file in `dir` (created with mode 0600 by
/// `tempfile`), `fsync`, then rename. With `overwrite = false` an existing `target` is left
/// untouched and [`Error::WouldOverwrite`] is returned (the check and the rename are one
/// step: `link`-based `persist_noclobber`).
///
/// # Errors
/// [`Error::Io`], [`Error::WouldOverwrite`].
pub fn write_atomic(dir: &Path, target: &Path, bytes: &[u8], overwrite: bool) -> Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".banlieue-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    #[cfg(unix)]
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io(tmp.path(), e))?;
    tmp.write_all(bytes).map_err(|e| Error::io(tmp.path(), e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| Error::io(tmp.path(), e))?;
    let result = if overwrite {
        tmp.persist(target)
    } else {
        tmp.persist_noclobber(target)
    };
    match result {
        Ok(_) => Ok(()),
        Err(e) if !overwrite && e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(Error::WouldOverwrite(target.to_path_buf()))
        }
        Err(e) => Err(Error::io(target, e.error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(issuer: &str, exp: i64, rt: Option<&str>) -> Entry {
        Entry {
            issuer: issuer.into(),
            client_id: "banlieue-cli".into(),
            audience: "kubernetes".into(),
            id_token: format!("idtoken-{exp}"),
            expires_at: exp,
            refresh_token: rt.map(Into::into),
            sub: "alice".into(),
            groups: vec!["admin".into()],
        }
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn write_read_remove_with_tight_permissions() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::at(tmp.path().join("cfg"));
        cache.ensure_dirs().unwrap();
        assert_eq!(mode(cache.root()), 0o700);
        assert_eq!(mode(&cache.sessions()), 0o700);
        let e = entry("https://c.example", 100, Some("rt"));
        let slot = cache.slot(&e.key());
        let g = slot.lock(Duration::from_secs(1), |_| {}).await.unwrap();
        assert_eq!(g.read().unwrap(), None);
        g.write(&e).unwrap();
        assert_eq!(mode(slot.data_path()), 0o600);
        assert_eq!(mode(&slot.lock), 0o600);
        assert_eq!(g.read().unwrap(), Some(e.clone()));
        assert_eq!(cache.list(), vec![e]);
        assert!(g.remove().unwrap());
        assert!(!g.remove().unwrap());
        assert_eq!(g.read().unwrap(), None);
    }

    fn full_mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn an_existing_root_keeps_its_permissions() {
        // A home-like directory (0755) and a shared one with the sticky bit (1777, as /tmp):
        // neither is changed; only the CLI's own sessions/ is made private.
        for given in [0o755, 0o700, 0o1777, 0o1770] {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("cfg");
            std::fs::create_dir(&root).unwrap();
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(given)).unwrap();
            let cache = Cache::at(&root);
            cache.ensure_dirs().unwrap();
            assert_eq!(full_mode(&root), given, "{given:o}");
            assert_eq!(full_mode(&cache.sessions()), 0o700, "{given:o}");
        }
    }

    #[test]
    fn a_root_others_can_write_without_sticky_bit_is_refused_and_left_alone() {
        for given in [0o777, 0o775, 0o757] {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("cfg");
            std::fs::create_dir(&root).unwrap();
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(given)).unwrap();
            let cache = Cache::at(&root);
            let err = cache.ensure_dirs().unwrap_err();
            assert!(matches!(err, Error::UnsafeCacheDir { .. }), "{err}");
            assert!(err.to_string().contains("other users can write"), "{err}");
            assert!(err.to_string().contains(CONFIG_DIR_ENV), "{err}");
            assert_eq!(full_mode(&root), given);
            assert!(!cache.sessions().exists());
        }
    }

    #[test]
    fn our_own_sessions_directory_is_tightened_but_a_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::at(tmp.path().join("cfg"));
        std::fs::create_dir_all(cache.sessions()).unwrap();
        std::fs::set_permissions(cache.sessions(), std::fs::Permissions::from_mode(0o755)).unwrap();
        cache.ensure_dirs().unwrap();
        assert_eq!(full_mode(&cache.sessions()), 0o700);

        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o755)).unwrap();
        let linked = Cache::at(tmp.path().join("linked"));
        std::fs::create_dir(linked.root()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, linked.sessions()).unwrap();
        let err = linked.ensure_dirs().unwrap_err();
        assert!(matches!(err, Error::UnsafeCacheDir { .. }), "{err}");
        assert_eq!(full_mode(&elsewhere), 0o755);
    }

    #[test]
    fn a_missing_root_is_created_private() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::at(tmp.path().join("a/b/cfg"));
        cache.ensure_dirs().unwrap();
        assert_eq!(full_mode(cache.root()), 0o700);
        assert_eq!(full_mode(&cache.sessions()), 0o700);
    }

    #[tokio::test]
    async fn atomic_write_leaves_no_temporary_and_replaces_whole_file() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::at(tmp.path());
        cache.ensure_dirs().unwrap();
        let e1 = entry("https://c.example", 1, Some(&"x".repeat(10_000)));
        let e2 = entry("https://c.example", 2, Some("short"));
        let slot = cache.slot(&e1.key());
        let g = slot.lock(Duration::from_secs(1), |_| {}).await.unwrap();
        g.write(&e1).unwrap();
        g.write(&e2).unwrap();
        assert_eq!(g.read().unwrap(), Some(e2));
        let names: Vec<String> = std::fs::read_dir(cache.sessions())
            .unwrap()
            .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}"); // <key>.json and <key>.lock only
    }

    #[test]
    fn write_atomic_refuses_to_clobber_without_overwrite() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("kubeconfig");
        write_atomic(tmp.path(), &target, b"one", false).unwrap();
        assert_eq!(mode(&target), 0o600);
        let err = write_atomic(tmp.path(), &target, b"two", false).unwrap_err();
        assert!(matches!(err, Error::WouldOverwrite(_)), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"one");
        write_atomic(tmp.path(), &target, b"two", true).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn corrupt_entry_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::at(tmp.path());
        cache.ensure_dirs().unwrap();
        let slot = cache.slot(&entry("https://c", 0, None).key());
        std::fs::write(slot.data_path(), b"{not json").unwrap();
        assert!(matches!(
            slot.read_unlocked(),
            Err(Error::CorruptCache { .. })
        ));
    }

    #[tokio::test]
    async fn lock_is_exclusive_and_times_out() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::at(tmp.path());
        cache.ensure_dirs().unwrap();
        let slot = cache.slot(&entry("https://c", 0, None).key());
        let held = slot.lock(Duration::from_secs(1), |_| {}).await.unwrap();
        let mut told = None;
        let err = slot
            .lock(Duration::from_millis(200), |path| {
                told = Some(path.to_owned())
            })
            .await
            .unwrap_err();
        assert_eq!(
            told.as_deref(),
            Some(slot.lock.as_path()),
            "the waiter is told once"
        );
        assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
        drop(held);
        slot.lock(Duration::from_millis(200), |_| {
            unreachable!("the lock is free")
        })
        .await
        .unwrap();
    }

    #[test]
    fn keys_differ_per_issuer_client_and_audience() {
        let k = |i: &str, c: &str, a: &str| {
            CacheKey {
                issuer: i.into(),
                client_id: c.into(),
                audience: a.into(),
            }
            .stem()
        };
        let base = k("https://c", "banlieue-cli", "kubernetes");
        assert_eq!(base.len(), 32);
        assert_ne!(base, k("https://c/", "banlieue-cli", "kubernetes"));
        assert_ne!(base, k("https://c", "other", "kubernetes"));
        assert_ne!(base, k("https://c", "banlieue-cli", "banlieue-console"));
        // The separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(k("ab", "c", "x"), k("a", "bc", "x"));
    }
}
