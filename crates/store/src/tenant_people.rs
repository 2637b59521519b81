//! The people of tenants the console has acted for (SPEC §7): one row per tenant and
//! token subject, with when it was first and last noted. The console impersonates only
//! the people recently noted here ([`Store::tenant_people_seen_since`]), as it
//! impersonates only its own users, so the cluster's list stays as short as the use.

use sqlx::Row;
use time::OffsetDateTime;

use crate::database::{from_millis, to_millis};
use crate::{Store, StoreError};

/// A tenant's person as their last verified token named them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantPerson {
    /// The tenant's id (`spec.tenantId`).
    pub tenant: String,
    /// The token's `sub`.
    pub subject: String,
    /// The tenant's username claim.
    pub username: String,
    /// The token's `name`, if any.
    pub display_name: Option<String>,
    /// The token's `email`, if any.
    pub email: Option<String>,
}

/// A noted person: [`TenantPerson`] with when the console first and last noted them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotedTenantPerson {
    pub person: TenantPerson,
    pub first_seen: OffsetDateTime,
    pub last_seen: OffsetDateTime,
}

impl Store {
    /// Notes `person` as seen at `now`: a new row, or the existing one's names and last
    /// sighting replaced (its first sighting kept).
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn note_tenant_person(
        &self,
        person: &TenantPerson,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut turn = self.write_turn().await?;
        sqlx::query(
            "INSERT INTO tenant_people \
             (tenant, subject, username, display_name, email, first_seen_ms, last_seen_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $6) \
             ON CONFLICT (tenant, subject) DO UPDATE SET username = excluded.username, \
             display_name = excluded.display_name, email = excluded.email, \
             last_seen_ms = excluded.last_seen_ms",
        )
        .bind(&person.tenant)
        .bind(&person.subject)
        .bind(&person.username)
        .bind(person.display_name.as_deref())
        .bind(person.email.as_deref())
        .bind(to_millis(now))
        .execute(turn.connection())
        .await?;
        turn.keep();
        Ok(())
    }

    /// The people last noted at or after `since`, by tenant then subject.
    ///
    /// Errors: [`StoreError::Database`]; a stored instant out of range.
    pub async fn tenant_people_seen_since(
        &self,
        since: OffsetDateTime,
    ) -> Result<Vec<NotedTenantPerson>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, subject, username, display_name, email, first_seen_ms, \
             last_seen_ms FROM tenant_people WHERE last_seen_ms >= $1 \
             ORDER BY tenant, subject",
        )
        .bind(to_millis(since))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(NotedTenantPerson {
                    person: TenantPerson {
                        tenant: row.try_get("tenant")?,
                        subject: row.try_get("subject")?,
                        username: row.try_get("username")?,
                        display_name: row.try_get("display_name")?,
                        email: row.try_get("email")?,
                    },
                    first_seen: from_millis(row.try_get("first_seen_ms")?)?,
                    last_seen: from_millis(row.try_get("last_seen_ms")?)?,
                })
            })
            .collect()
    }
}
