//! One repository suite, run against SQLite and against PostgreSQL.
//!
//! PostgreSQL runs when `BANLIEUE_TEST_POSTGRES_URL` names a server the test may create
//! databases on (`make test` starts one and sets it); each test gets its own database
//! ([`banlieue_testbed::postgres`]).

use banlieue_domain::{RoleName, Roles, UserName};
use banlieue_store::{AuditEvent, DatabaseCheck, NewUser, Store, StoreError, UserUpdate};
use time::{Duration, OffsetDateTime};

async fn sqlite() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/console.db", dir.path().display());
    (Store::open(&url).await.unwrap(), dir)
}

async fn postgres() -> Option<Store> {
    let url = banlieue_testbed::postgres::scratch_database("the store suite").await?;
    Some(Store::open(&url).await.unwrap())
}

/// Runs `$body` (an async fn taking a `Store`) against every available backend.
macro_rules! on_both_backends {
    ($name:ident, $body:ident) => {
        #[tokio::test]
        async fn $name() {
            let (store, _dir) = sqlite().await;
            $body(store).await;
            if let Some(store) = postgres().await {
                $body(store).await;
            }
        }
    };
}

fn new_user(name: &str, roles: &[&str]) -> NewUser {
    NewUser {
        name: UserName::parse(name).unwrap(),
        display_name: format!("{name} display"),
        email: format!("{name}@example.test"),
        roles: Roles::new(roles.iter().map(|r| RoleName::parse(r).unwrap()).collect()).unwrap(),
        must_change_password: true,
    }
}

/// The audit event a user's creation is written with.
fn creation_event() -> AuditEvent {
    AuditEvent::now(
        "root",
        "user.create",
        "-",
        std::net::IpAddr::from([127, 0, 0, 1]),
        "success",
        "",
    )
}

/// The success event of `action`, written with the change.
fn event(action: &str) -> AuditEvent {
    AuditEvent {
        action: action.to_owned(),
        ..creation_event()
    }
}

fn at(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap()
}

async fn create_then_read_back(store: Store) {
    let now = at(1_790_000_000_123);
    let created = store
        .create_user(
            &new_user("alice", &["viewer", "developer"]),
            "$phc$a",
            now,
            &creation_event(),
        )
        .await
        .unwrap();
    assert_eq!(created.name.as_str(), "alice");
    assert_eq!(created.display_name, "alice display");
    let roles: Vec<_> = created
        .roles
        .iter()
        .map(|r| r.as_str().to_owned())
        .collect();
    assert_eq!(roles, ["developer", "viewer"]);
    assert!(created.must_change_password);
    assert!(!created.disabled);
    assert_eq!(created.not_before, now, "millisecond precision survives");
    assert_eq!(created.version, 1);
    assert_eq!(created.last_sign_in_at, None);

    let by_name = store
        .user_by_name(&UserName::parse("alice").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_name, created);
    assert_eq!(
        store.password_phc(created.id).await.unwrap().as_deref(),
        Some("$phc$a")
    );
    assert!(
        store
            .user_by_name(&UserName::parse("nobody").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.user_count().await.unwrap(), 1);
}
on_both_backends!(create_then_read_back_works, create_then_read_back);

async fn duplicate_names_are_refused(store: Store) {
    let now = OffsetDateTime::now_utc();
    store
        .create_user(&new_user("bob", &[]), "$phc$1", now, &creation_event())
        .await
        .unwrap();
    let err = store
        .create_user(
            &new_user("bob", &["admin"]),
            "$phc$2",
            now,
            &creation_event(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyExists { what: "user" }),
        "{err:?}"
    );
    // The failed transaction left nothing behind: still one user, the first hash.
    assert_eq!(store.user_count().await.unwrap(), 1);
    assert!(!store.enabled_user_with_role_exists("admin").await.unwrap());
}
on_both_backends!(
    duplicate_names_are_refused_atomically,
    duplicate_names_are_refused
);

async fn password_changes_move_not_before(store: Store) {
    let t0 = at(1_790_000_000_000);
    let user = store
        .create_user(
            &new_user("carol", &["admin"]),
            "$old",
            t0,
            &creation_event(),
        )
        .await
        .unwrap();
    let t1 = t0 + Duration::seconds(30);
    let updated = store
        .set_password(user.id, "$new", false, t1, &event("user.password-set"))
        .await
        .unwrap();
    assert_eq!(updated.not_before, t1);
    assert!(!updated.must_change_password);
    assert_eq!(updated.version, user.version + 1);
    assert_eq!(
        store.password_phc(user.id).await.unwrap().as_deref(),
        Some("$new")
    );

    store
        .rehash_password(user.id, "$rehashed", t1)
        .await
        .unwrap();
    let after_rehash = store.user_by_id(user.id).await.unwrap().unwrap();
    assert_eq!(
        after_rehash.version, updated.version,
        "a rehash is not a user change"
    );
    assert_eq!(
        store.password_phc(user.id).await.unwrap().as_deref(),
        Some("$rehashed")
    );
}
on_both_backends!(
    password_changes_move_not_before_and_bump_version,
    password_changes_move_not_before
);

async fn admins_count_only_when_enabled(store: Store) {
    let now = OffsetDateTime::now_utc();
    let admin = store
        .create_user(&new_user("root", &["admin"]), "$x", now, &creation_event())
        .await
        .unwrap();
    assert!(store.enabled_user_with_role_exists("admin").await.unwrap());
    let later = OffsetDateTime::from_unix_timestamp(now.unix_timestamp() + 5).unwrap()
        + Duration::milliseconds(300);
    store.set_disabled(admin.id, true, later).await.unwrap();
    assert!(!store.enabled_user_with_role_exists("admin").await.unwrap());
    let disabled = store.user_by_id(admin.id).await.unwrap().unwrap();
    assert!(disabled.disabled);
    assert_eq!(
        disabled.not_before,
        OffsetDateTime::from_unix_timestamp(later.unix_timestamp() + 1).unwrap(),
        "disabling moves not_before, past the second it happened in (auth_time is whole seconds)"
    );
    store
        .set_disabled(admin.id, false, later + Duration::seconds(5))
        .await
        .unwrap();
    assert_eq!(
        store
            .user_by_id(admin.id)
            .await
            .unwrap()
            .unwrap()
            .not_before,
        disabled.not_before,
        "enabling leaves it"
    );
}
on_both_backends!(
    admins_count_only_when_enabled_works,
    admins_count_only_when_enabled
);

async fn sign_ins_and_audit_are_recorded(store: Store) {
    let now = at(1_790_000_100_000);
    let user = store
        .create_user(&new_user("dave", &[]), "$x", now, &creation_event())
        .await
        .unwrap();
    store.record_sign_in(user.id, now).await.unwrap();
    assert_eq!(
        store
            .user_by_id(user.id)
            .await
            .unwrap()
            .unwrap()
            .last_sign_in_at,
        Some(now)
    );
    for result in ["invalid-credentials", "success"] {
        store
            .append_audit(&AuditEvent {
                at: now,
                actor: "dave".into(),
                action: "session.sign-in".into(),
                target: "dave".into(),
                source_ip: "127.0.0.1".into(),
                result: result.into(),
                detail: String::new(),
            })
            .await
            .unwrap();
    }
    let events = store.recent_audit(10).await.unwrap();
    let results: Vec<_> = events.iter().map(|e| e.result.as_str()).collect();
    // The oldest is the user's creation, written with it.
    assert_eq!(
        results,
        ["success", "invalid-credentials", "success"],
        "newest first"
    );
    assert_eq!(events[2].action, "user.create");
    assert_eq!(events[0].at, now);
}
on_both_backends!(
    sign_ins_and_audit_are_recorded_works,
    sign_ins_and_audit_are_recorded
);

#[tokio::test]
async fn a_sqlite_database_is_created_for_its_owner_alone_and_an_exposed_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("console.db");
    let url = format!("sqlite://{}", file.display());
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let store = Store::open(&url).await.unwrap();
    store
        .create_user(
            &new_user("alice", &[]),
            "$phc$a",
            time::OffsetDateTime::now_utc(),
            &creation_event(),
        )
        .await
        .unwrap();
    assert_eq!(mode(&file), 0o600);
    let wal = dir.path().join("console.db-wal");
    assert!(wal.exists());
    assert_eq!(
        mode(&wal),
        0o600,
        "SQLite gives the log the database's mode"
    );
    store.close().await;

    for exposed in [0o644, 0o640, 0o604, 0o660] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(exposed)).unwrap();
        for refused in [
            Store::open(&url).await.map(drop).unwrap_err(),
            Store::check(&url).await.map(drop).unwrap_err(),
        ] {
            assert!(
                matches!(&refused, StoreError::ExposedFile { mode, .. } if *mode == exposed),
                "{exposed:o}: {refused:?}"
            );
            assert!(refused.to_string().contains("chmod 600"), "{refused}");
        }
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The log and the shared-memory index hold rows too: an exposed one is refused alike.
    for companion in ["console.db-wal", "console.db-shm"] {
        let companion = dir.path().join(companion);
        if !companion.exists() {
            std::fs::write(&companion, b"").unwrap();
        }
        std::fs::set_permissions(&companion, std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = Store::open(&url).await.map(drop).unwrap_err();
        assert!(
            matches!(&refused, StoreError::ExposedFile { file, mode: 0o644 } if *file == companion),
            "{refused:?}"
        );
        std::fs::set_permissions(&companion, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    Store::open(&url).await.unwrap().close().await;
}

#[tokio::test]
async fn sqlite_start_up_errors_name_the_cause() {
    let missing = Store::open("sqlite://no/such/dir/console.db")
        .await
        .unwrap_err();
    assert!(
        matches!(&missing, StoreError::MissingDirectory { dir } if dir.ends_with("no/such/dir")),
        "{missing:?}"
    );
    assert!(missing.to_string().contains("does not exist"));

    let unsupported = Store::open("mysql://u:secret@h/db").await.unwrap_err();
    assert!(matches!(unsupported, StoreError::UnsupportedUrl { .. }));
    assert!(!unsupported.to_string().contains("secret"), "{unsupported}");

    // In memory, each pooled connection would be its own empty database.
    for url in ["sqlite::memory:", "sqlite:", "sqlite://"] {
        let open = Store::open(url).await.unwrap_err();
        assert!(matches!(open, StoreError::NoSqliteFile), "{url}: {open:?}");
        let check = Store::check(url).await.unwrap_err();
        assert!(
            matches!(check, StoreError::NoSqliteFile),
            "{url}: {check:?}"
        );
    }
    let device = Store::check("sqlite:///dev/null").await.unwrap_err();
    assert!(
        matches!(&device, StoreError::NotARegularFile { file } if file.ends_with("null")),
        "{device:?}"
    );
}

#[tokio::test]
async fn a_read_only_sqlite_database_is_a_clear_error() {
    // Permission bits do not stop root, so the read-only open is asked for explicitly;
    // SQLite then refuses the first write exactly as for a 0444 file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("console.db");
    std::fs::write(&file, b"").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let err = Store::open(&format!("sqlite://{}?mode=ro", file.display()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::ReadOnly { file: f } if f == &file),
        "{err:?}"
    );
    assert!(err.to_string().contains("read-only"));
}

async fn user_sessions_are_listed_and_revoked(store: Store) {
    use banlieue_store::UserSession;
    let t0 = at(1_790_000_200_000);
    let alice = store
        .create_user(&new_user("alice", &[]), "$x", t0, &creation_event())
        .await
        .unwrap();
    let bob = store
        .create_user(&new_user("bob", &[]), "$x", t0, &creation_event())
        .await
        .unwrap();
    let session = |handle: &str, user_id: i64, seen_ms: i64| UserSession {
        handle: handle.into(),
        user_id,
        created_at: t0,
        last_seen_at: at(seen_ms),
        source_ip: "127.0.0.1".into(),
        user_agent: "Test/1.0".into(),
    };
    store
        .insert_user_session(&session("a1", alice.id, 1_790_000_200_000))
        .await
        .unwrap();
    store
        .insert_user_session(&session("a2", alice.id, 1_790_000_300_000))
        .await
        .unwrap();
    store
        .insert_user_session(&session("b1", bob.id, 1_790_000_200_000))
        .await
        .unwrap();

    let listed: Vec<_> = store
        .user_sessions_of(alice.id)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.handle)
        .collect();
    assert_eq!(listed, ["a2", "a1"], "most recently used first");

    store
        .touch_user_session("a1", at(1_790_000_400_000), "127.0.0.2")
        .await
        .unwrap();
    let touched = store.user_session("a1").await.unwrap().unwrap();
    assert_eq!(touched.last_seen_at, at(1_790_000_400_000));
    assert_eq!(touched.source_ip, "127.0.0.2");

    assert!(
        !store.delete_user_session(alice.id, "b1").await.unwrap(),
        "not alice's"
    );
    assert!(store.user_session("b1").await.unwrap().is_some());
    assert!(store.delete_user_session(alice.id, "a1").await.unwrap());
    assert!(store.user_session("a1").await.unwrap().is_none());
    // A new password ends the rest of alice's sessions, rows included.
    store
        .set_password(
            alice.id,
            "$p",
            false,
            at(1_790_000_500_000),
            &event("user.password-set"),
        )
        .await
        .unwrap();
    assert!(store.user_sessions_of(alice.id).await.unwrap().is_empty());
    assert_eq!(store.user_sessions_of(bob.id).await.unwrap().len(), 1);
}
on_both_backends!(
    user_sessions_are_listed_and_revoked_works,
    user_sessions_are_listed_and_revoked
);

async fn users_are_searched_and_paged(store: Store) {
    let now = OffsetDateTime::now_utc();
    for i in 0..25 {
        let mut user = new_user(&format!("user-{i:02}"), &["viewer"]);
        if i == 7 {
            user.display_name = "Ada 100% Lovelace".into();
        }
        store
            .create_user(&user, "$x", now, &creation_event())
            .await
            .unwrap();
    }
    let first = store.list_users("", 0, 10).await.unwrap();
    assert_eq!(first.total, 25);
    let names: Vec<_> = first
        .users
        .iter()
        .map(|u| u.name.as_str().to_owned())
        .collect();
    assert_eq!(names.first().map(String::as_str), Some("user-00"));
    assert_eq!(names.len(), 10);
    assert!(
        first.users.iter().all(|u| u.roles.contains("viewer")),
        "roles come with the page"
    );
    let last = store.list_users("", 20, 10).await.unwrap();
    assert_eq!((last.users.len(), last.offset), (5, 20));
    // Past the end: the last page, and where it starts.
    let past = store.list_users("", 999_990, 10).await.unwrap();
    assert_eq!((past.users, past.offset), (last.users, 20));
    let nothing = store.list_users("no such user", 50, 10).await.unwrap();
    assert_eq!(
        (nothing.users.len(), nothing.total, nothing.offset),
        (0, 0, 0)
    );

    let found = store.list_users("LOVELACE", 0, 10).await.unwrap();
    assert_eq!(found.total, 1);
    assert_eq!(found.users[0].name.as_str(), "user-07");
    // LIKE wildcards in the search are literal characters.
    assert_eq!(store.list_users("100%", 0, 10).await.unwrap().total, 1);
    assert_eq!(store.list_users("_", 0, 10).await.unwrap().total, 0);
    assert_eq!(store.list_users("user-1", 0, 50).await.unwrap().total, 10);
}
on_both_backends!(
    users_are_searched_and_paged_works,
    users_are_searched_and_paged
);

async fn stale_versions_conflict_and_the_last_admin_stays(store: Store) {
    let now = OffsetDateTime::now_utc();
    let admin = store
        .create_user(&new_user("root", &["admin"]), "$x", now, &creation_event())
        .await
        .unwrap();
    let viewer_roles = Roles::new(vec![RoleName::parse("viewer").unwrap()]).unwrap();

    let demoted = store
        .update_user(
            admin.id,
            admin.version,
            &UserUpdate {
                display_name: "Root",
                email: "r@x.test",
                roles: &viewer_roles,
            },
            now,
            &[event("user.update")],
        )
        .await
        .unwrap_err();
    assert!(matches!(demoted, StoreError::LastAdmin), "{demoted:?}");
    let disabled = store
        .set_user_disabled(admin.id, admin.version, true, now, &event("user.disable"))
        .await
        .unwrap_err();
    assert!(matches!(disabled, StoreError::LastAdmin), "{disabled:?}");
    let deleted = store
        .delete_user(admin.id, admin.version, &event("user.delete"))
        .await
        .unwrap_err();
    assert!(matches!(deleted, StoreError::LastAdmin), "{deleted:?}");
    assert_eq!(
        store.user_by_id(admin.id).await.unwrap().unwrap(),
        admin,
        "nothing changed"
    );

    let second = store
        .create_user(
            &new_user("second", &["admin"]),
            "$x",
            now,
            &creation_event(),
        )
        .await
        .unwrap();
    let renamed = store
        .update_user(
            admin.id,
            admin.version,
            &UserUpdate {
                display_name: "Root",
                email: "r@x.test",
                roles: &viewer_roles,
            },
            now,
            &[event("user.update")],
        )
        .await
        .unwrap();
    assert_eq!(renamed.display_name, "Root");
    assert!(!renamed.roles.contains("admin"));
    assert_eq!(renamed.version, admin.version + 1);

    // A second writer holding the old version is told, not silently overwritten.
    let stale = store
        .update_user(
            admin.id,
            admin.version,
            &UserUpdate {
                display_name: "Other",
                email: "o@x.test",
                roles: &viewer_roles,
            },
            now,
            &[event("user.update")],
        )
        .await
        .unwrap_err();
    assert!(matches!(stale, StoreError::Conflict { .. }), "{stale:?}");
    let missing = store
        .delete_user(9_999, 1, &event("user.delete"))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, StoreError::NotFound { .. }),
        "{missing:?}"
    );

    store
        .delete_user(renamed.id, renamed.version, &event("user.delete"))
        .await
        .unwrap();
    assert!(store.user_by_id(admin.id).await.unwrap().is_none());
    let second = store
        .set_user_disabled(
            second.id,
            second.version,
            false,
            now,
            &event("user.disable"),
        )
        .await
        .unwrap();
    assert!(!second.disabled);
}
on_both_backends!(
    stale_versions_conflict_and_the_last_admin_stays_works,
    stale_versions_conflict_and_the_last_admin_stays
);

async fn revoking_sessions_moves_not_before(store: Store) {
    let t0 = at(1_790_000_000_000);
    let user = store
        .create_user(&new_user("eve", &[]), "$x", t0, &creation_event())
        .await
        .unwrap();
    let t1 = at(1_790_000_060_000);
    store
        .revoke_user_sessions(user.id, t1, &event("user.sessions-revoke"))
        .await
        .unwrap();
    let after = store.user_by_id(user.id).await.unwrap().unwrap();
    assert_eq!(after.not_before, t1);
    assert!(matches!(
        store
            .revoke_user_sessions(12_345, t1, &event("user.sessions-revoke"))
            .await
            .unwrap_err(),
        StoreError::NotFound { .. }
    ));
}
on_both_backends!(
    revoking_sessions_moves_not_before_works,
    revoking_sessions_moves_not_before
);

async fn audit_events_are_filtered(store: Store) {
    use banlieue_store::AuditQuery;
    let event = |ms: i64, actor: &str, action: &str, result: &str| AuditEvent {
        at: at(ms),
        actor: actor.into(),
        action: action.into(),
        target: "bob".into(),
        source_ip: "127.0.0.1".into(),
        result: result.into(),
        detail: String::new(),
    };
    for e in [
        event(1_000, "root", "user.create", "success"),
        event(2_000, "-", "session.sign-in", "invalid-credentials"),
        event(3_000, "bob", "session.sign-in", "success"),
        event(4_000, "root", "user.disable", "success"),
    ] {
        store.append_audit(&e).await.unwrap();
    }
    let all = store
        .query_audit(&AuditQuery::default(), 0, 10)
        .await
        .unwrap();
    assert_eq!(all.total, 4);
    assert_eq!(all.events[0].action, "user.disable", "newest first");
    let by_root = AuditQuery {
        actor: "root".into(),
        ..AuditQuery::default()
    };
    assert_eq!(store.query_audit(&by_root, 0, 10).await.unwrap().total, 2);
    let sign_ins = AuditQuery {
        action: "session.sign-in".into(),
        result: "success".into(),
        ..AuditQuery::default()
    };
    let found = store.query_audit(&sign_ins, 0, 10).await.unwrap();
    assert_eq!(found.total, 1);
    assert_eq!(found.events[0].actor, "bob");
    // Actor, action, target and result match a part, in any ASCII case; LIKE's wildcards are
    // literal characters.
    let total = |query: AuditQuery| {
        let store = store.clone();
        async move { store.query_audit(&query, 0, 10).await.unwrap().total }
    };
    for (query, expected) in [
        (
            AuditQuery {
                action: "session".into(),
                ..AuditQuery::default()
            },
            2,
        ),
        (
            AuditQuery {
                action: "SIGN-IN".into(),
                ..AuditQuery::default()
            },
            2,
        ),
        (
            AuditQuery {
                actor: "oo".into(),
                ..AuditQuery::default()
            },
            2,
        ),
        (
            AuditQuery {
                target: "Bo".into(),
                ..AuditQuery::default()
            },
            4,
        ),
        (
            AuditQuery {
                action: "user_".into(),
                ..AuditQuery::default()
            },
            0,
        ),
        (
            AuditQuery {
                actor: "%".into(),
                ..AuditQuery::default()
            },
            0,
        ),
        (
            AuditQuery {
                result: "Invalid".into(),
                ..AuditQuery::default()
            },
            1,
        ),
        (
            AuditQuery {
                result: "cess".into(),
                ..AuditQuery::default()
            },
            3,
        ),
    ] {
        assert_eq!(total(query.clone()).await, expected, "{query:?}");
    }
    let window = AuditQuery {
        since: Some(at(2_000)),
        until: Some(at(3_000)),
        ..AuditQuery::default()
    };
    assert_eq!(store.query_audit(&window, 0, 10).await.unwrap().total, 2);
    let paged = store
        .query_audit(&AuditQuery::default(), 3, 10)
        .await
        .unwrap();
    assert_eq!(paged.events.len(), 1);
    assert_eq!(paged.events[0].action, "user.create");
    let past = store
        .query_audit(&AuditQuery::default(), 400, 3)
        .await
        .unwrap();
    assert_eq!(
        (past.events, past.offset),
        (paged.events, 3),
        "the last page"
    );
}
on_both_backends!(audit_events_are_filtered_works, audit_events_are_filtered);

async fn oidc_codes_and_refresh_tokens(store: Store) {
    use banlieue_store::{AuthorizationCodeRecord, CodeRedemption, RefreshFamilyRecord};
    let now = OffsetDateTime::now_utc();
    let user = store
        .create_user(
            &new_user("olivia", &["developer"]),
            "phc",
            now,
            &creation_event(),
        )
        .await
        .unwrap();
    let code = AuthorizationCodeRecord {
        code_hash: "c1".into(),
        client_id: "banlieue-cli".into(),
        redirect_uri: "http://127.0.0.1:1/callback".into(),
        code_challenge: "x".repeat(43),
        nonce: Some("n".into()),
        audience: "kubernetes".into(),
        scope: "openid offline_access".into(),
        user_id: user.id,
        auth_time: now,
        expires_at: now + Duration::seconds(60),
    };
    store.insert_authorization_code(&code).await.unwrap();
    let stored = store.authorization_code("c1").await.unwrap().unwrap();
    let issued = |c: &AuthorizationCodeRecord| {
        (
            c.client_id.clone(),
            c.redirect_uri.clone(),
            c.code_challenge.clone(),
            c.nonce.clone(),
            c.user_id,
        )
    };
    assert_eq!(
        (issued(&stored.record), stored.redeemed),
        (issued(&code), false)
    );
    let family_of = |id: &str| RefreshFamilyRecord {
        id: id.into(),
        user_id: user.id,
        client_id: "banlieue-cli".into(),
        audience: "kubernetes".into(),
        scope: "openid offline_access".into(),
        secret: vec![7; 32],
        auth_time: now,
        created_at: now,
        expires_at: now + Duration::hours(12),
        revoked_at: None,
    };
    let (f1, f2) = (family_of("f1"), family_of("f2"));
    // Two concurrent redemptions, each with the family it would start: exactly one is
    // fresh, its family is the code's, and the other's family is never written.
    let (a, b) = tokio::join!(
        store.redeem_authorization_code("c1", now, Some((&f1, "t1-a"))),
        store.redeem_authorization_code("c1", now, Some((&f2, "t1-b")))
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let (winner, lost_token) = match (&a, &b) {
        (CodeRedemption::Fresh, CodeRedemption::Replayed { .. }) => ("f1", "t1-b"),
        (CodeRedemption::Replayed { .. }, CodeRedemption::Fresh) => ("f2", "t1-a"),
        other => panic!("exactly one fresh redemption: {other:?}"),
    };
    let expected = CodeRedemption::Replayed {
        family_id: Some(winner.into()),
    };
    assert!(a == expected || b == expected, "{a:?} {b:?}");
    assert!(store.refresh_token(lost_token).await.unwrap().is_none());
    let stored = store.authorization_code("c1").await.unwrap().unwrap();
    assert!(stored.redeemed);
    assert_eq!(stored.family_id.as_deref(), Some(winner));
    assert_eq!(
        store
            .redeem_authorization_code("nope", now, None)
            .await
            .unwrap(),
        CodeRedemption::Unknown
    );
    assert_eq!(
        store
            .redeem_authorization_code("c1", now, None)
            .await
            .unwrap(),
        expected,
        "a replay names the family the code started"
    );
    let family = if winner == "f1" { f1 } else { f2 };
    let first_token = if winner == "f1" { "t1-a" } else { "t1-b" };
    let first = store.refresh_token(first_token).await.unwrap().unwrap();
    assert_eq!(
        (&first.family.id, &first.family.secret, &first.family.scope),
        (&family.id, &family.secret, &family.scope)
    );
    assert_eq!(first.retired_at, None);
    assert_eq!(
        first.holder.as_ref().map(|user| user.id),
        Some(family.user_id),
        "the family's user comes with the token"
    );
    // Concurrent rotations of the same token: one wins, and only its audit row is written.
    let audit = AuditEvent {
        at: now,
        actor: "alice".into(),
        action: "oidc.token.refresh".into(),
        target: "banlieue-cli".into(),
        source_ip: "127.0.0.1".into(),
        result: "success".into(),
        detail: String::new(),
    };
    let audited_before = store.recent_audit(100).await.unwrap().len();
    let (a, b) = tokio::join!(
        store.rotate_refresh_token(first_token, "t2", user.version, now, &audit),
        store.rotate_refresh_token(first_token, "t2-other", user.version, now, &audit)
    );
    assert_eq!([a.unwrap(), b.unwrap()].iter().filter(|w| **w).count(), 1);
    assert_eq!(
        store.recent_audit(100).await.unwrap().len(),
        audited_before + 1
    );
    let retired = store.refresh_token(first_token).await.unwrap().unwrap();
    assert!(retired.retired_at.is_some());
    assert!(retired.successor_is_current);
    let successor = if store.refresh_token("t2").await.unwrap().is_some() {
        "t2"
    } else {
        "t2-other"
    };
    assert!(
        store
            .audit_refresh_in_grace(first_token, user.version, &audit)
            .await
            .unwrap(),
        "the previous token's answer is due while its successor is current"
    );
    assert!(
        !store
            .audit_refresh_in_grace(first_token, user.version + 1, &audit)
            .await
            .unwrap(),
        "not once the user changed"
    );
    assert!(
        !store
            .rotate_refresh_token(successor, "t3", user.version + 1, now, &audit)
            .await
            .unwrap(),
        "a token does not rotate when its user changed since the caller judged them"
    );
    assert!(
        store
            .rotate_refresh_token(successor, "t3", user.version, now, &audit)
            .await
            .unwrap()
    );
    let retired = store.refresh_token(first_token).await.unwrap().unwrap();
    assert!(
        !retired.successor_is_current,
        "t1 is no longer the previous token"
    );
    assert!(
        !store
            .audit_refresh_in_grace(first_token, user.version, &audit)
            .await
            .unwrap()
    );

    // A batch that fails part-way (its successor already exists) leaves nothing open:
    // the token is still current and the next writes go through.
    assert!(
        store
            .rotate_refresh_token("t3", first_token, user.version, now, &audit)
            .await
            .is_err()
    );
    assert_eq!(
        store.refresh_token("t3").await.unwrap().unwrap().retired_at,
        None
    );
    store.append_audit(&audit).await.unwrap();

    assert!(store.revoke_refresh_family(winner, now).await.unwrap());
    assert!(!store.revoke_refresh_family(winner, now).await.unwrap());
    let revoked = store.refresh_token("t3").await.unwrap().unwrap();
    assert!(revoked.family.revoked_at.is_some());
    assert!(
        !store
            .rotate_refresh_token("t3", "t4", user.version, now, &audit)
            .await
            .unwrap(),
        "a token of a revoked family does not rotate, even when it was read before the revocation"
    );
    assert_eq!(store.refresh_token("t4").await.unwrap(), None);

    let pruned = store
        .prune_oidc_grants(now + Duration::days(1), now + Duration::days(1))
        .await
        .unwrap();
    assert_eq!(pruned, 2, "the code and the revoked family");
    assert_eq!(
        store.refresh_token("t3").await.unwrap(),
        None,
        "tokens go with their family"
    );
}
on_both_backends!(
    oidc_codes_and_refresh_tokens_works,
    oidc_codes_and_refresh_tokens
);

async fn a_deleted_role_leaves_every_holder(store: Store) {
    let now = OffsetDateTime::now_utc();
    let a = store
        .create_user(
            &new_user("holder-a", &["developer", "claimer"]),
            "phc",
            now,
            &creation_event(),
        )
        .await
        .unwrap();
    store
        .create_user(
            &new_user("holder-b", &["claimer"]),
            "phc",
            now,
            &creation_event(),
        )
        .await
        .unwrap();
    assert_eq!(
        store.user_names_with_role("claimer").await.unwrap(),
        ["holder-a", "holder-b"]
    );
    assert_eq!(store.remove_role_from_all("claimer", now).await.unwrap(), 2);
    assert!(
        store
            .user_names_with_role("claimer")
            .await
            .unwrap()
            .is_empty()
    );
    let a_now = store.user_by_id(a.id).await.unwrap().unwrap();
    assert!(a_now.roles.contains("developer") && !a_now.roles.contains("claimer"));
    assert_eq!(a_now.version, a.version + 1, "a concurrent edit conflicts");
}
on_both_backends!(
    a_deleted_role_leaves_every_holder_works,
    a_deleted_role_leaves_every_holder
);

#[tokio::test]
async fn checking_a_database_changes_nothing() {
    let Some(url) = banlieue_testbed::postgres::scratch_database("the database check").await else {
        return;
    };
    let DatabaseCheck::Reachable {
        pending,
        signing_keys,
    } = Store::check(&url).await.unwrap()
    else {
        panic!("a PostgreSQL database is reachable or an error");
    };
    assert!(pending > 0, "a fresh database has every migration to apply");
    assert!(signing_keys.is_empty());
    assert_eq!(
        Store::check(&url).await.unwrap(),
        DatabaseCheck::Reachable {
            pending,
            signing_keys: Vec::new()
        },
        "checking applied nothing"
    );
    let store = Store::open(&url).await.unwrap();
    let sealed = b"sealed bytes".to_vec();
    store
        .insert_signing_key(&banlieue_store::SigningKeyRecord {
            kid: "k1".into(),
            private_key_sealed: sealed.clone(),
            public_jwk: "{}".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            activates_at: OffsetDateTime::UNIX_EPOCH,
        })
        .await
        .unwrap();
    store.close().await;
    assert_eq!(
        Store::check(&url).await.unwrap(),
        DatabaseCheck::Reachable {
            pending: 0,
            signing_keys: vec![banlieue_store::SealedSigningKey {
                kid: "k1".into(),
                private_key_sealed: sealed,
            }]
        },
        "the stored keys, for the key-encryption key's check"
    );
}

/// A creation whose audit row cannot be written leaves no user: the audit row is part of
/// the creation's transaction, so a crash between the two cannot lose it.
#[tokio::test]
async fn a_user_is_created_with_its_audit_row_or_not_at_all() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let sqlite_url = format!("sqlite://{}/console.db", dir.path().display());
    let mut backends = vec![(sqlite_url.clone(), Store::open(&sqlite_url).await.unwrap())];
    if let Some(url) =
        banlieue_testbed::postgres::scratch_database("the audit atomicity test").await
    {
        backends.push((url.clone(), Store::open(&url).await.unwrap()));
    }
    for (url, store) in backends {
        let refuse: &[&str] = if url.starts_with("sqlite") {
            &["CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events \
               BEGIN SELECT RAISE(ABORT, 'audit refused'); END"]
        } else {
            &[
                "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$",
                "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events \
                 FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
            ]
        };
        let keeper = store
            .create_user(
                &new_user("keeper", &["viewer"]),
                "$k",
                OffsetDateTime::now_utc(),
                &creation_event(),
            )
            .await
            .unwrap();
        sqlx::any::install_default_drivers();
        let mut admin = sqlx::AnyConnection::connect(&url).await.unwrap();
        for statement in refuse {
            sqlx::query(statement).execute(&mut admin).await.unwrap();
        }
        let refused = store
            .create_user(
                &new_user("ghost", &["viewer"]),
                "$x",
                OffsetDateTime::now_utc(),
                &creation_event(),
            )
            .await;
        assert!(refused.is_err(), "{url}: {refused:?}");
        assert_eq!(
            store
                .user_by_name(&UserName::parse("ghost").unwrap())
                .await
                .unwrap(),
            None,
            "{url}: no user without its audit row"
        );
        // Every other change of a user is refused with its audit row, and leaves the
        // user as it was.
        let now = OffsetDateTime::now_utc();
        let (id, version) = (keeper.id, keeper.version);
        let viewer = keeper.roles.clone();
        let writes = [
            store
                .update_user(
                    id,
                    version,
                    &UserUpdate {
                        display_name: "K",
                        email: "",
                        roles: &viewer,
                    },
                    now,
                    &[event("user.update")],
                )
                .await
                .map(drop),
            store
                .set_user_disabled(id, version, true, now, &event("user.disable"))
                .await
                .map(drop),
            store
                .set_password(id, "$n", false, now, &event("user.password-set"))
                .await
                .map(drop),
            store
                .revoke_user_sessions(id, now, &event("user.sessions-revoke"))
                .await,
            store.delete_user(id, version, &event("user.delete")).await,
        ];
        for (i, write) in writes.iter().enumerate() {
            assert!(write.is_err(), "{url}: write {i} without its audit row");
        }
        assert_eq!(store.user_by_id(id).await.unwrap(), Some(keeper), "{url}");
        let drop = if url.starts_with("sqlite") {
            "DROP TRIGGER refuse_audit"
        } else {
            "DROP TRIGGER refuse_audit ON audit_events"
        };
        sqlx::query(drop).execute(&mut admin).await.unwrap();
        store
            .create_user(
                &new_user("ghost", &["viewer"]),
                "$x",
                OffsetDateTime::now_utc(),
                &creation_event(),
            )
            .await
            .unwrap();
        let audit = store.recent_audit(10).await.unwrap();
        assert_eq!(audit.len(), 2, "{url}: keeper's and ghost's creations");
        assert_eq!(audit[0].action, "user.create");
    }
}

/// Two handles on one database, as two replicas have.
async fn claims_of_one_key_are_exclusive_across_replicas(one: Store, other: Store) {
    use banlieue_store::{BackoffRule, SignInClaim, SignInKeys};
    let keys = SignInKeys {
        source: "s:0000000000000000000000000000000a",
        name: "u:0000000000000000000000000000000b",
    };
    let (now, lease) = (at(1_000_000), at(1_030_000));
    let long_ago = at(0);
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..20 {
        let store = if i % 2 == 0 {
            one.clone()
        } else {
            other.clone()
        };
        racing.spawn(async move { store.claim_sign_in(keys, now, lease, long_ago).await });
    }
    let claims = racing.join_all().await;
    let won = claims
        .iter()
        .filter(|claim| matches!(claim, Ok(SignInClaim::Claimed { name_held: true })))
        .count();
    assert_eq!(won, 1, "{claims:?}");
    assert!(claims.iter().all(Result::is_ok), "{claims:?}");

    // The winner fails: both keys count it, the source's rule blocks after one free failure.
    let rule = BackoffRule {
        free_failures: 1,
        base_delay: std::time::Duration::from_secs(2),
        max_delay: std::time::Duration::from_secs(60),
        forget_after: std::time::Duration::from_secs(3600),
    };
    let lenient = BackoffRule {
        free_failures: 50,
        ..rule
    };
    other
        .count_sign_in_failure(&[(keys.source, rule), (keys.name, lenient)], lease, now)
        .await
        .unwrap();
    let source = one.sign_in_backoff(keys.source).await.unwrap().unwrap();
    assert_eq!(source.failures, 1);
    assert_eq!(source.blocked_until, at(1_002_000));
    assert_eq!(source.in_flight_until, at(0), "released");
    let refused = one
        .claim_sign_in(keys, at(1_001_000), lease, long_ago)
        .await;
    assert!(
        matches!(refused, Ok(SignInClaim::Refused { source: Some(s), name: Some(n) })
            if s.blocked_until == at(1_002_000) && n.failures == 1),
        "{refused:?}"
    );
    assert!(matches!(
        one.claim_sign_in(keys, at(1_002_000), lease, long_ago)
            .await,
        Ok(SignInClaim::Claimed { name_held: true })
    ));
    // A success at this source makes it known to the name: the name's key is not
    // consulted from here any more; the newest `keep` addresses stay.
    one.release_sign_in(
        &[keys.source, keys.name],
        lease,
        Some(keys),
        2,
        at(1_002_000),
    )
    .await
    .unwrap();
    assert!(matches!(
        other
            .claim_sign_in(keys, at(1_003_000), lease, long_ago)
            .await,
        Ok(SignInClaim::Claimed { name_held: false })
    ));
    other
        .release_sign_in(&[keys.source], lease, None, 2, now)
        .await
        .unwrap();
    for (i, source) in ["s:1", "s:2"].into_iter().enumerate() {
        let elsewhere = SignInKeys { source, ..keys };
        one.release_sign_in(&[], lease, Some(elsewhere), 2, at(1_004_000 + i as i64))
            .await
            .unwrap();
    }
    assert!(
        matches!(
            one.claim_sign_in(keys, at(1_005_000), lease, long_ago)
                .await,
            Ok(SignInClaim::Claimed { name_held: true })
        ),
        "the oldest of three known addresses was forgotten"
    );
    // Pruning keeps what still counts.
    let pruned = one
        .prune_sign_in_backoff(at(1_005_000), at(999_000), at(1_004_001))
        .await
        .unwrap();
    assert_eq!(pruned, 1, "the known address s:1");
}

#[tokio::test]
async fn sign_in_claims_are_exclusive_across_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/console.db", dir.path().display());
    let one = Store::open(&url).await.unwrap();
    let other = Store::open(&url).await.unwrap();
    claims_of_one_key_are_exclusive_across_replicas(one, other).await;
    if let Some(url) = banlieue_testbed::postgres::scratch_database("the store suite").await {
        let one = Store::open(&url).await.unwrap();
        let other = Store::open(&url).await.unwrap();
        claims_of_one_key_are_exclusive_across_replicas(one, other).await;
    }
}

async fn tenant_people_are_noted_once_and_listed_by_last_sighting(store: Store) {
    use banlieue_store::TenantPerson;
    let t0 = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let alice = TenantPerson {
        tenant: "acme".into(),
        subject: "a-1".into(),
        username: "alice".into(),
        display_name: Some("Alice".into()),
        email: None,
    };
    let bob = TenantPerson {
        tenant: "acme".into(),
        subject: "b-2".into(),
        username: "bob".into(),
        display_name: None,
        email: Some("bob@acme.test".into()),
    };
    store.note_tenant_person(&alice, t0).await.unwrap();
    store
        .note_tenant_person(&bob, t0 + Duration::days(1))
        .await
        .unwrap();
    // Alice again, renamed: one row, her first sighting kept.
    let renamed = TenantPerson {
        username: "alice.r".into(),
        ..alice.clone()
    };
    store
        .note_tenant_person(&renamed, t0 + Duration::days(2))
        .await
        .unwrap();

    let all = store.tenant_people_seen_since(t0).await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].person, renamed);
    assert_eq!(all[0].first_seen, t0);
    assert_eq!(all[0].last_seen, t0 + Duration::days(2));
    assert_eq!(all[1].person, bob);

    let recent = store
        .tenant_people_seen_since(t0 + Duration::days(2))
        .await
        .unwrap();
    assert_eq!(
        recent
            .iter()
            .map(|p| p.person.subject.as_str())
            .collect::<Vec<_>>(),
        ["a-1"]
    );
}
on_both_backends!(
    tenant_people_are_noted_once_and_listed_by_last_sighting_on_each_backend,
    tenant_people_are_noted_once_and_listed_by_last_sighting
);
