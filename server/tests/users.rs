//! User administration, My account and the audit log through the router.

mod support;

use axum::http::StatusCode;
use support::*;

const PASSWORD: &str = "correct horse battery";

async fn with_admin() -> (TestApp, String) {
    let app = TestApp::new().await;
    app.create_user("root", PASSWORD, &["admin"], false).await;
    let cookie = app.sign_in("root", PASSWORD).await;
    (app, cookie)
}

fn shown_password(body: &str) -> String {
    let at = body
        .find("data-testid=\"shown-password\"")
        .expect("a shown password");
    let tag_start = body[..at].rfind('<').unwrap();
    let tag = &body[tag_start..at + body[at..].find('>').unwrap()];
    let value = tag.split("value=\"").nth(1).unwrap();
    value[..value.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn a_created_user_signs_in_with_the_generated_password_and_must_change_it() {
    let (app, admin) = with_admin().await;
    let created = app
        .send(post_form(
            "/users",
            form(&[
                ("name", "alice"),
                ("display_name", "Alice Liddell"),
                ("email", "alice@example.test"),
                ("roles", "developer, viewer"),
                ("password_mode", "generate"),
            ]),
            Some(&admin),
        ))
        .await;
    // Post/redirect/get: the generated password rides in the session, not the URL, and
    // is shown once on the page the answer leads to.
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    assert_eq!(created.location(), Some("/users/alice?done=created"));
    let page = app
        .send(get("/users/alice?done=created", Some(&admin)))
        .await;
    assert!(page.body.contains("User created."));
    let password = shown_password(&page.body);
    assert_eq!(password.len(), 24);
    let reloaded = app
        .send(get("/users/alice?done=created", Some(&admin)))
        .await;
    assert!(
        !reloaded.body.contains("data-testid=\"shown-password\""),
        "a reload shows it no more"
    );

    let listed = app.send(get("/users?q=liddell", Some(&admin))).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert!(listed.body.contains("href=\"/users/alice\""));
    assert!(listed.body.contains("developer, viewer"));
    assert!(listed.body.contains("must change password"));

    let response = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", &password)]),
            None,
        ))
        .await;
    assert_eq!(response.location(), Some("/change-password"));

    let page = app.send(get("/users/alice", Some(&admin))).await;
    assert!(
        !page.body.contains("data-testid=\"shown-password\""),
        "shown once only"
    );
}

#[tokio::test]
async fn bad_input_is_refused_with_the_form_kept() {
    let (app, admin) = with_admin().await;
    let bad = app
        .send(post_form(
            "/users",
            form(&[
                ("name", "Not Valid"),
                ("display_name", "Kept Name"),
                ("roles", "viewer"),
            ]),
            Some(&admin),
        ))
        .await;
    let bad = app.refused_page(bad, "/users", &admin).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.alert().unwrap().starts_with("User names are 1 to 63"));
    assert!(
        bad.body.contains("value=\"Kept Name\""),
        "typed values survive"
    );
    app.create_user("bob", PASSWORD, &[], false).await;
    let taken = app
        .send(post_form(
            "/users",
            form(&[("name", "bob"), ("password_mode", "generate")]),
            Some(&admin),
        ))
        .await;
    let taken = app.refused_page(taken, "/users", &admin).await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert_eq!(
        taken.alert().as_deref(),
        Some("A user with this name already exists.")
    );
}

#[tokio::test]
async fn only_admins_reach_user_administration() {
    let (app, admin) = with_admin().await;
    app.create_user("dev", PASSWORD, &["developer"], false)
        .await;
    let dev = app.sign_in("dev", PASSWORD).await;
    for path in ["/users", "/users/root", "/audit"] {
        let page = app.send(get(path, Some(&dev))).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
        assert!(!page.body.contains("data-testid=\"users-table\""));
    }
    let create = app
        .send(post_form(
            "/users",
            form(&[("name", "eve"), ("password_mode", "generate")]),
            Some(&dev),
        ))
        .await;
    assert_eq!(create.status, StatusCode::FORBIDDEN);
    let disable = app
        .send(post_form(
            "/users/root/disable",
            form(&[("version", "1")]),
            Some(&dev),
        ))
        .await;
    assert_eq!(disable.status, StatusCode::FORBIDDEN);
    // A forged deletion is refused for its rights before its confirmation is read.
    let delete = app
        .send(post_form(
            "/users/root/delete",
            form(&[("version", "1"), ("confirm", "not root")]),
            Some(&dev),
        ))
        .await;
    assert_eq!(delete.status, StatusCode::FORBIDDEN);
    // A name as long as a form allows is logged cut to a name's length.
    let long = "x".repeat(5_000);
    app.send(post_form(
        "/users",
        form(&[("name", &long), ("password_mode", "generate")]),
        Some(&dev),
    ))
    .await;
    let events = app.store().recent_audit(20).await.unwrap();
    let create = events
        .iter()
        .find(|e| e.actor == "dev" && e.action == "user.create" && e.target.starts_with("xx"))
        .expect("the long forged create is audited");
    assert!(
        create.target.chars().count() <= 64,
        "{}",
        create.target.len()
    );
    // Each forged action is in the audit log with its refusal, found by a part of it.
    let refused = app
        .send(get("/audit?actor=dev&result=FORBID", Some(&admin)))
        .await;
    for (action, target) in [
        ("user.create", "eve"),
        ("user.disable", "root"),
        ("user.delete", "root"),
    ] {
        assert!(
            refused.body.contains(&format!(">{action}<"))
                && refused.body.contains(&format!(">{target}<")),
            "{action} {target}: {}",
            refused.body
        );
    }
    assert!(
        app.send(get("/account", Some(&dev)))
            .await
            .status
            .is_success()
    );
}

#[tokio::test]
async fn resetting_a_password_ends_the_users_open_session() {
    let (app, admin) = with_admin().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let alice = app.sign_in("alice", PASSWORD).await;
    assert_eq!(
        app.send(get("/", Some(&alice))).await.status,
        StatusCode::OK
    );
    // The reset is a second step: its form is inside a disclosure opened first (#18).
    let page = app.send(get("/users/alice", Some(&admin))).await.body;
    let before_form = &page[..page
        .find("action=\"/users/alice/password\"")
        .expect("the reset form")];
    let opened = before_form
        .rfind("<details")
        .expect("a disclosure before it");
    assert!(
        before_form
            .rfind("</details>")
            .is_none_or(|closed| closed < opened),
        "the reset form is inside the disclosure: {page}"
    );
    assert!(
        page.contains("<summary class=\"cursor-pointer text-sm font-medium\">Reset password…<"),
        "{page}"
    );
    let reset = app
        .send(post_form(
            "/users/alice/password",
            form(&[("password_mode", "generate")]),
            Some(&admin),
        ))
        .await;
    assert_eq!(reset.location(), Some("/users/alice?done=password-reset"));
    let page = app
        .send(get("/users/alice?done=password-reset", Some(&admin)))
        .await;
    let password = shown_password(&page.body);
    assert_eq!(
        app.send(get("/", Some(&alice))).await.location(),
        Some("/sign-in")
    );
    let again = app
        .send(post_form(
            "/sign-in",
            form(&[("user_name", "alice"), ("password", &password)]),
            None,
        ))
        .await;
    assert_eq!(again.location(), Some("/change-password"));
}

#[tokio::test]
async fn my_sessions_lists_and_ends_sessions() {
    let app = TestApp::new().await;
    app.create_user("alice", PASSWORD, &[], false).await;
    let laptop = app.sign_in("alice", PASSWORD).await;
    let phone = app.sign_in("alice", PASSWORD).await;
    let page = app.send(get("/account", Some(&laptop))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.body.matches("data-current=").count(), 2);
    assert_eq!(page.body.matches("data-current=\"true\"").count(), 1);
    let revoke = page
        .body
        .split("action=\"/account/sessions/")
        .nth(1)
        .unwrap();
    let handle = &revoke[..revoke.find('/').unwrap()];
    let ended = app
        .send(post_form(
            &format!("/account/sessions/{handle}/revoke"),
            "",
            Some(&laptop),
        ))
        .await;
    // Post/redirect/get: a reload of the answer asks nothing again.
    assert_eq!(ended.status, StatusCode::SEE_OTHER);
    assert_eq!(ended.location(), Some("/account?done=session-ended"));
    let shown = app
        .send(get("/account?done=session-ended", Some(&laptop)))
        .await;
    assert!(shown.body.contains("Session ended."));
    assert_eq!(shown.body.matches("data-current=").count(), 1);
    assert_eq!(
        app.send(get("/", Some(&phone))).await.location(),
        Some("/sign-in"),
        "that browser is out"
    );
    assert_eq!(
        app.send(get("/", Some(&laptop))).await.status,
        StatusCode::OK,
        "this one stays"
    );

    let everywhere = app
        .send(post_form("/account/sessions/revoke-all", "", Some(&laptop)))
        .await;
    assert_eq!(everywhere.location(), Some("/sign-in"));
    assert_eq!(
        app.send(get("/", Some(&laptop))).await.location(),
        Some("/sign-in")
    );
}

#[tokio::test]
async fn the_last_admin_cannot_lock_everyone_out() {
    let (app, admin) = with_admin().await;
    let page = app.send(get("/users/root", Some(&admin))).await;
    let version = version_of(&page.body);
    let disable = app
        .send(post_form(
            "/users/root/disable",
            form(&[("version", &version)]),
            Some(&admin),
        ))
        .await;
    let disable = app.refused_page(disable, "/users/root", &admin).await;
    assert_eq!(disable.status, StatusCode::FORBIDDEN);
    assert!(
        disable
            .alert()
            .unwrap()
            .starts_with("The last enabled admin")
    );
    let demote = app
        .send(post_form(
            "/users/root",
            form(&[("version", &version), ("roles", "viewer")]),
            Some(&admin),
        ))
        .await;
    let demote = app.refused_page(demote, "/users/root", &admin).await;
    assert_eq!(demote.status, StatusCode::FORBIDDEN);
    // Shown once: a reload is the page alone, and repeats nothing.
    let reload = app.send(get("/users/root", Some(&admin))).await;
    assert_eq!(reload.status, StatusCode::OK);
    assert_eq!(reload.alert(), None);
    assert_eq!(
        app.send(get("/", Some(&admin))).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn concurrent_edits_conflict_instead_of_overwriting() {
    let (app, admin) = with_admin().await;
    app.create_user("bob", PASSWORD, &[], false).await;
    let version = version_of(&app.send(get("/users/bob", Some(&admin))).await.body);
    let first = app
        .send(post_form(
            "/users/bob",
            form(&[("version", &version), ("display_name", "First")]),
            Some(&admin),
        ))
        .await;
    // Post/redirect/get: the answer is the user's page with what was done.
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    assert_eq!(first.location(), Some("/users/bob?done=saved"));
    let page = app.send(get("/users/bob?done=saved", Some(&admin))).await;
    assert!(page.body.contains("Changes saved."));
    let second = app
        .send(post_form(
            "/users/bob",
            form(&[("version", &version), ("display_name", "Second")]),
            Some(&admin),
        ))
        .await;
    let second = app.refused_page(second, "/users/bob", &admin).await;
    assert_eq!(second.status, StatusCode::CONFLICT);
    assert!(
        second
            .alert()
            .unwrap()
            .starts_with("Someone else changed this user")
    );
    assert!(
        second.body.contains("value=\"First\""),
        "the stored value is shown"
    );
}

#[tokio::test]
async fn deletion_needs_the_name_typed() {
    let (app, admin) = with_admin().await;
    app.create_user("bob", PASSWORD, &["viewer"], false).await;
    let version = version_of(&app.send(get("/users/bob", Some(&admin))).await.body);
    let wrong = app
        .send(post_form(
            "/users/bob/delete",
            form(&[("version", &version), ("confirm", "bo")]),
            Some(&admin),
        ))
        .await;
    let wrong = app.refused_page(wrong, "/users/bob", &admin).await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert!(wrong.alert().is_some());
    // The profile form beside it shows bob as stored, not the fields the delete form
    // never sent.
    assert_eq!(
        role_box(&wrong.body, "viewer"),
        Some(true),
        "{}",
        wrong.body
    );
    let deleted = app
        .send(post_form(
            "/users/bob/delete",
            form(&[("version", &version), ("confirm", "bob")]),
            Some(&admin),
        ))
        .await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER);
    assert_eq!(deleted.location(), Some("/users?deleted=bob"));
    let list = app.send(get("/users?deleted=bob", Some(&admin))).await;
    assert!(list.body.contains("User bob deleted."));
    assert_eq!(
        app.send(get("/users/bob", Some(&admin))).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_audit_log_shows_and_filters_events() {
    let (app, admin) = with_admin().await;
    app.send(post_form(
        "/users",
        form(&[("name", "carol"), ("password_mode", "generate")]),
        Some(&admin),
    ))
    .await;
    app.send(post_form("/users/carol/revoke-sessions", "", Some(&admin)))
        .await;
    let log = app.send(get("/audit", Some(&admin))).await;
    assert_eq!(log.status, StatusCode::OK);
    for action in ["session.sign-in", "user.create", "user.sessions-revoke"] {
        assert!(log.body.contains(action), "{action}");
    }
    let filtered = app
        .send(get("/audit?action=user.create", Some(&admin)))
        .await;
    assert!(filtered.body.contains("user.create"));
    assert!(!filtered.body.contains("session.sign-in<"));
    // A part of the action finds it: every sign-in and sign-out.
    let sessions = app.send(get("/audit?action=session", Some(&admin))).await;
    assert!(sessions.body.contains("session.sign-in"));
    // Whatever anyone typed as a name is shown as typed, its hidden characters written out.
    app.send(post_form(
        "/sign-in",
        form(&[("user_name", "x\u{202e}nimda"), ("password", "guess")]),
        None,
    ))
    .await;
    let log = app.send(get("/audit", Some(&admin))).await;
    assert!(log.body.contains("x\\u{202E}nimda"), "{}", log.body);
    assert!(
        !log.body.contains('\u{202e}'),
        "no override reaches the page"
    );
    let bad_date = app.send(get("/audit?since=yesterday", Some(&admin))).await;
    assert_eq!(bad_date.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        bad_date.alert().as_deref(),
        Some("Dates are written YYYY-MM-DD.")
    );
}

fn version_of(body: &str) -> String {
    let value = body
        .split("name=\"version\" value=\"")
        .nth(1)
        .expect("a version field");
    value[..value.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn hand_edited_addresses_get_pages_not_crashes() {
    let (app, admin) = with_admin().await;
    for path in [
        "/users?page=4294967295",
        "/users?page=abc",
        "/users?page=-1",
        "/audit?page=4294967295",
        "/audit?until=9999-12-31",
        "/audit?since=0000-01-01&page=x",
    ] {
        let page = app.send(get(path, Some(&admin))).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
    }
    // A page past the end is the last page, and says so.
    let past = app.send(get("/users?page=99999", Some(&admin))).await;
    assert!(past.body.contains("Page 1 of 1"), "{}", past.body);
    assert!(
        past.body.contains(">root<"),
        "the last page's users are listed"
    );
    let past = app.send(get("/audit?page=99999", Some(&admin))).await;
    assert!(past.body.contains("Page 1 of 1"), "{}", past.body);
    let reload = app.send(get("/users/root/disable", Some(&admin))).await;
    assert_eq!(reload.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        reload
            .alert()
            .unwrap()
            .starts_with("This address only takes a form submission")
    );
}

#[tokio::test]
async fn action_results_keep_the_user_page_address_for_the_language_switch() {
    let (app, admin) = with_admin().await;
    app.create_user("bob", PASSWORD, &[], false).await;
    // A refused action is shown on the user's page, where the language switch returns.
    let refused = app
        .send(post_form(
            "/users/bob",
            form(&[("version", "1"), ("display_name", "a\u{1b}b")]),
            Some(&admin),
        ))
        .await;
    let refused = app.refused_page(refused, "/users/bob", &admin).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.body.contains("name=\"next\" value=\"/users/bob\""));
    let revoked = app
        .send(post_form("/users/bob/revoke-sessions", "", Some(&admin)))
        .await;
    assert_eq!(revoked.location(), Some("/users/bob?done=sessions-revoked"));
    let page = app
        .send(get("/users/bob?done=sessions-revoked", Some(&admin)))
        .await;
    assert!(page.body.contains("All sessions of this user have ended."));
    assert!(page.body.contains("name=\"next\" value=\"/users/bob\""));
}

#[tokio::test]
async fn profiles_refuse_hidden_characters_and_actions_need_a_version() {
    let (app, admin) = with_admin().await;
    let create = |display_name: &'static str, email: &'static str| {
        post_form(
            "/users",
            form(&[
                ("name", "eve"),
                ("display_name", display_name),
                ("email", email),
                ("password_mode", "generate"),
            ]),
            Some(&admin),
        )
    };
    for hidden in [
        "a\u{0}b\u{1b}[31m",
        // Reads as "admin" to others.
        "adm\u{200b}in",
        // Right-to-left override, and an isolate: the text shows in another order.
        "\u{202e}nimda",
        "\u{2067}eve\u{2069}",
        "eve\u{2028}admin",
        "\u{feff}eve",
        // Look like "admin", or like nothing: a variation selector after a plain letter,
        // a blank letter, an unassigned code point, a mark on nothing.
        "admin\u{fe0f}",
        "\u{3164}",
        "adm\u{2065}in",
        "\u{20e3}",
    ] {
        let bad = app.send(create(hidden, "")).await;
        let bad = app.refused_page(bad, "/users", &admin).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{hidden:?}");
        assert!(
            bad.alert()
                .unwrap()
                .contains("would let them pass for other text"),
            "{hidden:?}: {:?}",
            bad.alert()
        );
    }
    for not_an_address in [
        "eve",
        "eve@",
        "eve@localhost",
        "Eve <eve@example.org>",
        "eve@[192.0.2.1]",
        "eve@example.org\u{200b}",
    ] {
        let bad = app.send(create("Eve", not_an_address)).await;
        let bad = app.refused_page(bad, "/users", &admin).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{not_an_address:?}");
        let alert = bad.alert().unwrap();
        assert!(
            alert.contains("not an address") || alert.contains("invisible"),
            "{not_an_address:?}: {alert}"
        );
    }
    let kept = app.send(create("Eve", "eve@@example.org")).await;
    let kept = app.refused_page(kept, "/users", &admin).await;
    assert!(
        kept.body.contains("value=\"eve@@example.org\""),
        "what was typed is kept"
    );
    assert!(
        app.store()
            .user_by_name(&banlieue_domain::UserName::parse("eve").unwrap())
            .await
            .unwrap()
            .is_none(),
        "nothing was created"
    );
    // Scripts, accents and emoji are fine; the address may be empty.
    let fine = app
        .send(create("山田 Ève 🙂", "eve.y+console@example.org"))
        .await;
    assert_eq!(fine.status, StatusCode::SEE_OTHER, "{:?}", fine.alert());
    assert_eq!(app.user("eve").await.email, "eve.y+console@example.org");
    let version = version_of(&app.send(get("/users/eve", Some(&admin))).await.body);
    let edit = app
        .send(post_form(
            "/users/eve",
            form(&[("version", &version), ("email", "eve at example.org")]),
            Some(&admin),
        ))
        .await;
    let edit = app.refused_page(edit, "/users/eve", &admin).await;
    assert_eq!(edit.status, StatusCode::BAD_REQUEST);
    assert!(edit.alert().unwrap().contains("not an address"));
    assert_eq!(app.user("eve").await.email, "eve.y+console@example.org");

    app.create_user("bob", PASSWORD, &[], false).await;
    let no_version = app
        .send(post_form("/users/bob/disable", "", Some(&admin)))
        .await;
    assert_eq!(no_version.status, StatusCode::BAD_REQUEST);
    let bogus = app
        .send(post_form(
            "/account/sessions/not-a-session/revoke",
            "",
            Some(&admin),
        ))
        .await;
    assert_eq!(
        (bogus.status, bogus.location()),
        (StatusCode::SEE_OTHER, Some("/account")),
        "nothing was ended"
    );
}

/// Whether the user form's checkbox for `role` is in `html`, and whether it is ticked.
fn role_box(html: &str, role: &str) -> Option<bool> {
    let (_, rest) = html.split_once(&format!("name=\"roles\" value=\"{role}\""))?;
    Some(rest[..rest.find('>').unwrap()].contains("checked"))
}

#[tokio::test]
async fn the_user_forms_offer_the_roles_as_checkboxes_and_no_empty_tenant_column() {
    let (app, admin) = with_admin().await;
    let page = app.send(get("/users", Some(&admin))).await;
    assert_eq!(page.status, StatusCode::OK);
    for role in ["viewer", "developer", "operator", "admin"] {
        assert_eq!(
            role_box(&page.body, role),
            Some(false),
            "{role}: {}",
            page.body
        );
    }
    assert!(page.body.contains("type=\"checkbox\" name=\"roles\""));
    assert!(
        !page.body.contains("type=\"text\" name=\"roles\""),
        "no free text"
    );
    // No tenant is configured and nobody belongs to one: no Tenant column.
    assert!(page.body.contains("data-testid=\"users-table\""));
    assert!(!page.body.contains(">Tenant<"), "{}", page.body);

    // One field per box ticked.
    let created = app
        .send(post_form(
            "/users",
            form(&[
                ("name", "tess"),
                ("roles", "viewer"),
                ("roles", "developer"),
                ("password_mode", "generate"),
            ]),
            Some(&admin),
        ))
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let tess = app.user("tess").await;
    assert!(tess.roles.contains("viewer") && tess.roles.contains("developer"));
    let page = app.send(get("/users/tess", Some(&admin))).await;
    assert_eq!(role_box(&page.body, "developer"), Some(true));
    assert_eq!(role_box(&page.body, "operator"), Some(false));

    // A role held but not offered (one made outside the Roles page) keeps its box, ticked.
    app.create_user("hana", PASSWORD, &["viewer", "handmade"], false)
        .await;
    let page = app.send(get("/users/hana", Some(&admin))).await;
    assert_eq!(
        role_box(&page.body, "handmade"),
        Some(true),
        "{}",
        page.body
    );

    // A refused form keeps its boxes ticked.
    let refused = app
        .send(post_form(
            "/users",
            form(&[
                ("name", "Not Valid"),
                ("roles", "viewer"),
                ("roles", "operator"),
            ]),
            Some(&admin),
        ))
        .await;
    let refused = app.refused_page(refused, "/users", &admin).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(role_box(&refused.body, "operator"), Some(true));
    assert_eq!(role_box(&refused.body, "admin"), Some(false));
}
