use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::migrate::Migrator;
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection, Executor, Row};
use time::OffsetDateTime;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// Which SQL server a [`Store`] talks to, chosen by the URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite://path/to/file.db` (relative to the working directory) or `sqlite:///abs/path`.
    Sqlite,
    /// `postgres://user:password@host:port/database` (or `postgresql://`).
    Postgres,
}

/// Errors of the store. Messages name the cause a person can fix; the URL is never
/// printed with its password.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "unsupported database URL scheme in {url:?}: use sqlite://<file> or postgres://<host>/<db>"
    )]
    UnsupportedUrl { url: String },
    #[error(
        "the directory {dir} of the SQLite database does not exist: create it for the console alone (`install -d -m 700 {dir}`) or point BANLIEUE_DATABASE_URL elsewhere"
    )]
    MissingDirectory { dir: PathBuf },
    /// The SQLite file (password hashes, private signing keys) may be read or written by
    /// others than its owner.
    #[error(
        "the SQLite database file {file} has mode {mode:o}: others than its owner may read it, and it holds password hashes, sessions and signing keys; run `chmod 600 {file}` (the console creates it 0600)"
    )]
    ExposedFile { file: PathBuf, mode: u32 },
    #[error(
        "the SQLite database {file} is read-only: the console must be able to write it (check its permissions and those of its directory)"
    )]
    ReadOnly { file: PathBuf },
    #[error(
        "the SQLite URL names no file (an in-memory database is not supported): use sqlite://<path>, e.g. sqlite://data/console.db"
    )]
    NoSqliteFile,
    #[error("{file} is not a regular file: point BANLIEUE_DATABASE_URL at a database file")]
    NotARegularFile { file: PathBuf },
    #[error("cannot open the database: {0}")]
    Open(#[source] sqlx::Error),
    #[error("cannot apply database migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{what} already exists")]
    AlreadyExists { what: &'static str },
    #[error("{what} does not exist")]
    NotFound { what: &'static str },
    /// Optimistic concurrency: the row changed since the caller read `version`.
    #[error("the {what} was changed by someone else in the meantime")]
    Conflict { what: &'static str },
    /// The write would leave no enabled user with the `admin` role (SPEC §5 guards).
    #[error("the last enabled admin cannot be disabled, deleted or demoted")]
    LastAdmin,
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

/// What [`Store::check`] found. Checking creates and migrates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseCheck {
    /// The SQLite file does not exist yet; its directory does, so the first start
    /// creates it.
    WillBeCreated { file: PathBuf },
    /// The database answers; `pending` migrations will be applied at the next start.
    /// `signing_keys` are the issuer's stored private keys as sealed (empty before the
    /// migration that seals them), so a check can try the key-encryption key on them.
    Reachable {
        pending: usize,
        signing_keys: Vec<SealedSigningKey>,
    },
}

/// One stored signing key as [`Store::check`] read it: its `kid` and its private key as
/// stored (sealed under a key-encryption key, or plain PKCS#8 from before sealing).
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSigningKey {
    pub kid: String,
    /// Never logged.
    pub private_key_sealed: Vec<u8>,
}

impl std::fmt::Debug for SealedSigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedSigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// The migration that renamed the signing keys' private key column to
/// `private_key_sealed` (`0004_sealed_signing_keys.sql`, both backends).
const SEALED_SIGNING_KEYS_MIGRATION: i64 = 4;

/// A pool of connections to the console's database.
///
/// Cheap to clone; every clone shares the pool.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: AnyPool,
    backend: Backend,
    url: String,
    /// On SQLite, the connection of this process's frequent writers, opened on first use
    /// (see [`Store::write_turn`]).
    sqlite_writer: std::sync::Arc<tokio::sync::Mutex<Option<AnyConnection>>>,
}

/// SQLite's settings on every connection. In WAL mode `synchronous = NORMAL` syncs the
/// log at checkpoints (every 250 ms, [`Store::checkpoint`]), not at every commit: a killed
/// process loses nothing committed; a power cut can lose the last quarter second of writes
/// (README). The automatic checkpoint is the backstop.
const SQLITE_CONNECTION_PRAGMAS: &str = "PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; \
     PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 10000;";

impl Store {
    /// Opens the database at `url` and applies pending migrations.
    ///
    /// A SQLite file is created `0600` when missing (its directory must exist), and an
    /// existing one others may read or write is refused; SQLite runs in WAL mode with
    /// `synchronous = NORMAL` and foreign keys on. Errors: [`StoreError::MissingDirectory`],
    /// [`StoreError::ExposedFile`], [`StoreError::ReadOnly`], [`StoreError::Open`],
    /// [`StoreError::Migrate`].
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        static DRIVERS: Once = Once::new();
        DRIVERS.call_once(install_default_drivers);

        let backend = backend_of(url)?;
        let url = match backend {
            Backend::Sqlite => {
                let prepared = prepare_sqlite_url(url)?;
                create_private_file(url)?;
                prepared
            }
            Backend::Postgres => url.to_owned(),
        };
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 16,
            })
            .acquire_timeout(Duration::from_secs(10))
            // A SQLite file cannot go stale under a connection: skip the ping, a round trip
            // to the connection's thread, before every query. A PostgreSQL connection can
            // (a restarted or failed-over server), so it is tested before use.
            .test_before_acquire(backend == Backend::Postgres)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        conn.execute(SQLITE_CONNECTION_PRAGMAS).await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(|e| classify_open_error(e, &url))?;
        let store = Self {
            pool,
            backend,
            url,
            sqlite_writer: Default::default(),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Checks that the database at `url` can be used, changing nothing: no SQLite file is
    /// created (it is opened read-only when it exists) and no migration is applied; the
    /// answer says how many would be, and holds the stored signing keys. Errors: those of
    /// [`Store::open`].
    pub async fn check(url: &str) -> Result<DatabaseCheck, StoreError> {
        static DRIVERS: Once = Once::new();
        DRIVERS.call_once(install_default_drivers);
        let backend = backend_of(url)?;
        let url = match backend {
            Backend::Postgres => url.to_owned(),
            Backend::Sqlite => {
                prepare_sqlite_url(url)?;
                if let Some(file) = sqlite_file(url).filter(|file| !file.exists()) {
                    return Ok(DatabaseCheck::WillBeCreated { file });
                }
                match (url.contains("mode="), url.contains('?')) {
                    (true, _) => url.to_owned(),
                    (false, true) => format!("{url}&mode=ro"),
                    (false, false) => format!("{url}?mode=ro"),
                }
            }
        };
        let mut conn = sqlx::AnyConnection::connect(&url)
            .await
            .map_err(|e| classify_open_error(e, &url))?;
        let applied: Vec<i64> =
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = TRUE")
                .fetch_all(&mut conn)
                .await
                .or_else(|error| match &error {
                    // A database no console has started on yet has no migrations table.
                    sqlx::Error::Database(db)
                        if db.message().contains("no such table")
                            || db.message().contains("does not exist") =>
                    {
                        Ok(Vec::new())
                    }
                    _ => Err(error),
                })?;
        let migrator = match backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        let pending = migrator
            .iter()
            .filter(|m| m.migration_type.is_up_migration() && !applied.contains(&m.version))
            .count();
        let signing_keys = if applied.contains(&SEALED_SIGNING_KEYS_MIGRATION) {
            sqlx::query("SELECT kid, private_key_sealed FROM oidc_signing_keys ORDER BY kid")
                .fetch_all(&mut conn)
                .await?
                .iter()
                .map(|row| {
                    Ok(SealedSigningKey {
                        kid: row.try_get("kid")?,
                        private_key_sealed: row.try_get("private_key_sealed")?,
                    })
                })
                .collect::<Result<_, sqlx::Error>>()?
        } else {
            Vec::new()
        };
        conn.close().await?;
        Ok(DatabaseCheck::Reachable {
            pending,
            signing_keys,
        })
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        if self.backend == Backend::Sqlite {
            // WAL lets readers proceed while one writer commits; it is a property of the
            // file, so setting it once here is enough.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&self.pool)
                .await
                .map_err(|e| classify_open_error(e, &self.url))?;
        }
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator.run(&self.pool).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(inner) => classify_open_error(inner, &self.url),
            other => StoreError::Migrate(other),
        })
    }

    /// Starts a transaction that will write users: SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`, so two writers queue on `busy_timeout` instead of failing on a
    /// lock upgrade); PostgreSQL locks `users` against concurrent writers, so invariants
    /// such as "an enabled admin remains" cannot be broken by two transactions at once.
    pub(crate) async fn begin_write<'c>(
        &self,
        conn: &'c mut sqlx::pool::PoolConnection<sqlx::Any>,
    ) -> Result<sqlx::Transaction<'c, sqlx::Any>, StoreError> {
        match self.backend {
            Backend::Sqlite => {
                Ok(sqlx::Connection::begin_with(&mut **conn, "BEGIN IMMEDIATE").await?)
            }
            Backend::Postgres => {
                let mut tx = sqlx::Connection::begin(&mut **conn).await?;
                sqlx::query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE")
                    .execute(&mut *tx)
                    .await?;
                Ok(tx)
            }
        }
    }

    /// A connection for one of the frequent writes (the refresh grant's, audit rows),
    /// held until the [`WriteTurn`] drops, and closed then unless [`WriteTurn::keep`] was
    /// called.
    ///
    /// On SQLite it is this process's one writer connection, and waiting for it is
    /// waiting for this process's turn to write. SQLite has one writer at a time, and a
    /// connection that finds the write lock taken sleeps in its busy handler (1 ms, then
    /// 2, 5, 10 … ms), which put tens of milliseconds on the refresh grant's p99 at four
    /// concurrent requests; here writers follow one another without sleeping (rarer
    /// writers, and other processes such as an `admin` command, still meet the busy
    /// handler). One connection also keeps its page cache: SQLite drops a connection's
    /// cache when another connection wrote since its last transaction, and a pool hands
    /// out its idle connections in turn (and pings each one it takes back). On PostgreSQL
    /// it is a pooled connection. Errors: [`StoreError::Database`] when no connection
    /// could be opened.
    pub(crate) async fn write_turn(&self) -> Result<WriteTurn, StoreError> {
        let held = match self.backend {
            Backend::Sqlite => {
                let mut slot = self.sqlite_writer.clone().lock_owned().await;
                if slot.is_none() {
                    let mut conn = AnyConnection::connect(&self.url).await?;
                    conn.execute(SQLITE_CONNECTION_PRAGMAS).await?;
                    *slot = Some(conn);
                }
                Held::Sqlite(slot)
            }
            Backend::Postgres => Held::Pooled(self.pool.acquire().await?),
        };
        Ok(WriteTurn { held, kept: false })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL the store was opened with (after defaults were added); it may carry a
    /// password, so never log it.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// How often [`Store::checkpoint`] should run: SQLite's own checkpoint, run by the
    /// commit that fills the log, would put its copying on one request in a few hundred;
    /// run from here it stays off the request path. `wal_autocheckpoint` (10,000 pages,
    /// ≈ 40 MiB of log) remains the backstop should this stop running.
    pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(250);

    /// On SQLite, copies the write-ahead log's committed pages into the database file
    /// without waiting for readers or writers (`PRAGMA wal_checkpoint(PASSIVE)`); nothing
    /// on PostgreSQL. Run every [`Store::CHECKPOINT_INTERVAL`]. Errors:
    /// [`StoreError::Database`].
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        if self.backend == Backend::Sqlite {
            sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// Round-trips a trivial query: the readiness probe.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        conn.ping().await?;
        Ok(())
    }

    /// Whether [`Store::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.pool.is_closed()
    }

    /// Closes every connection, waiting for queries in flight (graceful shutdown).
    pub async fn close(&self) {
        let writer = self.sqlite_writer.lock().await.take();
        if let Some(conn) = writer {
            let _ = conn.close().await;
        }
        self.pool.close().await;
    }
}

/// A connection held for one write ([`Store::write_turn`]). Unless [`WriteTurn::keep`] is
/// called it is closed, rolling back whatever it has open, instead of being used again: a
/// batch that carries its own `BEGIN … COMMIT` and did not finish (a statement failed, or
/// the request was dropped and the driver stopped the batch part-way) may have left its
/// transaction open.
pub(crate) struct WriteTurn {
    held: Held,
    kept: bool,
}

enum Held {
    /// The SQLite writer's slot, never empty while held.
    Sqlite(tokio::sync::OwnedMutexGuard<Option<AnyConnection>>),
    Pooled(PoolConnection<Any>),
}

impl WriteTurn {
    pub(crate) fn connection(&mut self) -> &mut AnyConnection {
        match &mut self.held {
            Held::Sqlite(slot) => slot
                .as_mut()
                .expect("the writer is connected before its turn is handed out"),
            Held::Pooled(conn) => conn,
        }
    }

    /// Starts a transaction on this turn's connection; on SQLite it takes the write lock
    /// up front (`BEGIN IMMEDIATE`), as [`Store::begin_write`] does.
    pub(crate) async fn begin(&mut self) -> Result<sqlx::Transaction<'_, Any>, StoreError> {
        let sqlite = matches!(self.held, Held::Sqlite(_));
        let conn = self.connection();
        Ok(if sqlite {
            sqlx::Connection::begin_with(conn, "BEGIN IMMEDIATE").await?
        } else {
            sqlx::Connection::begin(conn).await?
        })
    }

    /// The write finished: the connection is used again.
    pub(crate) fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for WriteTurn {
    fn drop(&mut self) {
        if !self.kept {
            match &mut self.held {
                // Dropped, the connection's thread closes it; SQLite rolls back.
                Held::Sqlite(slot) => drop(slot.take()),
                Held::Pooled(conn) => conn.close_on_drop(),
            }
        }
    }
}

fn backend_of(url: &str) -> Result<Backend, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else {
        Err(StoreError::UnsupportedUrl {
            url: url.split('@').next_back().unwrap_or_default().to_owned(),
        })
    }
}

/// The file a `sqlite:` URL names, or `None` for an in-memory database (or another
/// scheme).
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

/// Checks what a `sqlite:` URL names before SQLite opens it: a file (an in-memory
/// database would be one empty database per pooled connection), in a directory that
/// exists, a regular file if it exists, one only its owner may read or write (mode
/// `0600` or stricter, and its `-wal` and `-shm` files too), and one this process may write (SQLite would otherwise open it
/// read-only without a word, and every write would fail later).
fn prepare_sqlite_url(url: &str) -> Result<String, StoreError> {
    let file = sqlite_file(url).ok_or(StoreError::NoSqliteFile)?;
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir
        && !dir.is_dir()
    {
        return Err(StoreError::MissingDirectory {
            dir: dir.to_path_buf(),
        });
    }
    if file.exists() {
        if !file.is_file() {
            return Err(StoreError::NotARegularFile { file });
        }
        let mode = std::fs::metadata(&file)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .map_err(|_| StoreError::ReadOnly { file: file.clone() })?;
        if mode & 0o077 != 0 {
            return Err(StoreError::ExposedFile { file, mode });
        }
        // The write-ahead log holds recent rows (sessions among them) until a checkpoint,
        // and SQLite keeps a `-wal` or `-shm` file's mode once it exists.
        for suffix in ["-wal", "-shm"] {
            let mut companion = file.clone().into_os_string();
            companion.push(suffix);
            let companion = PathBuf::from(companion);
            if let Ok(metadata) = std::fs::metadata(&companion) {
                let mode = std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o777;
                if mode & 0o077 != 0 {
                    return Err(StoreError::ExposedFile {
                        file: companion,
                        mode,
                    });
                }
            }
        }
        let writable = std::fs::OpenOptions::new().write(true).open(&file);
        if writable.is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
            && !url.contains("mode=ro")
        {
            return Err(StoreError::ReadOnly { file });
        }
    }
    Ok(if url.contains("mode=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    })
}

/// Creates the missing SQLite file of `url` empty (an empty file is an empty database) with
/// mode `0600`, before SQLite would create it with the umask's mode; SQLite gives its
/// `-wal` and `-shm` files the database file's mode.
fn create_private_file(url: &str) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let Some(file) = sqlite_file(url) else {
        return Ok(());
    };
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(StoreError::ReadOnly { file })
        }
        Err(e) => Err(StoreError::Open(sqlx::Error::Io(e))),
    }
}

fn classify_open_error(error: sqlx::Error, url: &str) -> StoreError {
    if let sqlx::Error::Database(db) = &error {
        let message = db.message();
        if message.contains("readonly") || message.contains("read-only") {
            return StoreError::ReadOnly {
                file: sqlite_file(url).unwrap_or_else(|| Path::new(url).to_path_buf()),
            };
        }
    }
    StoreError::Open(error)
}

/// The offset a page of `limit` (≥ 1) rows out of `total` starts at: `offset` (at least 0),
/// or the last page's (a multiple of `limit`; 0 when there are none) when `offset` is past
/// the end.
pub(crate) fn page_offset(offset: i64, limit: i64, total: i64) -> i64 {
    if offset < total {
        offset.max(0)
    } else {
        (total - 1).max(0) / limit * limit
    }
}

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
pub(crate) fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

pub(crate) fn to_millis(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

pub(crate) fn from_millis(ms: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| StoreError::Corrupt(format!("timestamp {ms}: {e}")))
}

pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// Commits `tx` when `result` is `Ok`, rolls it back (at once, releasing SQLite's write
/// lock) when it is `Err`.
pub(crate) async fn finish<T>(
    tx: sqlx::Transaction<'_, sqlx::Any>,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    match result {
        Ok(value) => {
            tx.commit().await?;
            Ok(value)
        }
        Err(error) => {
            tx.rollback().await?;
            Err(error)
        }
    }
}
