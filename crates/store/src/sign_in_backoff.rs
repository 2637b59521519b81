//! The failed-sign-in back-off's shared state: per throttled key, its failures, how long
//! it is blocked and whether an attempt of it is being checked, plus the addresses where
//! each user name last signed in. Every replica reads and writes the same rows, so two
//! replicas admit no more attempts than one. The policy (which keys, how many failures
//! are free, how long a wait) is `banlieue_identity::SignInThrottle`'s; this module only
//! keeps the rows and changes them atomically.

use std::time::Duration;

use sqlx::Row;
use time::OffsetDateTime;

use crate::database::{from_millis, to_millis};
use crate::{Backend, Store, StoreError};

/// Exponential back-off of one kind of key: after `free_failures` failures each further
/// one blocks the key for `base_delay`, doubled per failure beyond the free ones, at most
/// `max_delay`. A key whose last failure is `forget_after` old starts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffRule {
    pub free_failures: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    pub forget_after: Duration,
}

impl BackoffRule {
    /// How long a key is blocked after its `failures`-th failure in a row, if at all.
    pub fn delay_after(&self, failures: u32) -> Option<Duration> {
        let beyond = failures.checked_sub(self.free_failures)?;
        Some(
            self.base_delay
                .saturating_mul(1 << beyond.min(30))
                .min(self.max_delay),
        )
    }
}

/// One throttled key's row as it stood when an attempt was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffState {
    /// Failures counted since the key last started over.
    pub failures: u32,
    /// Until when the back-off blocks the key (in the past: not blocked).
    pub blocked_until: OffsetDateTime,
    /// Until when another attempt holds the key (in the past: none does).
    pub in_flight_until: OffsetDateTime,
}

/// What [`Store::claim_sign_in`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInClaim {
    /// The attempt holds its keys until its lease ends: the source's, and the name's
    /// when `name_held` (false: the source is one of the name's known addresses, and
    /// the name's key is not consulted).
    Claimed { name_held: bool },
    /// A key is blocked or held by another attempt; nothing was claimed. The rows of
    /// the source's key and, if consulted, the name's (`None`: no row).
    Refused {
        source: Option<BackoffState>,
        name: Option<BackoffState>,
    },
}

/// The keys of one sign-in attempt, each `s:`/`u:` and 32 hex digits (see the
/// `0005_sign_in_backoff` migration).
#[derive(Debug, Clone, Copy)]
pub struct SignInKeys<'a> {
    pub source: &'a str,
    pub name: &'a str,
}

/// Takes a key for an attempt until `$3` unless it is blocked or held at `$2`; returns a
/// row only when it did.
const CLAIM: &str = "INSERT INTO sign_in_backoff \
     (key, failures, last_failure_ms, blocked_until_ms, in_flight_until_ms) \
     VALUES ($1, 0, 0, 0, $3) \
     ON CONFLICT (key) DO UPDATE SET in_flight_until_ms = excluded.in_flight_until_ms \
     WHERE sign_in_backoff.blocked_until_ms <= $2 AND sign_in_backoff.in_flight_until_ms <= $2 \
     RETURNING failures";

/// Counts a failure of a key at `$3` (starting over when the last one is at or before
/// `$2`) and releases it if the attempt's claim (lease `$4`) still holds it; returns the
/// failures now counted.
const COUNT_FAILURE: &str = "INSERT INTO sign_in_backoff \
     (key, failures, last_failure_ms, blocked_until_ms, in_flight_until_ms) \
     VALUES ($1, 1, $3, 0, 0) \
     ON CONFLICT (key) DO UPDATE SET \
     failures = CASE WHEN sign_in_backoff.last_failure_ms <= $2 THEN 1 \
                ELSE sign_in_backoff.failures + 1 END, \
     last_failure_ms = $3, \
     in_flight_until_ms = CASE WHEN sign_in_backoff.in_flight_until_ms = $4 THEN 0 \
                          ELSE sign_in_backoff.in_flight_until_ms END \
     RETURNING failures";

/// Releases a key if the attempt's claim (lease `$2`) still holds it: a claim that
/// outlived its lease must not free the key for the attempt that claimed it next.
const RELEASE: &str = "UPDATE sign_in_backoff SET in_flight_until_ms = 0 \
     WHERE key = $1 AND in_flight_until_ms = $2";

impl Store {
    /// Claims an attempt's keys at `now` until `lease_until`, in one transaction: the
    /// source's, then the name's unless the source is one of the name's known addresses
    /// (seen by [`Store::release_sign_in`] after `known_since`). Either every consulted
    /// key is claimed or none is. A key is refused while it is blocked or held; replicas
    /// racing for one key serialize on its row, and one of them wins.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn claim_sign_in(
        &self,
        keys: SignInKeys<'_>,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        known_since: OffsetDateTime,
    ) -> Result<SignInClaim, StoreError> {
        let (now_ms, lease_ms) = (to_millis(now), to_millis(lease_until));
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
        let known: Option<i64> = sqlx::query_scalar(
            "SELECT seen_ms FROM sign_in_known_addresses \
             WHERE name_key = $1 AND source_key = $2 AND seen_ms > $3",
        )
        .bind(keys.name)
        .bind(keys.source)
        .bind(to_millis(known_since))
        .fetch_optional(&mut *tx)
        .await?;
        let name_held = known.is_none();
        let consulted: &[&str] = if name_held {
            &[keys.source, keys.name]
        } else {
            &[keys.source]
        };
        for key in consulted {
            let claimed = sqlx::query(CLAIM)
                .bind(*key)
                .bind(now_ms)
                .bind(lease_ms)
                .fetch_optional(&mut *tx)
                .await?;
            if claimed.is_none() {
                tx.rollback().await?;
                // Read after the rollback, without this attempt's own claim of the source.
                let source = backoff_state(turn.connection(), keys.source).await?;
                let name = if name_held {
                    backoff_state(turn.connection(), keys.name).await?
                } else {
                    None
                };
                turn.keep();
                return Ok(SignInClaim::Refused { source, name });
            }
        }
        tx.commit().await?;
        turn.keep();
        Ok(SignInClaim::Claimed { name_held })
    }

    /// Releases the `held` keys of an attempt claimed until `lease_until` (each unless
    /// another claim holds it now) without counting anything; after a correct password
    /// (`remember`: the name's and source's keys), the source becomes one of the name's
    /// known addresses as of `now`, of which the newest `keep` stay (on PostgreSQL, an
    /// address another transaction is writing stays until the next sign-in or prune).
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn release_sign_in(
        &self,
        held: &[&str],
        lease_until: OffsetDateTime,
        remember: Option<SignInKeys<'_>>,
        keep: u32,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
        for key in held {
            sqlx::query(RELEASE)
                .bind(*key)
                .bind(to_millis(lease_until))
                .execute(&mut *tx)
                .await?;
        }
        if let Some(keys) = remember {
            sqlx::query(
                "INSERT INTO sign_in_known_addresses (name_key, source_key, seen_ms) \
                 VALUES ($1, $2, $3) \
                 ON CONFLICT (name_key, source_key) DO UPDATE SET seen_ms = excluded.seen_ms",
            )
            .bind(keys.name)
            .bind(keys.source)
            .bind(to_millis(now))
            .execute(&mut *tx)
            .await?;
            let trim = format!(
                "DELETE FROM sign_in_known_addresses WHERE (name_key, source_key) IN \
                 (SELECT name_key, source_key FROM sign_in_known_addresses \
                  WHERE name_key = $1 AND source_key NOT IN \
                  (SELECT source_key FROM sign_in_known_addresses WHERE name_key = $1 \
                   ORDER BY seen_ms DESC, source_key LIMIT $2){})",
                self.skip_locked()
            );
            sqlx::query(&trim)
                .bind(keys.name)
                .bind(i64::from(keep))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        turn.keep();
        Ok(())
    }

    /// Counts a failure at `now` for each held key under its rule, blocks the keys that
    /// have used up their free failures, and releases those the attempt's claim (until
    /// `lease_until`) still holds, in one transaction.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn count_sign_in_failure(
        &self,
        held: &[(&str, BackoffRule)],
        lease_until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let now_ms = to_millis(now);
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
        for (key, rule) in held {
            let failures: i64 = sqlx::query_scalar(COUNT_FAILURE)
                .bind(*key)
                .bind(to_millis(now - rule.forget_after))
                .bind(now_ms)
                .bind(to_millis(lease_until))
                .fetch_one(&mut *tx)
                .await?;
            let failures = u32::try_from(failures).unwrap_or(u32::MAX);
            if let Some(delay) = rule.delay_after(failures) {
                sqlx::query(
                    "UPDATE sign_in_backoff SET blocked_until_ms = $2 \
                     WHERE key = $1 AND blocked_until_ms < $2",
                )
                .bind(*key)
                .bind(to_millis(now + delay))
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        turn.keep();
        Ok(())
    }

    /// Deletes the back-off rows that remember nothing any more (no failure after
    /// `failures_before`, neither blocked nor held at `now`) and the known addresses last
    /// seen before `addresses_before`. Returns how many rows went.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn prune_sign_in_backoff(
        &self,
        now: OffsetDateTime,
        failures_before: OffsetDateTime,
        addresses_before: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let now_ms = to_millis(now);
        // Rows a sign-in is writing are skipped, not waited for: waiting could deadlock
        // with a claim that locks the source's row, then the name's.
        let keys = format!(
            "DELETE FROM sign_in_backoff WHERE key IN (SELECT key FROM sign_in_backoff \
             WHERE last_failure_ms < $1 AND blocked_until_ms <= $2 AND in_flight_until_ms <= $2{})",
            self.skip_locked()
        );
        let addresses = format!(
            "DELETE FROM sign_in_known_addresses WHERE (name_key, source_key) IN \
             (SELECT name_key, source_key FROM sign_in_known_addresses WHERE seen_ms < $1{})",
            self.skip_locked()
        );
        let mut turn = self.write_turn().await?;
        let keys = sqlx::query(&keys)
            .bind(to_millis(failures_before))
            .bind(now_ms)
            .execute(turn.connection())
            .await?
            .rows_affected();
        let addresses = sqlx::query(&addresses)
            .bind(to_millis(addresses_before))
            .execute(turn.connection())
            .await?
            .rows_affected();
        turn.keep();
        Ok(keys + addresses)
    }

    /// How a subquery that picks rows to delete skips the rows other transactions hold:
    /// on PostgreSQL `FOR UPDATE SKIP LOCKED`; SQLite has one writer at a time.
    fn skip_locked(&self) -> &'static str {
        match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        }
    }

    /// The row of one throttled key, if it has one.
    ///
    /// Errors: [`StoreError::Database`], [`StoreError::Corrupt`].
    pub async fn sign_in_backoff(&self, key: &str) -> Result<Option<BackoffState>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        backoff_state(&mut conn, key).await
    }
}

async fn backoff_state(
    conn: &mut sqlx::AnyConnection,
    key: &str,
) -> Result<Option<BackoffState>, StoreError> {
    let row = sqlx::query(
        "SELECT failures, blocked_until_ms, in_flight_until_ms FROM sign_in_backoff WHERE key = $1",
    )
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|row| {
        Ok(BackoffState {
            failures: u32::try_from(row.try_get::<i64, _>(0)?).unwrap_or(u32::MAX),
            blocked_until: from_millis(row.try_get(1)?)?,
            in_flight_until: from_millis(row.try_get(2)?)?,
        })
    })
    .transpose()
}
