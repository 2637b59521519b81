//! The Users page with 10,000 users: server time to render its first page (50 rows) and
//! a search, through the whole router on SQLite. Target: median ≤ 30 ms.
//! Run: `cargo bench -p server --bench users_page`.

#[path = "../tests/support/mod.rs"]
mod support;

use banlieue_domain::{RoleName, Roles, UserName};
use banlieue_store::NewUser;
use criterion::{Criterion, criterion_group, criterion_main};
use support::{TestApp, get};
use time::OffsetDateTime;

fn users_page(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = runtime.block_on(TestApp::new());
    runtime.block_on(async {
        app.create_user("root", "correct horse battery", &["admin"], false)
            .await;
        let roles = Roles::new(vec![RoleName::parse("developer").unwrap()]).unwrap();
        for i in 0..10_000 {
            let user = NewUser {
                name: UserName::parse(&format!("user-{i:05}")).unwrap(),
                display_name: format!("User Number {i}"),
                email: format!("user{i}@example.test"),
                roles: roles.clone(),
                must_change_password: false,
            };
            app.store()
                .create_user(
                    &user,
                    "$argon2id$placeholder",
                    OffsetDateTime::now_utc(),
                    &banlieue_store::AuditEvent::now(
                        "-",
                        "user.create",
                        "-",
                        std::net::IpAddr::from([127, 0, 0, 1]),
                        "success",
                        "",
                    ),
                )
                .await
                .unwrap();
        }
    });
    let cookie = runtime.block_on(app.sign_in("root", "correct horse battery"));

    let mut group = c.benchmark_group("users_page_10k");
    for (case, path) in [("first_page", "/users"), ("search", "/users?q=number+99")] {
        group.bench_function(case, |b| {
            b.to_async(&runtime).iter(|| async {
                let page = app.send(get(path, Some(&cookie))).await;
                assert_eq!(page.status, axum::http::StatusCode::OK);
                page
            })
        });
    }
    group.finish();
}

criterion_group!(benches, users_page);
criterion_main!(benches);
