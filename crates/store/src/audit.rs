use sqlx::Row;
use time::OffsetDateTime;

use crate::database::{escape_like, from_millis, page_offset, to_millis};
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

impl AuditEvent {
    /// The event of an action done now by `actor` (a user name, `-` or `system`) from
    /// `source`.
    pub fn now(
        actor: &str,
        action: &str,
        target: &str,
        source: std::net::IpAddr,
        result: &str,
        detail: &str,
    ) -> Self {
        Self {
            at: OffsetDateTime::now_utc(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            target: target.to_owned(),
            source_ip: source.to_string(),
            result: result.to_owned(),
            detail: detail.to_owned(),
        }
    }
}

/// Filters of the audit log; empty strings match everything. `actor`, `action`, `target`
/// and `result` match any event whose field contains them, ignoring ASCII case (`session`
/// finds `session.sign-in` and `session.sign-out`, `invalid` finds
/// `invalid-credentials`); instants bound `at` inclusively.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub actor: String,
    pub action: String,
    pub target: String,
    pub result: String,
    pub since: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
}

/// One page of audit events, newest first, and how many match in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    pub events: Vec<AuditEvent>,
    pub total: i64,
    /// The offset of `events[0]`: the one asked for, or the last page's when that was past
    /// the end (0 when nothing matches).
    pub offset: i64,
}

impl Store {
    /// Events matching `query`, newest first: `limit` (≥ 1) from `offset`, or from the last
    /// page's first event when `offset` is past the end.
    pub async fn query_audit(
        &self,
        query: &AuditQuery,
        offset: i64,
        limit: i64,
    ) -> Result<AuditPage, StoreError> {
        let filter = "lower(actor) LIKE $1 ESCAPE '\\' AND lower(action) LIKE $2 ESCAPE '\\' \
                      AND lower(target) LIKE $3 ESCAPE '\\' AND lower(result) LIKE $4 ESCAPE '\\' \
                      AND at_ms >= $5 AND at_ms <= $6";
        let contains = |text: &str| format!("%{}%", escape_like(&text.to_ascii_lowercase()));
        let (actor, action, target, result) = (
            contains(&query.actor),
            contains(&query.action),
            contains(&query.target),
            contains(&query.result),
        );
        let since = query.since.map_or(i64::MIN, to_millis);
        let until = query.until.map_or(i64::MAX, to_millis);
        let total: i64 =
            sqlx::query_scalar(&format!("SELECT COUNT(*) FROM audit_events WHERE {filter}"))
                .bind(&actor)
                .bind(&action)
                .bind(&target)
                .bind(&result)
                .bind(since)
                .bind(until)
                .fetch_one(&self.pool)
                .await?;
        let limit = limit.max(1);
        let offset = page_offset(offset, limit, total);
        let rows = sqlx::query(&format!(
            "SELECT at_ms, actor, action, target, source_ip, result, detail FROM audit_events \
             WHERE {filter} ORDER BY id DESC LIMIT $7 OFFSET $8"
        ))
        .bind(&actor)
        .bind(&action)
        .bind(&target)
        .bind(&result)
        .bind(since)
        .bind(until)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        let events = rows.iter().map(event_from_row).collect::<Result<_, _>>()?;
        Ok(AuditPage {
            events,
            total,
            offset,
        })
    }

    pub async fn append_audit(&self, event: &AuditEvent) -> Result<(), StoreError> {
        let mut turn = self.write_turn().await?;
        bind_audit(sqlx::query(INSERT_AUDIT), event)
            .execute(turn.connection())
            .await?;
        turn.keep();
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
        rows.iter().map(event_from_row).collect()
    }
}

/// `query` with `event`'s seven columns bound next, in the order of `audit_events`:
/// `at_ms`, `actor`, `action`, `target`, `source_ip`, `result`, `detail`.
/// Appends one audit event, its fields bound by [`bind_audit`] as `$1`–`$7`.
pub(crate) const INSERT_AUDIT: &str = "INSERT INTO audit_events (at_ms, actor, action, target, \
     source_ip, result, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)";

pub(crate) fn bind_audit<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    event: &'q AuditEvent,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(to_millis(event.at))
        .bind(&event.actor)
        .bind(&event.action)
        .bind(&event.target)
        .bind(&event.source_ip)
        .bind(&event.result)
        .bind(&event.detail)
}

fn event_from_row(row: &sqlx::any::AnyRow) -> Result<AuditEvent, StoreError> {
    Ok(AuditEvent {
        at: from_millis(row.try_get("at_ms")?)?,
        actor: row.try_get("actor")?,
        action: row.try_get("action")?,
        target: row.try_get("target")?,
        source_ip: row.try_get("source_ip")?,
        result: row.try_get("result")?,
        detail: row.try_get("detail")?,
    })
}
