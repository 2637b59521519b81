use async_trait::async_trait;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::SqlitePoolOptions;
use tower_sessions_core::session::{Id, Record};
use tower_sessions_core::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use crate::{Backend, Store, StoreError};

/// The tower-sessions store for browser sessions, on the same database as the [`Store`].
///
/// tower-sessions' sqlx stores need a concrete pool, so this holds its own small pool
/// next to the store's `Any` pool.
#[derive(Debug, Clone)]
pub enum SessionBackend {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Store {
    /// Opens the session store and creates its table when missing.
    pub async fn session_backend(&self) -> Result<SessionBackend, StoreError> {
        let backend = match self.backend() {
            Backend::Sqlite => {
                let pool = SqlitePoolOptions::new()
                    .max_connections(4)
                    .connect(self.url())
                    .await
                    .map_err(StoreError::Open)?;
                let store = SqliteStore::new(pool);
                store.migrate().await?;
                SessionBackend::Sqlite(store)
            }
            Backend::Postgres => {
                let pool = PgPoolOptions::new()
                    .max_connections(8)
                    .connect(self.url())
                    .await
                    .map_err(StoreError::Open)?;
                let store = PostgresStore::new(pool);
                store.migrate().await?;
                SessionBackend::Postgres(store)
            }
        };
        Ok(backend)
    }
}

#[async_trait]
impl SessionStore for SessionBackend {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.create(record).await,
            Self::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.save(record).await,
            Self::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            Self::Sqlite(s) => s.load(id).await,
            Self::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.delete(id).await,
            Self::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for SessionBackend {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.delete_expired().await,
            Self::Postgres(s) => s.delete_expired().await,
        }
    }
}
