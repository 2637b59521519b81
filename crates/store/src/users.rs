use banlieue_domain::{RoleName, Roles, UserName};
use sqlx::any::AnyRow;
use sqlx::{Acquire, Row};
use time::OffsetDateTime;

use crate::database::{from_millis, is_unique_violation, to_millis};
use crate::{Store, StoreError};

/// A stored user, without any credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub id: i64,
    pub name: UserName,
    pub display_name: String,
    pub email: String,
    pub tenant: Option<String>,
    pub roles: Roles,
    pub disabled: bool,
    pub must_change_password: bool,
    /// Sessions and tokens authenticated before this instant are dead (SPEC §3).
    pub not_before: OffsetDateTime,
    /// Bumped by every write: the optimistic-concurrency token.
    pub version: i64,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub last_sign_in_at: Option<OffsetDateTime>,
}

/// What creating a user needs besides its password hash.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub name: UserName,
    pub display_name: String,
    pub email: String,
    pub roles: Roles,
    pub must_change_password: bool,
}

const USER_COLUMNS: &str = "id, name, display_name, email, tenant, disabled, must_change_password, \
     not_before_ms, version, created_ms, updated_ms, last_sign_in_ms";

impl Store {
    /// Creates a user with its roles and password hash (PHC string) in one transaction:
    /// a crash leaves no user or a complete one.
    ///
    /// Errors: [`StoreError::AlreadyExists`] when the name is taken.
    pub async fn create_user(
        &self,
        new: &NewUser,
        password_phc: &str,
        now: OffsetDateTime,
    ) -> Result<UserRecord, StoreError> {
        let now_ms = to_millis(now);
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin().await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO users (name, display_name, email, tenant, disabled, must_change_password, \
             not_before_ms, version, created_ms, updated_ms) \
             VALUES ($1, $2, $3, NULL, $4, $5, $6, 1, $6, $6) RETURNING id",
        )
        .bind(new.name.as_str())
        .bind(&new.display_name)
        .bind(&new.email)
        .bind(0_i64)
        .bind(i64::from(new.must_change_password))
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                StoreError::AlreadyExists { what: "user" }
            } else {
                e.into()
            }
        })?;
        for role in new.roles.iter() {
            sqlx::query("INSERT INTO user_roles (user_id, role) VALUES ($1, $2)")
                .bind(id)
                .bind(role.as_str())
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "INSERT INTO password_credentials (user_id, phc, updated_ms) VALUES ($1, $2, $3)",
        )
        .bind(id)
        .bind(password_phc)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.user_by_id(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("user {id} vanished after insert")))
    }

    pub async fn user_by_name(&self, name: &UserName) -> Result<Option<UserRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1"))
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await?;
        self.with_roles(row).await
    }

    pub async fn user_by_id(&self, id: i64) -> Result<Option<UserRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        self.with_roles(row).await
    }

    async fn with_roles(&self, row: Option<AnyRow>) -> Result<Option<UserRecord>, StoreError> {
        let Some(row) = row else { return Ok(None) };
        let id: i64 = row.try_get("id")?;
        let role_names: Vec<String> =
            sqlx::query_scalar("SELECT role FROM user_roles WHERE user_id = $1 ORDER BY role")
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
        let roles = role_names
            .iter()
            .map(|r| RoleName::parse(r))
            .collect::<Result<Vec<_>, _>>()
            .and_then(Roles::new)
            .map_err(|e| StoreError::Corrupt(format!("roles of user {id}: {e}")))?;
        let name: String = row.try_get("name")?;
        Ok(Some(UserRecord {
            id,
            name: UserName::parse(&name)
                .map_err(|e| StoreError::Corrupt(format!("user name {name:?}: {e}")))?,
            display_name: row.try_get("display_name")?,
            email: row.try_get("email")?,
            tenant: row.try_get("tenant")?,
            roles,
            disabled: row.try_get::<i64, _>("disabled")? != 0,
            must_change_password: row.try_get::<i64, _>("must_change_password")? != 0,
            not_before: from_millis(row.try_get("not_before_ms")?)?,
            version: row.try_get("version")?,
            created_at: from_millis(row.try_get("created_ms")?)?,
            updated_at: from_millis(row.try_get("updated_ms")?)?,
            last_sign_in_at: row
                .try_get::<Option<i64>, _>("last_sign_in_ms")?
                .map(from_millis)
                .transpose()?,
        }))
    }

    /// The user's password hash in PHC string format, if one is set.
    pub async fn password_phc(&self, user_id: i64) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT phc FROM password_credentials WHERE user_id = $1")
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Replaces the password hash without touching anything else: a rehash to current
    /// parameters after a successful sign-in.
    pub async fn rehash_password(
        &self,
        user_id: i64,
        password_phc: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE password_credentials SET phc = $1, updated_ms = $2 WHERE user_id = $3")
            .bind(password_phc)
            .bind(to_millis(now))
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Sets a new password, the must-change flag and `not_before = now` in one transaction
    /// (every earlier session and token dies). Returns the updated user.
    pub async fn set_password(
        &self,
        user_id: i64,
        password_phc: &str,
        must_change_password: bool,
        now: OffsetDateTime,
    ) -> Result<UserRecord, StoreError> {
        let now_ms = to_millis(now);
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin().await?;
        sqlx::query(
            "UPDATE users SET must_change_password = $1, not_before_ms = $2, updated_ms = $2, \
             version = version + 1 WHERE id = $3",
        )
        .bind(i64::from(must_change_password))
        .bind(now_ms)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO password_credentials (user_id, phc, updated_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (user_id) DO UPDATE SET phc = excluded.phc, updated_ms = excluded.updated_ms",
        )
        .bind(user_id)
        .bind(password_phc)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.user_by_id(user_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("user {user_id} vanished")))
    }

    /// Sets or clears the disabled flag (bumps the version).
    pub async fn set_disabled(
        &self,
        user_id: i64,
        disabled: bool,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE users SET disabled = $1, updated_ms = $2, version = version + 1 WHERE id = $3",
        )
        .bind(i64::from(disabled))
        .bind(to_millis(now))
        .bind(user_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn record_sign_in(
        &self,
        user_id: i64,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE users SET last_sign_in_ms = $1 WHERE id = $2")
            .bind(to_millis(now))
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Whether any enabled user holds `role`.
    pub async fn enabled_user_with_role_exists(&self, role: &str) -> Result<bool, StoreError> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT u.id FROM users u JOIN user_roles r ON r.user_id = u.id \
             WHERE r.role = $1 AND u.disabled = $2 LIMIT 1",
        )
        .bind(role)
        .bind(0_i64)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    pub async fn user_count(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await?)
    }
}
