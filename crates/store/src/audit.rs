use sqlx::Row;
use time::OffsetDateTime;

use crate::database::{from_millis, to_millis};
use crate::{Store, StoreError};

/// One audited action: who did what to which target, from where, with what result
/// (SPEC §3 "Audit").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    pub at: OffsetDateTime,
    /// The acting user's name, or `-` when nobody is signed in (a failed sign-in).
    pub actor: String,
    /// A dotted verb such as `session.sign-in`.
    pub action: String,
    /// What the action was aimed at, e.g. the user name tried at sign-in.
    pub target: String,
    pub source_ip: String,
    /// `success`, or the refusal reason (`invalid-credentials`, `throttled`, …).
    pub result: String,
    /// Free text for operators; never a secret.
    pub detail: String,
}

impl Store {
    pub async fn append_audit(&self, event: &AuditEvent) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO audit_events (at_ms, actor, action, target, source_ip, result, detail) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(to_millis(event.at))
        .bind(&event.actor)
        .bind(&event.action)
        .bind(&event.target)
        .bind(&event.source_ip)
        .bind(&event.result)
        .bind(&event.detail)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The newest `limit` events, newest first.
    pub async fn recent_audit(&self, limit: i64) -> Result<Vec<AuditEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT at_ms, actor, action, target, source_ip, result, detail FROM audit_events \
             ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|row| {
                Ok(AuditEvent {
                    at: from_millis(row.try_get("at_ms")?)?,
                    actor: row.try_get("actor")?,
                    action: row.try_get("action")?,
                    target: row.try_get("target")?,
                    source_ip: row.try_get("source_ip")?,
                    result: row.try_get("result")?,
                    detail: row.try_get("detail")?,
                })
            })
            .collect()
    }
}
