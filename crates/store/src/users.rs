use banlieue_domain::{RoleName, Roles, UserName};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use time::OffsetDateTime;

use crate::audit::{INSERT_AUDIT, bind_audit};
use crate::database::{
    escape_like, finish, from_millis, is_unique_violation, page_offset, to_millis,
};
use crate::{AuditEvent, Backend, Store, StoreError};

/// What [`Store::update_user`] writes: the profile and the roles, all replaced.
#[derive(Debug, Clone, Copy)]
pub struct UserUpdate<'a> {
    pub display_name: &'a str,
    pub email: &'a str,
    pub roles: &'a Roles,
}

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

/// One page of users and how many match in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPage {
    pub users: Vec<UserRecord>,
    pub total: i64,
    /// The offset of `users[0]`: the one asked for, or the last page's when that was past
    /// the end (0 when nothing matches).
    pub offset: i64,
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

/// The `SET` term of a disable (`$1` the new flag, `$2` now in ms): disabling moves
/// `not_before`, so what was issued before the disable stays dead after an enable. It
/// moves to the next whole second: ID tokens carry `auth_time` in whole seconds, so one
/// from a sign-in in the disable's own second is dead too (nobody signs in while disabled).
const NOT_BEFORE_ON_DISABLE: &str =
    "not_before_ms = CASE WHEN $1 = 1 THEN ($2 + 999) / 1000 * 1000 ELSE not_before_ms END";

/// The columns of a user row. Its roles come along as one more column, `roles`, space
/// separated (role names have no spaces), so a user is read in one query.
const USER_FIELDS: [&str; 12] = [
    "id",
    "name",
    "display_name",
    "email",
    "tenant",
    "disabled",
    "must_change_password",
    "not_before_ms",
    "version",
    "created_ms",
    "updated_ms",
    "last_sign_in_ms",
];

/// The select list of a user of the `users` row named `alias`, each column renamed
/// `<prefix><column>` (so a join can carry a user beside columns of the same names),
/// read back by [`user_from_row`] with the same prefix.
pub(crate) fn user_select_list(backend: Backend, alias: &str, prefix: &str) -> String {
    let aggregate = match backend {
        Backend::Sqlite => "group_concat(role, ' ')",
        Backend::Postgres => "string_agg(role, ' ')",
    };
    let mut list: Vec<String> = USER_FIELDS
        .iter()
        .map(|field| format!("{alias}.{field} AS {prefix}{field}"))
        .collect();
    list.push(format!(
        "(SELECT {aggregate} FROM user_roles r WHERE r.user_id = {alias}.id) AS {prefix}roles"
    ));
    list.join(", ")
}

impl Store {
    /// Creates a user with its roles and password hash (PHC string), and appends `audit`
    /// (the creation's audit event), in one transaction: a crash leaves no user, or a
    /// complete one with its audit row.
    ///
    /// Errors: [`StoreError::AlreadyExists`] when the name is taken (nothing written).
    pub async fn create_user(
        &self,
        new: &NewUser,
        password_phc: &str,
        now: OffsetDateTime,
        audit: &AuditEvent,
    ) -> Result<UserRecord, StoreError> {
        let now_ms = to_millis(now);
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
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
            bind_audit(sqlx::query(INSERT_AUDIT), audit)
                .execute(&mut *tx)
                .await?;
            Ok(id)
        }
        .await;
        let id = finish(tx, result).await?;
        self.user_by_id(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("user {id} vanished after insert")))
    }

    pub async fn user_by_name(&self, name: &UserName) -> Result<Option<UserRecord>, StoreError> {
        let row = sqlx::query(&self.select_users("name = $1"))
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|row| user_from_row(row, "")).transpose()
    }

    pub async fn user_by_id(&self, id: i64) -> Result<Option<UserRecord>, StoreError> {
        let row = sqlx::query(&self.select_users("id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|row| user_from_row(row, "")).transpose()
    }

    /// The user `id` as the caller's transaction just changed it, read before the commit
    /// so that what is returned is what was written.
    async fn changed_user(
        &self,
        conn: &mut AnyConnection,
        id: i64,
    ) -> Result<UserRecord, StoreError> {
        let row = sqlx::query(&self.select_users("id = $1"))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?
            .ok_or(StoreError::NotFound { what: "user" })?;
        user_from_row(&row, "")
    }

    /// `SELECT` of the users matching `condition` (SQL, with its placeholders) with their
    /// roles, in this backend's dialect.
    fn select_users(&self, condition: &str) -> String {
        let columns = user_select_list(self.backend(), "users", "");
        format!("SELECT {columns} FROM users WHERE {condition}")
    }
}

/// The user in `row`, its columns named `<prefix><column>` ([`user_select_list`]).
pub(crate) fn user_from_row(row: &AnyRow, prefix: &str) -> Result<UserRecord, StoreError> {
    let column = |field: &str| format!("{prefix}{field}");
    let id: i64 = row.try_get(column("id").as_str())?;
    let role_names: Option<String> = row.try_get(column("roles").as_str())?;
    let roles = role_names
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(RoleName::parse)
        .collect::<Result<Vec<_>, _>>()
        .and_then(Roles::new)
        .map_err(|e| StoreError::Corrupt(format!("roles of user {id}: {e}")))?;
    let name: String = row.try_get(column("name").as_str())?;
    let millis = |field: &str| -> Result<OffsetDateTime, StoreError> {
        from_millis(row.try_get(column(field).as_str())?)
    };
    Ok(UserRecord {
        id,
        name: UserName::parse(&name)
            .map_err(|e| StoreError::Corrupt(format!("user name {name:?}: {e}")))?,
        display_name: row.try_get(column("display_name").as_str())?,
        email: row.try_get(column("email").as_str())?,
        tenant: row.try_get(column("tenant").as_str())?,
        roles,
        disabled: row.try_get::<i64, _>(column("disabled").as_str())? != 0,
        must_change_password: row.try_get::<i64, _>(column("must_change_password").as_str())? != 0,
        not_before: millis("not_before_ms")?,
        version: row.try_get(column("version").as_str())?,
        created_at: millis("created_ms")?,
        updated_at: millis("updated_ms")?,
        last_sign_in_at: row
            .try_get::<Option<i64>, _>(column("last_sign_in_ms").as_str())?
            .map(from_millis)
            .transpose()?,
    })
}

impl Store {
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

    /// Sets a new password, the must-change flag and `not_before = now`, deletes the
    /// user's session rows (every earlier session and token dies) and appends `audit`, in
    /// one transaction. Returns the updated user.
    pub async fn set_password(
        &self,
        user_id: i64,
        password_phc: &str,
        must_change_password: bool,
        now: OffsetDateTime,
        audit: &AuditEvent,
    ) -> Result<UserRecord, StoreError> {
        let now_ms = to_millis(now);
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
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
            sqlx::query("DELETE FROM user_sessions WHERE user_id = $1")
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
            append_audit(&mut tx, std::slice::from_ref(audit)).await?;
            self.changed_user(&mut tx, user_id).await
        }
        .await;
        finish(tx, result).await
    }

    /// Sets or clears the disabled flag (bumps the version). Disabling also moves
    /// `not_before` to `now`, so enabling the user again revives no session or refresh
    /// token issued before.
    pub async fn set_disabled(
        &self,
        user_id: i64,
        disabled: bool,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "UPDATE users SET disabled = $1, {NOT_BEFORE_ON_DISABLE}, updated_ms = $2, \
             version = version + 1 WHERE id = $3"
        ))
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

const ADMIN_ROLE: &str = "admin";

impl Store {
    /// Users whose name, display name or e-mail contains `search` (case-insensitive; empty
    /// matches all), ordered by name: `limit` (≥ 1) rows from `offset`, or from the last
    /// page's first row (a multiple of `limit`) when `offset` is past the end; and the total
    /// count.
    pub async fn list_users(
        &self,
        search: &str,
        offset: i64,
        limit: i64,
    ) -> Result<UserPage, StoreError> {
        let pattern = format!("%{}%", escape_like(&search.to_lowercase()));
        let filter = "($1 = '' OR lower(name) LIKE $2 ESCAPE '\\' OR lower(display_name) LIKE $2 ESCAPE '\\' \
                      OR lower(email) LIKE $2 ESCAPE '\\')";
        let total: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM users WHERE {filter}"))
            .bind(search)
            .bind(&pattern)
            .fetch_one(&self.pool)
            .await?;
        let limit = limit.max(1);
        let offset = page_offset(offset, limit, total);
        let rows =
            sqlx::query(&self.select_users(&format!("{filter} ORDER BY name LIMIT $3 OFFSET $4")))
                .bind(search)
                .bind(&pattern)
                .bind(limit)
                .bind(offset)
                .fetch_all(&self.pool)
                .await?;
        let users = rows
            .iter()
            .map(|row| user_from_row(row, ""))
            .collect::<Result<_, _>>()?;
        Ok(UserPage {
            users,
            total,
            offset,
        })
    }

    /// Replaces display name, e-mail and roles if the user is still at `expected_version`,
    /// and appends `audit` (the change's events), in one transaction.
    ///
    /// Errors: [`StoreError::Conflict`] (someone changed it meanwhile),
    /// [`StoreError::NotFound`], [`StoreError::LastAdmin`] (nothing is written).
    pub async fn update_user(
        &self,
        id: i64,
        expected_version: i64,
        change: &UserUpdate<'_>,
        now: OffsetDateTime,
        audit: &[AuditEvent],
    ) -> Result<UserRecord, StoreError> {
        let UserUpdate {
            display_name,
            email,
            roles,
        } = *change;
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
        let admins_before = enabled_admins(&mut tx).await?;
        let done = sqlx::query(
            "UPDATE users SET display_name = $1, email = $2, updated_ms = $3, version = version + 1 \
             WHERE id = $4 AND version = $5",
        )
        .bind(display_name)
        .bind(email)
        .bind(to_millis(now))
        .bind(id)
        .bind(expected_version)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(conflict_or_missing(&mut tx, id).await);
        }
        sqlx::query("DELETE FROM user_roles WHERE user_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        for role in roles.iter() {
            sqlx::query("INSERT INTO user_roles (user_id, role) VALUES ($1, $2)")
                .bind(id)
                .bind(role.as_str())
                .execute(&mut *tx)
                .await?;
        }
        ensure_an_admin_remains(&mut tx, admins_before).await?;
            append_audit(&mut tx, audit).await?;
            self.changed_user(&mut tx, id).await
        }
        .await;
        finish(tx, result).await
    }

    /// Disables or enables the user if still at `expected_version`, with `audit`, in one
    /// transaction. Same errors as [`Store::update_user`].
    pub async fn set_user_disabled(
        &self,
        id: i64,
        expected_version: i64,
        disabled: bool,
        now: OffsetDateTime,
        audit: &AuditEvent,
    ) -> Result<UserRecord, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
            let admins_before = enabled_admins(&mut tx).await?;
            let done = sqlx::query(&format!(
                "UPDATE users SET disabled = $1, {NOT_BEFORE_ON_DISABLE}, updated_ms = $2, \
                 version = version + 1 WHERE id = $3 AND version = $4"
            ))
            .bind(i64::from(disabled))
            .bind(to_millis(now))
            .bind(id)
            .bind(expected_version)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Err(conflict_or_missing(&mut tx, id).await);
            }
            if disabled {
                sqlx::query("DELETE FROM user_sessions WHERE user_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            ensure_an_admin_remains(&mut tx, admins_before).await?;
            append_audit(&mut tx, std::slice::from_ref(audit)).await?;
            self.changed_user(&mut tx, id).await
        }
        .await;
        finish(tx, result).await
    }

    /// Deletes the user (roles, credential and sessions with it) if still at
    /// `expected_version`, with `audit`, in one transaction. Same errors as
    /// [`Store::update_user`].
    pub async fn delete_user(
        &self,
        id: i64,
        expected_version: i64,
        audit: &AuditEvent,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
            let admins_before = enabled_admins(&mut tx).await?;
            let done = sqlx::query("DELETE FROM users WHERE id = $1 AND version = $2")
                .bind(id)
                .bind(expected_version)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() == 0 {
                return Err(conflict_or_missing(&mut tx, id).await);
            }
            ensure_an_admin_remains(&mut tx, admins_before).await?;
            append_audit(&mut tx, std::slice::from_ref(audit)).await
        }
        .await;
        finish(tx, result).await?;
        Ok(())
    }

    /// Ends every session and token of the user (`not_before = now`, session rows
    /// deleted) and appends `audit`, in one transaction.
    pub async fn revoke_user_sessions(
        &self,
        id: i64,
        now: OffsetDateTime,
        audit: &AuditEvent,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
        let done = sqlx::query(
            "UPDATE users SET not_before_ms = $1, updated_ms = $1, version = version + 1 WHERE id = $2",
        )
        .bind(to_millis(now))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound { what: "user" });
        }
        sqlx::query("DELETE FROM user_sessions WHERE user_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
            append_audit(&mut tx, std::slice::from_ref(audit)).await
        }
        .await;
        finish(tx, result).await?;
        Ok(())
    }
}

/// Appends `events` in the caller's transaction: the change and its audit rows commit
/// together or not at all.
async fn append_audit(conn: &mut AnyConnection, events: &[AuditEvent]) -> Result<(), StoreError> {
    for event in events {
        bind_audit(sqlx::query(INSERT_AUDIT), event)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

async fn enabled_admins(conn: &mut AnyConnection) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM users u JOIN user_roles r ON r.user_id = u.id \
         WHERE r.role = $1 AND u.disabled = 0",
    )
    .bind(ADMIN_ROLE)
    .fetch_one(&mut *conn)
    .await?)
}

async fn ensure_an_admin_remains(conn: &mut AnyConnection, before: i64) -> Result<(), StoreError> {
    if before > 0 && enabled_admins(conn).await? == 0 {
        return Err(StoreError::LastAdmin);
    }
    Ok(())
}

async fn conflict_or_missing(conn: &mut AnyConnection, id: i64) -> StoreError {
    let exists: Result<Option<i64>, _> = sqlx::query_scalar("SELECT id FROM users WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await;
    match exists {
        Ok(Some(_)) => StoreError::Conflict { what: "user" },
        Ok(None) => StoreError::NotFound { what: "user" },
        Err(e) => e.into(),
    }
}

impl Store {
    /// The names of every user, disabled ones included, sorted.
    pub async fn user_names(&self) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT name FROM users ORDER BY name")
            .fetch_all(&self.pool)
            .await?)
    }

    /// The names of the users holding `role` directly, sorted.
    pub async fn user_names_with_role(&self, role: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT u.name FROM users u JOIN user_roles r ON r.user_id = u.id \
             WHERE r.role = $1 ORDER BY u.name",
        )
        .bind(role)
        .fetch_all(&self.pool)
        .await?)
    }
}

impl Store {
    /// Takes `role` from every user who holds it (its ClusterRole was deleted), bumping
    /// their version; returns how many users lost it.
    pub async fn remove_role_from_all(
        &self,
        role: &str,
        now: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = self.begin_write(&mut conn).await?;
        let result = async {
            sqlx::query(
                "UPDATE users SET version = version + 1, updated_ms = $1 \
                 WHERE id IN (SELECT user_id FROM user_roles WHERE role = $2)",
            )
            .bind(to_millis(now))
            .bind(role)
            .execute(&mut *tx)
            .await?;
            let done = sqlx::query("DELETE FROM user_roles WHERE role = $1")
                .bind(role)
                .execute(&mut *tx)
                .await?;
            Ok(done.rows_affected())
        }
        .await;
        finish(tx, result).await
    }
}
