use async_trait::async_trait;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::SqlitePoolOptions;
use tower_sessions_core::session::{Id, Record};
use tower_sessions_core::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use crate::{Backend, Store, StoreError};

/// The tower-sessions store for browser sessions, on the same database as the [`Store`].
///
/// The database never holds a session's id, only its digest ([`stored_id`]): a copy of
/// the database (a backup, a replica's disk) names no session a cookie could take over.
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

/// The id a session is stored under: the first 128 bits of SHA-256 over its id's 16
/// bytes. The id is 128 random bits, so the digest needs no salt and cannot be reversed.
fn stored_id(id: &Id) -> Id {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &id.0.to_be_bytes());
    let mut bytes = [0; 16];
    bytes.copy_from_slice(&digest.as_ref()[..16]);
    Id(i128::from_be_bytes(bytes))
}

/// `record` as stored: its id (which the stores also write inside the data) replaced.
fn at_rest(record: &Record) -> Record {
    Record {
        id: stored_id(&record.id),
        ..record.clone()
    }
}

impl SessionBackend {
    async fn create_stored(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.create(record).await,
            Self::Postgres(s) => s.create(record).await,
        }
    }

    async fn delete_stored(&self, id: &Id) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.delete(id).await,
            Self::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl SessionStore for SessionBackend {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        loop {
            let mut stored = at_rest(record);
            let wanted = stored.id;
            self.create_stored(&mut stored).await?;
            if stored.id == wanted {
                return Ok(());
            }
            // The digest was taken, and the store chose a random id instead, which no
            // cookie can name: drop it and draw another session id.
            self.delete_stored(&stored.id).await?;
            record.id = Id::default();
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let stored = at_rest(record);
        match self {
            Self::Sqlite(s) => s.save(&stored).await,
            Self::Postgres(s) => s.save(&stored).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let stored = stored_id(id);
        let loaded = match self {
            Self::Sqlite(s) => s.load(&stored).await,
            Self::Postgres(s) => s.load(&stored).await,
        }?;
        Ok(loaded.map(|record| Record { id: *id, ..record }))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        self.delete_stored(&stored_id(id)).await
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    async fn stored_ids(store: &Store) -> Vec<String> {
        let table = match store.backend() {
            Backend::Sqlite => "tower_sessions",
            Backend::Postgres => "tower_sessions.session",
        };
        sqlx::query_scalar(&format!("select id from {table}"))
            .fetch_all(&store.pool)
            .await
            .unwrap()
    }

    async fn sessions_are_stored_under_a_digest_of_their_id(store: Store) {
        let sessions = store.session_backend().await.unwrap();
        let mut record = Record {
            id: Id::default(),
            data: HashMap::from([("user".to_owned(), serde_json::json!("alice"))]),
            expiry_date: time::OffsetDateTime::now_utc() + time::Duration::hours(1),
        };
        sessions.create(&mut record).await.unwrap();
        let id = record.id;
        let rows = stored_ids(&store).await;
        assert_eq!(rows, [stored_id(&id).to_string()]);
        assert_ne!(
            rows[0],
            id.to_string(),
            "the id itself is not in the database"
        );

        let loaded = sessions.load(&id).await.unwrap().unwrap();
        assert_eq!((loaded.id, &loaded.data), (id, &record.data));
        assert!(
            sessions.load(&stored_id(&id)).await.unwrap().is_none(),
            "the stored id opens nothing"
        );
        record.data.insert("seen".to_owned(), serde_json::json!(1));
        sessions.save(&record).await.unwrap();
        assert_eq!(sessions.load(&id).await.unwrap().unwrap().data, record.data);
        assert_eq!(stored_ids(&store).await.len(), 1);
        sessions.delete(&id).await.unwrap();
        assert!(sessions.load(&id).await.unwrap().is_none());
        assert!(stored_ids(&store).await.is_empty());
    }

    #[tokio::test]
    async fn sessions_are_stored_under_a_digest_of_their_id_on_both_backends() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/console.db", dir.path().display());
        sessions_are_stored_under_a_digest_of_their_id(Store::open(&url).await.unwrap()).await;
        if let Some(url) = banlieue_testbed::postgres::scratch_database("session ids").await {
            sessions_are_stored_under_a_digest_of_their_id(Store::open(&url).await.unwrap()).await;
        }
    }
}
