//! The OIDC issuer's state (SPEC §4): signing keys, authorization codes and refresh-token
//! families. Codes and refresh tokens are stored as hashes only; the rules (lifetimes,
//! PKCE, rotation and reuse detection) live in `banlieue-identity`.

use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;

use crate::audit::bind_audit;
use crate::database::{finish, from_millis, to_millis};
use crate::users::{user_from_row, user_select_list};
use crate::{AuditEvent, Backend, Store, StoreError, UserRecord};

/// An RSA signing key as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKeyRecord {
    /// The JWK `kid` (RFC 7517 §4.5).
    pub kid: String,
    /// The private key (PKCS#8 DER, RFC 5208) sealed under the key-encryption key, or
    /// plain PKCS#8 in a row from before sealing. Never logged.
    pub private_key_sealed: Vec<u8>,
    /// The public key as a JWK JSON object (RFC 7517), as published in the JWKS.
    pub public_jwk: String,
    /// When the key was published.
    pub created_at: OffsetDateTime,
    /// When it becomes the signing key (a newer active key supersedes it).
    pub activates_at: OffsetDateTime,
}

impl std::fmt::Debug for SigningKeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeyRecord")
            .field("kid", &self.kid)
            .field("created_at", &self.created_at)
            .field("activates_at", &self.activates_at)
            .finish_non_exhaustive()
    }
}

/// A pending authorization code: what it was issued for (RFC 6749 §4.1.2, RFC 7636 §4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationCodeRecord {
    /// SHA-256 of the code, hex.
    pub code_hash: String,
    pub client_id: String,
    pub redirect_uri: String,
    /// The PKCE `code_challenge` (S256, base64url).
    pub code_challenge: String,
    pub nonce: Option<String>,
    pub audience: String,
    /// Granted scopes, space-separated.
    pub scope: String,
    pub user_id: i64,
    pub auth_time: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// A stored authorization code: as issued, and whether it was redeemed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCode {
    pub record: AuthorizationCodeRecord,
    /// Redeemed already: presenting it again is a replay.
    pub redeemed: bool,
    /// The refresh family its redemption started, if any.
    pub family_id: Option<String>,
}

/// What redeeming a code found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeRedemption {
    /// First use: the code is now redeemed (with its family, if one was given).
    Fresh,
    /// The code was used before; `family_id` is the refresh family issued then, if any
    /// (RFC 6749 §4.1.2: tokens issued from a replayed code should be revoked).
    Replayed {
        family_id: Option<String>,
    },
    Unknown,
}

/// A refresh-token family: every token rotated from one authorization.
#[derive(Clone, PartialEq, Eq)]
pub struct RefreshFamilyRecord {
    /// Random, 128 bits, hex.
    pub id: String,
    pub user_id: i64,
    pub client_id: String,
    pub audience: String,
    pub scope: String,
    /// HMAC key deriving each successor token from its predecessor. Never logged.
    pub secret: Vec<u8>,
    /// When the user authenticated (the ID token's `auth_time`).
    pub auth_time: OffsetDateTime,
    pub created_at: OffsetDateTime,
    /// The absolute end of the family, however often it rotates.
    pub expires_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
}

impl std::fmt::Debug for RefreshFamilyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefreshFamilyRecord")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .field("expires_at", &self.expires_at)
            .field("revoked_at", &self.revoked_at)
            .finish_non_exhaustive()
    }
}

/// One refresh token (by hash) and its family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshTokenRecord {
    pub token_hash: String,
    pub family: RefreshFamilyRecord,
    pub issued_at: OffsetDateTime,
    /// Set when the token was rotated.
    pub retired_at: Option<OffsetDateTime>,
    /// Whether the token that replaced it is still the family's current one.
    pub successor_is_current: bool,
    /// The family's user as stored now; `None` once deleted.
    pub holder: Option<UserRecord>,
}

impl Store {
    pub async fn insert_signing_key(&self, key: &SigningKeyRecord) -> Result<(), StoreError> {
        insert_key(&self.pool, key).await
    }

    /// Inserts `key` unless a key newer than `newest_before` exists; `true` when inserted.
    /// One write transaction, so replicas racing to rotate add a single key.
    pub async fn insert_signing_key_unless_newer(
        &self,
        key: &SigningKeyRecord,
        newest_before: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
            let newest: Option<i64> =
                sqlx::query_scalar("SELECT MAX(created_ms) FROM oidc_signing_keys")
                    .fetch_one(&mut *tx)
                    .await?;
            if newest.is_some_and(|ms| ms > to_millis(newest_before)) {
                return Ok(false);
            }
            insert_key(&mut *tx, key).await?;
            Ok(true)
        }
        .await;
        finish(tx, result).await
    }

    /// Every stored key, oldest activation first.
    pub async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT kid, private_key_sealed, public_jwk, created_ms, activates_ms \
             FROM oidc_signing_keys ORDER BY activates_ms, created_ms, kid",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(SigningKeyRecord {
                    kid: row.try_get("kid")?,
                    private_key_sealed: row.try_get("private_key_sealed")?,
                    public_jwk: row.try_get("public_jwk")?,
                    created_at: from_millis(row.try_get("created_ms")?)?,
                    activates_at: from_millis(row.try_get("activates_ms")?)?,
                })
            })
            .collect()
    }

    /// Replaces the sealed private key of `kid` (sealed again under a new key-encryption
    /// key); `false` when the key is gone.
    pub async fn replace_sealed_signing_key(
        &self,
        kid: &str,
        sealed: &[u8],
    ) -> Result<bool, StoreError> {
        let updated =
            sqlx::query("UPDATE oidc_signing_keys SET private_key_sealed = $1 WHERE kid = $2")
                .bind(sealed)
                .bind(kid)
                .execute(&self.pool)
                .await?;
        Ok(updated.rows_affected() == 1)
    }

    pub async fn delete_signing_key(&self, kid: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM oidc_signing_keys WHERE kid = $1")
            .bind(kid)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn insert_authorization_code(
        &self,
        code: &AuthorizationCodeRecord,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO oidc_authorization_codes (code_hash, client_id, redirect_uri, \
             code_challenge, nonce, audience, scope, user_id, auth_time_ms, expires_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&code.code_hash)
        .bind(&code.client_id)
        .bind(&code.redirect_uri)
        .bind(&code.code_challenge)
        .bind(&code.nonce)
        .bind(&code.audience)
        .bind(&code.scope)
        .bind(code.user_id)
        .bind(to_millis(code.auth_time))
        .bind(to_millis(code.expires_at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The code with this hash as it was issued, and whether it was redeemed: what the
    /// token endpoint checks before it redeems (so a request that fails the checks leaves
    /// the code to its client).
    pub async fn authorization_code(
        &self,
        code_hash: &str,
    ) -> Result<Option<StoredCode>, StoreError> {
        let row = sqlx::query(
            "SELECT code_hash, client_id, redirect_uri, code_challenge, nonce, audience, \
             scope, user_id, auth_time_ms, expires_ms, consumed_ms, family_id \
             FROM oidc_authorization_codes WHERE code_hash = $1",
        )
        .bind(code_hash)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(StoredCode {
                record: code_from_row(&row)?,
                redeemed: row.try_get::<Option<i64>, _>("consumed_ms")?.is_some(),
                family_id: row.try_get("family_id")?,
            })
        })
        .transpose()
    }

    /// Marks the code redeemed and, when `family` is given (a grant with offline
    /// access), starts that refresh family with its first token (`family.1`, a hash), in
    /// one transaction: of two concurrent redemptions exactly one is
    /// [`CodeRedemption::Fresh`], and a redeemed code always has the family it issued, so
    /// a replay can revoke it. The loser's family is not written. Expiry and the client's
    /// proofs are the caller's to check first ([`Store::authorization_code`]).
    pub async fn redeem_authorization_code(
        &self,
        code_hash: &str,
        now: OffsetDateTime,
        family: Option<(&RefreshFamilyRecord, &str)>,
    ) -> Result<CodeRedemption, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let redeemed = async {
            if let Some((family, first_token_hash)) = family {
                sqlx::query(
                    "INSERT INTO oidc_refresh_families (id, user_id, client_id, audience, scope, \
                     secret, auth_time_ms, created_ms, expires_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&family.id)
                .bind(family.user_id)
                .bind(&family.client_id)
                .bind(&family.audience)
                .bind(&family.scope)
                .bind(&family.secret)
                .bind(to_millis(family.auth_time))
                .bind(to_millis(family.created_at))
                .bind(to_millis(family.expires_at))
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO oidc_refresh_tokens (token_hash, family_id, issued_ms) \
                     VALUES ($1, $2, $3)",
                )
                .bind(first_token_hash)
                .bind(&family.id)
                .bind(to_millis(family.created_at))
                .execute(&mut *tx)
                .await?;
            }
            let updated = sqlx::query(
                "UPDATE oidc_authorization_codes SET consumed_ms = $1, family_id = $2 \
                 WHERE code_hash = $3 AND consumed_ms IS NULL",
            )
            .bind(to_millis(now))
            .bind(family.map(|(family, _)| family.id.clone()))
            .bind(code_hash)
            .execute(&mut *tx)
            .await?;
            Ok::<_, StoreError>(updated.rows_affected() == 1)
        }
        .await;
        match redeemed {
            Ok(true) => {
                tx.commit().await?;
                Ok(CodeRedemption::Fresh)
            }
            Ok(false) => {
                tx.rollback().await?;
                drop(conn);
                Ok(match self.authorization_code(code_hash).await? {
                    Some(stored) => CodeRedemption::Replayed {
                        family_id: stored.family_id,
                    },
                    None => CodeRedemption::Unknown,
                })
            }
            Err(error) => {
                tx.rollback().await?;
                Err(error)
            }
        }
    }

    /// The refresh token with this hash, its family and the family's user, in one query.
    pub async fn refresh_token(
        &self,
        token_hash: &str,
    ) -> Result<Option<RefreshTokenRecord>, StoreError> {
        let holder = user_select_list(self.backend(), "u", HOLDER);
        let row = sqlx::query(&format!(
            "SELECT t.token_hash, t.issued_ms, t.retired_ms, s.retired_ms AS successor_retired_ms, \
             s.token_hash AS successor_hash, f.id, f.user_id, f.client_id, f.audience, f.scope, \
             f.secret, f.auth_time_ms, f.created_ms, f.expires_ms, f.revoked_ms, {holder} \
             FROM oidc_refresh_tokens t \
             JOIN oidc_refresh_families f ON f.id = t.family_id \
             LEFT JOIN oidc_refresh_tokens s ON s.token_hash = t.successor_hash \
             LEFT JOIN users u ON u.id = f.user_id \
             WHERE t.token_hash = $1"
        ))
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let successor_exists = row
            .try_get::<Option<String>, _>("successor_hash")?
            .is_some();
        let successor_retired = row
            .try_get::<Option<i64>, _>("successor_retired_ms")?
            .is_some();
        let holder_exists = row
            .try_get::<Option<i64>, _>(format!("{HOLDER}id").as_str())?
            .is_some();
        Ok(Some(RefreshTokenRecord {
            token_hash: row.try_get("token_hash")?,
            family: family_from_row(&row)?,
            issued_at: from_millis(row.try_get("issued_ms")?)?,
            retired_at: optional_instant(&row, "retired_ms")?,
            successor_is_current: successor_exists && !successor_retired,
            holder: holder_exists
                .then(|| user_from_row(&row, HOLDER))
                .transpose()?,
        }))
    }

    /// Retires `token_hash` in favour of `successor_hash`, only if it is still current,
    /// its family is not revoked and the family's user is still at `holder_version`
    /// (unchanged since the caller judged them), and writes `audit` with it, as one
    /// transaction in one round trip to the database (the refresh grant's write: one
    /// commit, and no answered rotation without its audit row). `false`, with nothing
    /// written, when any of that changed first (the caller reads the rows again).
    pub async fn rotate_refresh_token(
        &self,
        token_hash: &str,
        successor_hash: &str,
        holder_version: i64,
        now: OffsetDateTime,
        audit: &AuditEvent,
    ) -> Result<bool, StoreError> {
        let sql = match self.backend() {
            Backend::Sqlite => ROTATE_SQLITE,
            Backend::Postgres => ROTATE_POSTGRES,
        };
        let mut turn = self.write_turn().await?;
        let query = sqlx::query(sql)
            .bind(to_millis(now))
            .bind(successor_hash)
            .bind(token_hash);
        let rows = bind_audit(query, audit)
            .bind(holder_version)
            .fetch_all(turn.connection())
            .await?;
        turn.keep();
        Ok(rows.len() == 1 && rows[0].try_get::<i64, _>("rotated")? == 1)
    }

    /// Records `audit`, the answer to a retired token presented again within the grace
    /// window, only if that answer is still due: the token's successor is still its
    /// family's current token, the family is not revoked and its user is still at
    /// `holder_version`. `false`, with nothing written, otherwise (the caller reads the
    /// rows again).
    pub async fn audit_refresh_in_grace(
        &self,
        token_hash: &str,
        holder_version: i64,
        audit: &AuditEvent,
    ) -> Result<bool, StoreError> {
        let mut turn = self.write_turn().await?;
        let query = sqlx::query(
            "INSERT INTO audit_events (at_ms, actor, action, target, source_ip, result, detail) \
             SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM oidc_refresh_tokens t \
             JOIN oidc_refresh_tokens s ON s.token_hash = t.successor_hash \
             JOIN oidc_refresh_families f ON f.id = t.family_id \
             JOIN users u ON u.id = f.user_id \
             WHERE t.token_hash = $8 AND s.retired_ms IS NULL AND f.revoked_ms IS NULL \
             AND u.version = $9)",
        );
        let done = bind_audit(query, audit)
            .bind(token_hash)
            .bind(holder_version)
            .execute(turn.connection())
            .await?;
        turn.keep();
        Ok(done.rows_affected() == 1)
    }

    /// Revokes a whole family (reuse detected, RFC 7009 revocation, code replay); `true`
    /// when it was live.
    pub async fn revoke_refresh_family(
        &self,
        family_id: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE oidc_refresh_families SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL",
        )
        .bind(to_millis(now))
        .bind(family_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes codes and families that can no longer be used: codes expired before
    /// `codes_before`, families expired or revoked before `families_before`.
    /// Returns how many rows went.
    pub async fn prune_oidc_grants(
        &self,
        codes_before: OffsetDateTime,
        families_before: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let codes = sqlx::query("DELETE FROM oidc_authorization_codes WHERE expires_ms < $1")
            .bind(to_millis(codes_before))
            .execute(&self.pool)
            .await?;
        let families = sqlx::query(
            "DELETE FROM oidc_refresh_families WHERE expires_ms < $1 OR revoked_ms < $1",
        )
        .bind(to_millis(families_before))
        .execute(&self.pool)
        .await?;
        Ok(codes.rows_affected() + families.rows_affected())
    }
}

async fn insert_key<'e, E>(executor: E, key: &SigningKeyRecord) -> Result<(), StoreError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    sqlx::query(
        "INSERT INTO oidc_signing_keys (kid, private_key_sealed, public_jwk, created_ms, activates_ms) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&key.kid)
    .bind(&key.private_key_sealed)
    .bind(&key.public_jwk)
    .bind(to_millis(key.created_at))
    .bind(to_millis(key.activates_at))
    .execute(executor)
    .await?;
    Ok(())
}

fn code_from_row(row: &AnyRow) -> Result<AuthorizationCodeRecord, StoreError> {
    Ok(AuthorizationCodeRecord {
        code_hash: row.try_get("code_hash")?,
        client_id: row.try_get("client_id")?,
        redirect_uri: row.try_get("redirect_uri")?,
        code_challenge: row.try_get("code_challenge")?,
        nonce: row.try_get("nonce")?,
        audience: row.try_get("audience")?,
        scope: row.try_get("scope")?,
        user_id: row.try_get("user_id")?,
        auth_time: from_millis(row.try_get("auth_time_ms")?)?,
        expires_at: from_millis(row.try_get("expires_ms")?)?,
    })
}

/// The prefix of the holder's columns in [`Store::refresh_token`].
const HOLDER: &str = "holder_";

/// The refresh grant's write on SQLite, which has no data-modifying CTEs: a batch that
/// takes the write lock, retires the token, inserts its successor and the audit row only
/// if the statement before changed a row (`changes()`), answers one row `rotated` (1 or
/// 0: the rows the audit insert wrote), and commits. (The driver's count of affected
/// rows cannot tell: for `BEGIN` and `COMMIT` it repeats the last DML statement's.)
/// Parameters: `$1` now (ms), `$2` successor hash, `$3` token hash, `$4`–`$10` the audit
/// event, `$11` the user's expected version.
const ROTATE_SQLITE: &str = "BEGIN IMMEDIATE; \
     UPDATE oidc_refresh_tokens SET retired_ms = $1, successor_hash = $2 \
     WHERE token_hash = $3 AND retired_ms IS NULL AND EXISTS (SELECT 1 FROM \
     oidc_refresh_families f JOIN users u ON u.id = f.user_id \
     WHERE f.id = oidc_refresh_tokens.family_id AND f.revoked_ms IS NULL AND u.version = $11); \
     INSERT INTO oidc_refresh_tokens (token_hash, family_id, issued_ms) \
     SELECT $2, family_id, $1 FROM oidc_refresh_tokens WHERE token_hash = $3 AND changes() = 1; \
     INSERT INTO audit_events (at_ms, actor, action, target, source_ip, result, detail) \
     SELECT $4, $5, $6, $7, $8, $9, $10 WHERE changes() = 1; \
     SELECT changes() AS rotated; \
     COMMIT;";

/// The same write on PostgreSQL as one statement (so one implicit transaction): the
/// successor and the audit row are inserted from what the `UPDATE` returned, and the
/// answer is one row `rotated` = 1 when they were, none otherwise.
const ROTATE_POSTGRES: &str = "WITH rotated AS ( \
     UPDATE oidc_refresh_tokens SET retired_ms = $1, successor_hash = $2 \
     WHERE token_hash = $3 AND retired_ms IS NULL AND EXISTS (SELECT 1 FROM \
     oidc_refresh_families f JOIN users u ON u.id = f.user_id \
     WHERE f.id = oidc_refresh_tokens.family_id AND f.revoked_ms IS NULL AND u.version = $11) \
     RETURNING family_id), \
     successor AS (INSERT INTO oidc_refresh_tokens (token_hash, family_id, issued_ms) \
     SELECT $2, family_id, $1 FROM rotated RETURNING 1) \
     INSERT INTO audit_events (at_ms, actor, action, target, source_ip, result, detail) \
     SELECT $4, $5, $6, $7, $8, $9, $10 FROM successor RETURNING 1::BIGINT AS rotated";

fn family_from_row(row: &AnyRow) -> Result<RefreshFamilyRecord, StoreError> {
    Ok(RefreshFamilyRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        client_id: row.try_get("client_id")?,
        audience: row.try_get("audience")?,
        scope: row.try_get("scope")?,
        secret: row.try_get("secret")?,
        auth_time: from_millis(row.try_get("auth_time_ms")?)?,
        created_at: from_millis(row.try_get("created_ms")?)?,
        expires_at: from_millis(row.try_get("expires_ms")?)?,
        revoked_at: optional_instant(row, "revoked_ms")?,
    })
}

fn optional_instant(row: &AnyRow, column: &str) -> Result<Option<OffsetDateTime>, StoreError> {
    row.try_get::<Option<i64>, _>(column)?
        .map(from_millis)
        .transpose()
}
