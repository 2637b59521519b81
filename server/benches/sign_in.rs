//! Sign-in latency through the whole router with production argon2id parameters, next to
//! one bare verification, so "sign-in minus one hash" and "unknown user vs wrong
//! password" can be read off the medians. Run: `cargo bench -p server --bench sign_in`.

#[path = "../tests/support/mod.rs"]
mod support;

use banlieue_domain::Password;
use banlieue_identity::{PasswordHasher, ThrottlePolicy};
use criterion::{Criterion, criterion_group, criterion_main};
use support::{TestApp, form, post_form};

const PASSWORD: &str = "correct horse battery";

fn sign_in(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let unthrottled = ThrottlePolicy {
        free_failures: u32::MAX,
        ..ThrottlePolicy::default()
    };
    let app = runtime.block_on(TestApp::with_hasher(
        PasswordHasher::rfc9106_second_recommendation(),
        unthrottled,
    ));
    let user = runtime.block_on(app.create_user("alice", PASSWORD, &[], false));
    let phc = runtime
        .block_on(app.store().password_phc(user.id))
        .unwrap()
        .unwrap();
    let wrong = Password::presented("wrong password!").unwrap();

    let mut group = c.benchmark_group("sign_in");
    group.sample_size(30);
    group.bench_function("argon2id_verify", |b| {
        b.to_async(&runtime)
            .iter(|| async { app.accounts.hasher().verify(&wrong, &phc).await.unwrap() })
    });
    for (case, name) in [("wrong_password", "alice"), ("unknown_user", "nobody")] {
        let body = form(&[("user_name", name), ("password", "wrong password!")]);
        group.bench_function(case, |b| {
            b.to_async(&runtime)
                .iter(|| async { app.send(post_form("/sign-in", body.clone(), None)).await })
        });
    }
    group.finish();
}

criterion_group!(benches, sign_in);
criterion_main!(benches);
