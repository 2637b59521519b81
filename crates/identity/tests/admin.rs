//! The user-administration rules, each refusal included, on a real SQLite store.

use std::net::IpAddr;

use argon2::Params;
use banlieue_identity::{
    Accounts, Actor, AdminError, PasswordChoice, PasswordHasher, ThrottlePolicy, UserProfile,
};
use banlieue_store::Store;

const SOURCE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

async fn accounts() -> (Accounts, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("sqlite://{}/c.db", dir.path().display()))
        .await
        .unwrap();
    let hasher = PasswordHasher::with_params(Params::new(1024, 1, 1, None).unwrap());
    (Accounts::new(store, hasher, ThrottlePolicy::default()), dir)
}

fn profile(roles: &[&str]) -> UserProfile {
    UserProfile {
        display_name: "Someone".into(),
        email: "someone@example.test".into(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
    }
}

async fn signed_in(accounts: &Accounts, name: &str) -> Actor {
    let user = accounts.user(&Actor::Operator, name).await.unwrap();
    Actor::User {
        user: Box::new(user),
        source: SOURCE,
    }
}

#[tokio::test]
async fn admins_create_users_who_must_change_the_generated_password() {
    let (accounts, _dir) = accounts().await;
    accounts
        .create_user(
            &Actor::Operator,
            "root",
            &profile(&["admin"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    let root = signed_in(&accounts, "root").await;

    let (alice, shown) = accounts
        .create_user(
            &root,
            "alice",
            &profile(&["developer", "viewer"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    let password = shown.expect("a generated password is shown once");
    assert_eq!(password.len(), 24);
    assert!(alice.must_change_password);
    let signed = accounts
        .sign_in(banlieue_identity::SignInAttempt {
            user_name: "alice",
            password: &password,
            source: SOURCE,
        })
        .await
        .unwrap();
    assert!(signed.must_change_password);

    let typed = accounts
        .create_user(
            &root,
            "bob",
            &profile(&[]),
            PasswordChoice::Typed("a typed passphrase".into()),
        )
        .await
        .unwrap();
    assert_eq!(typed.1, None, "a typed password is not echoed back");

    let taken = accounts
        .create_user(&root, "alice", &profile(&[]), PasswordChoice::Generate)
        .await
        .unwrap_err();
    assert!(matches!(taken, AdminError::NameTaken), "{taken:?}");
    let bad_name = accounts
        .create_user(&root, "Alice!", &profile(&[]), PasswordChoice::Generate)
        .await
        .unwrap_err();
    assert!(
        matches!(bad_name, AdminError::InvalidName(_)),
        "{bad_name:?}"
    );
    let bad_role = accounts
        .create_user(
            &root,
            "carol",
            &profile(&["Bad Role"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(bad_role, AdminError::InvalidRoles(_)),
        "{bad_role:?}"
    );
    let short = accounts
        .create_user(
            &root,
            "carol",
            &profile(&[]),
            PasswordChoice::Typed("short".into()),
        )
        .await
        .unwrap_err();
    assert!(matches!(short, AdminError::InvalidPassword(_)), "{short:?}");

    let actions: Vec<_> = accounts
        .store()
        .recent_audit(20)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "user.create")
        .map(|e| (e.actor, e.target, e.result))
        .collect();
    assert!(actions.contains(&("root".into(), "alice".into(), "success".into())));
    assert!(actions.contains(&("root".into(), "alice".into(), "name-taken".into())));
}

#[tokio::test]
async fn only_admins_administer_and_nobody_grants_what_they_lack() {
    let (accounts, _dir) = accounts().await;
    accounts
        .create_user(
            &Actor::Operator,
            "root",
            &profile(&["admin"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    accounts
        .create_user(
            &Actor::Operator,
            "dev",
            &profile(&["developer"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    let dev = signed_in(&accounts, "dev").await;
    let forbidden = accounts.list_users(&dev, "", 0).await.unwrap_err();
    assert!(matches!(forbidden, AdminError::Forbidden));
    let forbidden = accounts
        .create_user(&dev, "x", &profile(&[]), PasswordChoice::Generate)
        .await
        .unwrap_err();
    assert!(matches!(forbidden, AdminError::Forbidden));

    // An admin holds every built-in role, but not a custom one they lack…
    let root = signed_in(&accounts, "root").await;
    accounts
        .create_user(
            &root,
            "ops",
            &profile(&["operator"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    let refused = accounts
        .create_user(
            &root,
            "eve",
            &profile(&["auditor"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, AdminError::RoleNotHeld(role) if role == "auditor"),
        "{refused:?}"
    );
    // …and an operator is not an admin at all.
    let ops = signed_in(&accounts, "ops").await;
    let forbidden = accounts
        .create_user(&ops, "eve", &profile(&["viewer"]), PasswordChoice::Generate)
        .await
        .unwrap_err();
    assert!(matches!(forbidden, AdminError::Forbidden));
    // …but may keep a role the user already holds while editing something else.
    let devuser = accounts.user(&root, "dev").await.unwrap();
    let edited = accounts
        .update_user(
            &root,
            "dev",
            devuser.version,
            &UserProfile {
                display_name: "Dev".into(),
                ..profile(&["developer"])
            },
        )
        .await
        .unwrap();
    assert_eq!(edited.display_name, "Dev");
}

#[tokio::test]
async fn the_last_admin_is_protected_and_stale_edits_conflict() {
    let (accounts, _dir) = accounts().await;
    accounts
        .create_user(
            &Actor::Operator,
            "root",
            &profile(&["admin"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    let root = signed_in(&accounts, "root").await;
    let me = accounts.user(&root, "root").await.unwrap();
    for result in [
        accounts
            .update_user(&root, "root", me.version, &profile(&["viewer"]))
            .await
            .map(|_| ()),
        accounts
            .set_user_disabled(&root, "root", me.version, true)
            .await
            .map(|_| ()),
        accounts.delete_user(&root, "root", me.version).await,
    ] {
        assert!(matches!(result, Err(AdminError::LastAdmin)), "{result:?}");
    }

    accounts
        .create_user(
            &root,
            "second",
            &profile(&["admin"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    let second = accounts.user(&root, "second").await.unwrap();
    accounts
        .update_user(
            &root,
            "second",
            second.version,
            &profile(&["admin", "viewer"]),
        )
        .await
        .unwrap();
    let stale = accounts
        .update_user(&root, "second", second.version, &profile(&["admin"]))
        .await
        .unwrap_err();
    assert!(matches!(stale, AdminError::Conflict), "{stale:?}");
    let missing = accounts.delete_user(&root, "nobody", 1).await.unwrap_err();
    assert!(matches!(missing, AdminError::NotFound));
}

#[tokio::test]
async fn a_session_ends_at_its_absolute_lifetime_however_active() {
    let (accounts, _dir) = accounts().await;
    let accounts = accounts.with_session_lifetime(time::Duration::milliseconds(600));
    accounts
        .create_user(
            &Actor::Operator,
            "alice",
            &profile(&[]),
            PasswordChoice::Typed("alice passphrase".into()),
        )
        .await
        .unwrap();
    let alice = accounts.user(&Actor::Operator, "alice").await.unwrap();
    let signed_in = || {
        accounts.open_session(
            &alice,
            SOURCE,
            "Test",
            time::OffsetDateTime::now_utc() + time::Duration::milliseconds(1),
        )
    };
    let old = signed_in().await.unwrap();
    // Requests every 100 ms keep it active; activity does not extend the lifetime.
    let mut alive = 0;
    for _ in 0..10 {
        if accounts
            .check_session(&old, SOURCE)
            .await
            .unwrap()
            .is_some()
        {
            alive += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!((1..10).contains(&alive), "alive for {alive} of 10 checks");
    assert!(
        accounts
            .check_session(&old, SOURCE)
            .await
            .unwrap()
            .is_none()
    );
    let recent = signed_in().await.unwrap();
    assert!(
        accounts
            .check_session(&recent, SOURCE)
            .await
            .unwrap()
            .is_some()
    );
    let listed = accounts.store().user_sessions_of(alice.id).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.handle.as_str()).collect::<Vec<_>>(),
        [recent.handle.as_str()],
        "the ended session leaves My sessions"
    );
}

#[tokio::test]
async fn reset_password_revokes_sessions_and_forces_a_change() {
    let (accounts, _dir) = accounts().await;
    accounts
        .create_user(
            &Actor::Operator,
            "root",
            &profile(&["admin"]),
            PasswordChoice::Generate,
        )
        .await
        .unwrap();
    accounts
        .create_user(
            &Actor::Operator,
            "alice",
            &profile(&[]),
            PasswordChoice::Typed("alice passphrase".into()),
        )
        .await
        .unwrap();
    let alice = accounts.user(&Actor::Operator, "alice").await.unwrap();
    let grant = accounts
        .open_session(
            &alice,
            SOURCE,
            "Test",
            time::OffsetDateTime::now_utc() + time::Duration::milliseconds(1),
        )
        .await
        .unwrap();
    let accounts = accounts.with_user_cache_ttl(std::time::Duration::ZERO);
    assert!(
        accounts
            .check_session(&grant, SOURCE)
            .await
            .unwrap()
            .is_some()
    );

    let root = signed_in(&accounts, "root").await;
    let shown = accounts
        .reset_password(&root, "alice", PasswordChoice::Generate)
        .await
        .unwrap()
        .unwrap();
    assert!(
        accounts
            .check_session(&grant, SOURCE)
            .await
            .unwrap()
            .is_none(),
        "the open session ended"
    );
    let after = accounts.user(&root, "alice").await.unwrap();
    assert!(after.must_change_password);
    accounts
        .sign_in(banlieue_identity::SignInAttempt {
            user_name: "alice",
            password: &shown,
            source: SOURCE,
        })
        .await
        .unwrap();

    let grant = accounts
        .open_session(&after, SOURCE, "Test", time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    accounts.revoke_user_sessions(&root, "alice").await.unwrap();
    assert!(
        accounts
            .check_session(&grant, SOURCE)
            .await
            .unwrap()
            .is_none()
    );
    let revoked = accounts.store().recent_audit(1).await.unwrap();
    assert_eq!(revoked[0].action, "user.sessions-revoke");
    assert_eq!(revoked[0].actor, "root");
}
