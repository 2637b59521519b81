//! Sign-in latency through the whole router with production argon2id parameters, next to
//! one bare verification, so "sign-in minus one hash" and "unknown user vs wrong
//! password" can be read off the medians; and one person's sign-in on an idle console
//! next to the same sign-in while 200 concurrent wrong sign-ins come without pause, for
//! `admin` from one address, and for 200 names from 200 addresses (issue 13: at most 2×
//! the idle latency).
//! Run: `cargo bench -p server --bench sign_in`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use banlieue_domain::Password;
use banlieue_identity::{HashLane, PasswordHasher, ThrottlePolicy};
use criterion::{Criterion, criterion_group, criterion_main};
use support::{TestApp, form, post_form, post_form_from};

const PASSWORD: &str = "correct horse battery";

fn sign_in(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let unthrottled = ThrottlePolicy {
        free_failures: u32::MAX,
        free_failures_per_user: u32::MAX,
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
        b.to_async(&runtime).iter(|| async {
            app.accounts
                .hasher()
                .verify(&wrong, &phc, HashLane::Anonymous)
                .await
                .unwrap()
        })
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

/// A person's sign-in from their address, idle and while 200 concurrent wrong sign-ins
/// arrive: for `admin` from one address (a new one each time: the worst case, as a known
/// attacker's address is already blocked), or each for a name of its own from an address
/// of its own (new ones each time), which no back-off slows and only the hash queue's
/// lanes keep from the person. Only the person's sign-in is timed; each flood is answered
/// before the next iteration.
fn sign_in_during_flood(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = Arc::new(runtime.block_on(TestApp::with_hasher(
        PasswordHasher::rfc9106_second_recommendation(),
        ThrottlePolicy::default(),
    )));
    runtime.block_on(async {
        app.create_user("admin", PASSWORD, &["admin"], false).await;
        app.create_user("bob", PASSWORD, &[], false).await;
    });
    let sign_in_bob = {
        let app = app.clone();
        let bob = form(&[("user_name", "bob"), ("password", PASSWORD)]);
        move || {
            let request = post_form_from("/sign-in", bob.clone(), None, [203, 0, 113, 9].into());
            let app = app.clone();
            async move {
                let started = Instant::now();
                let response = app.send(request).await;
                assert_eq!(response.status, 303, "bob signs in: {}", response.body);
                started.elapsed()
            }
        }
    };
    // Wave `wave` of 200 concurrent wrong sign-ins: for `admin` from one new address, or
    // (`distributed`) each for a new name from a new address.
    let flood = {
        let app = app.clone();
        move |wave: u32, distributed: bool| {
            let app = app.clone();
            tokio::spawn(async move {
                futures::future::join_all((0..200u32).map(|i| {
                    let (name, attacker) = if distributed {
                        let n = wave * 200 + i;
                        let address = [10, (n >> 16) as u8, (n >> 8) as u8, n as u8];
                        (format!("u{n}"), IpAddr::from(address))
                    } else {
                        let address = [198, 51, (wave >> 8) as u8, wave as u8];
                        ("admin".to_owned(), IpAddr::from(address))
                    };
                    let guess = form(&[("user_name", &name), ("password", "guess")]);
                    app.send(post_form_from("/sign-in", guess, None, attacker))
                }))
                .await
            })
        }
    };

    let mut group = c.benchmark_group("sign_in_flood");
    group.sample_size(20);
    group.bench_function("idle", |b| {
        b.to_async(&runtime).iter_custom(|iterations| {
            let sign_in_bob = sign_in_bob.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    total += sign_in_bob().await;
                }
                total
            }
        })
    });
    for (case, distributed) in [("during_flood", false), ("during_distributed_flood", true)] {
        let mut wave = 0u32;
        group.bench_function(case, |b| {
            b.to_async(&runtime).iter_custom(|iterations| {
                let (sign_in_bob, flood) = (sign_in_bob.clone(), flood.clone());
                let first = wave;
                wave += iterations as u32;
                async move {
                    let mut total = Duration::ZERO;
                    for i in 0..iterations {
                        let attack = flood(first + i as u32, distributed);
                        total += sign_in_bob().await;
                        attack.await.unwrap();
                    }
                    total
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sign_in, sign_in_during_flood);
criterion_main!(benches);
