use sqlx::Row;
use time::OffsetDateTime;

use crate::database::{from_millis, to_millis};
use crate::{Store, StoreError};

/// A signed-in browser session as its owner sees it in "My sessions".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSession {
    /// Random, 128 bits, base64url: the key kept inside the session cookie's record.
    pub handle: String,
    pub user_id: i64,
    pub created_at: OffsetDateTime,
    pub last_seen_at: OffsetDateTime,
    pub source_ip: String,
    /// At most 256 characters of the browser's `User-Agent`.
    pub user_agent: String,
}

impl Store {
    pub async fn insert_user_session(&self, session: &UserSession) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO user_sessions (handle, user_id, created_ms, last_seen_ms, source_ip, user_agent) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&session.handle)
        .bind(session.user_id)
        .bind(to_millis(session.created_at))
        .bind(to_millis(session.last_seen_at))
        .bind(&session.source_ip)
        .bind(&session.user_agent)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The session with `handle`, if it was not revoked.
    pub async fn user_session(&self, handle: &str) -> Result<Option<UserSession>, StoreError> {
        let row = sqlx::query(
            "SELECT handle, user_id, created_ms, last_seen_ms, source_ip, user_agent \
             FROM user_sessions WHERE handle = $1",
        )
        .bind(handle)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| session_from_row(&row)).transpose()
    }

    /// Records activity; callers throttle this to about once a minute per session.
    pub async fn touch_user_session(
        &self,
        handle: &str,
        at: OffsetDateTime,
        source_ip: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE user_sessions SET last_seen_ms = $1, source_ip = $2 WHERE handle = $3")
            .bind(to_millis(at))
            .bind(source_ip)
            .bind(handle)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The user's live sessions, most recently used first.
    pub async fn user_sessions_of(&self, user_id: i64) -> Result<Vec<UserSession>, StoreError> {
        let rows = sqlx::query(
            "SELECT handle, user_id, created_ms, last_seen_ms, source_ip, user_agent \
             FROM user_sessions WHERE user_id = $1 ORDER BY last_seen_ms DESC, handle",
        )
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_from_row).collect()
    }

    /// Ends one session of `user_id`; `false` when there was no such session (another
    /// user's handle included).
    pub async fn delete_user_session(
        &self,
        user_id: i64,
        handle: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM user_sessions WHERE handle = $1 AND user_id = $2")
            .bind(handle)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

fn session_from_row(row: &sqlx::any::AnyRow) -> Result<UserSession, StoreError> {
    Ok(UserSession {
        handle: row.try_get("handle")?,
        user_id: row.try_get("user_id")?,
        created_at: from_millis(row.try_get("created_ms")?)?,
        last_seen_at: from_millis(row.try_get("last_seen_ms")?)?,
        source_ip: row.try_get("source_ip")?,
        user_agent: row.try_get("user_agent")?,
    })
}
