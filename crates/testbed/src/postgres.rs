//! The throw-away PostgreSQL server of `scripts/postgres-for-tests` (started by
//! `make test`), as the suites reach it: [`URL_VARIABLE`] names a server on which a test
//! may create databases, and each test gets a database of its own.

/// The variable naming the server: a `postgres://` URL of a role that may create
/// databases (its database part is the one to connect to for that).
pub const URL_VARIABLE: &str = "BANLIEUE_TEST_POSTGRES_URL";

/// A new, empty database on the server [`URL_VARIABLE`] names, as a URL; `None` (saying
/// on stderr that `what` is skipped) when the variable is unset. Panics when the server
/// cannot be reached or refuses: a suite asked for PostgreSQL must not pass without it.
pub async fn scratch_database(what: &str) -> Option<String> {
    let Ok(server) = std::env::var(URL_VARIABLE) else {
        eprintln!(
            "{URL_VARIABLE} is not set: {what} on PostgreSQL skipped \
             (make test sets it; or `export {URL_VARIABLE}=$(scripts/postgres-for-tests)`)"
        );
        return None;
    };
    Some(create_database(&server).await)
}

/// Like [`scratch_database`], for a suite that runs only on PostgreSQL: panics when
/// [`URL_VARIABLE`] is unset.
pub async fn required_scratch_database() -> String {
    let server = std::env::var(URL_VARIABLE)
        .unwrap_or_else(|_| panic!("{URL_VARIABLE} must name a PostgreSQL server"));
    create_database(&server).await
}

async fn create_database(server: &str) -> String {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(server)
        .await
        .unwrap_or_else(|e| panic!("{URL_VARIABLE}={server}: {e}"));
    let name = crate::unique_name("test").replace('-', "_");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
    admin.close().await.ok();
    let (base, _) = server
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("{URL_VARIABLE}={server} names no database"));
    format!("{base}/{name}")
}
