//! Bind benchmark (issues 6 and 20): N claims created at once against M Ready members,
//! with the controllers in this process. On the emulator (the default) it runs on its own
//! runtime, so the CPU of the API server and of the controllers can be told apart; with
//! `BANLIEUE_KUBE_BACKEND=testbed` the same load goes to the real kube-apiserver.
//!
//! `cargo bench -p banlieue-cluster --bench bind` runs every size of the table below;
//! `cargo bench -p banlieue-cluster --bench bind -- 1000` (claims = members) or
//! `-- 1000 100` (claims, members) runs one. Reports create→Bound p50/p90/p99, binds per
//! second, API writes and lost races (409) per bind, double binds, and CPU per bind of
//! the controllers and of the API server; exits 1 when a target is missed.
//!
//! Not a criterion benchmark: one run measures a distribution over many claims, which is
//! the quantity of interest, rather than iterating one operation.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::crd::CLAIM_LABEL;
use common::*;
use futures::StreamExt;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

/// Finalizer, member patch, status: three writes is the floor.
const TARGET_WRITES_PER_BIND: f64 = 3.5;
/// 1,000 racing claims: create→Bound p99 on the emulator.
const TARGET_P99_AT_1000: Duration = Duration::from_secs(1);
/// Binds per second at 5,000 claims, as a share of the figure at 200.
const TARGET_FLAT: f64 = 0.75;

/// One measured size.
struct Outcome {
    claims: usize,
    members: usize,
    wall: Duration,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    binds_per_sec: f64,
    writes_per_bind: f64,
    conflicts_per_bind: f64,
    double_binds: usize,
    controller_cpu_per_bind: Duration,
    apiserver_cpu_per_bind: Option<Duration>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// CPU time (user + system) of this process's threads whose name starts with `prefix`,
/// from `/proc/self/task/*/stat`.
fn thread_cpu(prefix: &str) -> Duration {
    let ticks_per_sec = 100.0; // USER_HZ on Linux
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        // After the name: state is field 3, utime 14 and stime 15 (proc(5)).
        ticks += fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    }
    Duration::from_secs_f64(ticks as f64 / ticks_per_sec)
}

/// CPU time of the real kube-apiserver of the test bed (`$BANLIEUE_TESTBED_DIR/pids`).
fn apiserver_cpu_on_testbed() -> Option<Duration> {
    let dir = std::env::var_os("BANLIEUE_TESTBED_DIR")?;
    let pids = std::fs::read_to_string(std::path::Path::new(&dir).join("pids")).ok()?;
    for pid in pids.lines() {
        let Ok(cmdline) = std::fs::read_to_string(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if !cmdline.contains("kube-apiserver") {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
        let ticks = fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?;
        return Some(Duration::from_secs_f64(ticks as f64 / 100.0));
    }
    None
}

fn main() {
    // cargo passes `--bench`; everything else is ours: [claims [members]], both ≥ 1.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let numbers: Option<Vec<usize>> = args
        .iter()
        .map(|a| a.parse().ok().filter(|n| *n > 0))
        .collect();
    let sizes = match numbers.as_deref() {
        Some([]) => vec![
            (200, 200),
            (1_000, 1_000),
            (5_000, 5_000),
            (200, 5_000),
            (1_000, 100),
        ],
        Some([n]) => vec![(*n, *n)],
        Some([claims, members]) => vec![(*claims, *members)],
        _ => {
            eprintln!(
                "usage: cargo bench -p banlieue-cluster --bench bind [-- CLAIMS [MEMBERS]] \
                 (whole numbers from 1; none: every size of README's table)"
            );
            std::process::exit(2);
        }
    };
    let mut outcomes = Vec::new();
    for (claims, members) in sizes {
        outcomes.push(measure(claims, members));
        report(outcomes.last().unwrap());
    }
    if !verdicts(&outcomes) {
        std::process::exit(1);
    }
}

/// Runs one size: the API server (emulator) on a runtime of its own (threads `apisrv`),
/// the controllers on another (`ctl`), the load from the main thread's runtime.
fn measure(claims: usize, members: usize) -> Outcome {
    let apiserver = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("apisrv")
        .enable_all()
        .build()
        .expect("runtime");
    let controllers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ctl")
        .enable_all()
        .build()
        .expect("runtime");
    let load = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("load")
        .enable_all()
        .build()
        .expect("runtime");
    let (server, client) = apiserver.block_on(start());
    let outcome = load.block_on(run(&controllers, &server, &client, claims, members));
    apiserver.block_on(server.shutdown());
    outcome
}

async fn run(
    controllers: &tokio::runtime::Runtime,
    server: &Server,
    client: &Client,
    claims_n: usize,
    members_n: usize,
) -> Outcome {
    let p = create_pool(client, &pool("p", members_n as u32, members_n as u32, "r1")).await;
    futures::stream::iter(0..members_n)
        .for_each_concurrent(32, |i| {
            let p = &p;
            async move {
                ready_member(client, p, &format!("m-{i:05}"), "r1", 60 + i as i64).await;
            }
        })
        .await;
    let mut config = test_config(client, "bench");
    config.simulated_provider = None;
    config.pool_resync = Duration::from_secs(60);
    let running = {
        let _entered = controllers.enter();
        spawn_controllers(client, config)
    };
    // Let the controllers take the Lease and fill their caches.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let expected = claims_n.min(members_n);
    let bound_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch = tokio::spawn({
        let bound_at = bound_at.clone();
        let stream = watcher(claims(client), watcher::Config::default()).applied_objects();
        async move {
            futures::pin_mut!(stream);
            while let Some(Ok(claim)) = stream.next().await {
                if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") {
                    bound_at
                        .lock()
                        .unwrap()
                        .entry(claim.name_any())
                        .or_insert_with(Instant::now);
                }
            }
        }
    });
    let writes_before = running.metrics.writes.claim.get();
    let conflicts_before = running.metrics.bind_conflicts.get();
    let (ctl_before, api_before) = (thread_cpu("ctl"), apiserver_cpu(server));
    let started = Instant::now();
    let creates = (0..claims_n).map(|i| async move {
        let name = format!("c-{i:05}");
        let at = Instant::now();
        create_claim(client, &claim(&name, "p", 3600, "alice")).await;
        (name, at)
    });
    let created: Vec<(String, Instant)> = futures::stream::iter(creates)
        .buffer_unordered(256)
        .collect()
        .await;
    let deadline = Instant::now() + Duration::from_secs(600);
    while bound_at.lock().unwrap().len() < expected {
        assert!(
            Instant::now() < deadline,
            "not all claims bound within 600 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let wall = started.elapsed();
    let (ctl_cpu, api_cpu) = (
        thread_cpu("ctl").saturating_sub(ctl_before),
        apiserver_cpu(server)
            .zip(api_before)
            .map(|(a, b)| a.saturating_sub(b)),
    );
    let writes = running.metrics.writes.claim.get() - writes_before;
    let conflicts = running.metrics.bind_conflicts.get() - conflicts_before;
    watch.abort();
    let bound_at = bound_at.lock().unwrap().clone();
    let mut latencies: Vec<Duration> = created
        .iter()
        .filter_map(|(name, at)| Some(bound_at.get(name)?.saturating_duration_since(*at)))
        .collect();
    latencies.sort();

    let all = claims(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let refs: Vec<String> = all
        .iter()
        .filter_map(|c| c.status.as_ref()?.virtual_machine_ref.clone())
        .collect();
    let distinct: BTreeSet<&String> = refs.iter().collect();
    let labelled = list_vms(client)
        .await
        .iter()
        .filter(|vm| vm.labels().contains_key(CLAIM_LABEL))
        .count();
    let double_binds = (refs.len() - distinct.len())
        + (running.metrics.binds.get() as usize).saturating_sub(expected)
        + labelled.saturating_sub(expected);
    running.stop().await;
    let per_bind = |d: Duration| d / expected as u32;
    Outcome {
        claims: claims_n,
        members: members_n,
        wall,
        p50: percentile(&latencies, 50.0),
        p90: percentile(&latencies, 90.0),
        p99: percentile(&latencies, 99.0),
        binds_per_sec: expected as f64 / wall.as_secs_f64(),
        writes_per_bind: writes as f64 / expected as f64,
        conflicts_per_bind: conflicts as f64 / expected as f64,
        double_binds,
        controller_cpu_per_bind: per_bind(ctl_cpu),
        apiserver_cpu_per_bind: api_cpu.map(per_bind),
    }
}

/// The API server's CPU so far: the emulator's threads, or the test bed's process.
fn apiserver_cpu(server: &Server) -> Option<Duration> {
    if server.is_real() {
        apiserver_cpu_on_testbed()
    } else {
        Some(thread_cpu("apisrv"))
    }
}

fn report(o: &Outcome) {
    let api = o
        .apiserver_cpu_per_bind
        .map_or("unknown".to_owned(), |d| format!("{d:?}"));
    println!(
        "bind: {} claims / {} members: {} bound in {:?}, {:.0} binds/s; create→Bound p50 {:?} p90 {:?} p99 {:?}; \
         {:.2} writes and {:.2} lost races per bind; {} double binds; CPU per bind: controllers {:?}, API server {api}",
        o.claims,
        o.members,
        o.claims.min(o.members),
        o.wall,
        o.binds_per_sec,
        o.p50,
        o.p90,
        o.p99,
        o.writes_per_bind,
        o.conflicts_per_bind,
        o.double_binds,
        o.controller_cpu_per_bind,
    );
}

/// Prints each target's verdict; `false` when one is missed.
fn verdicts(outcomes: &[Outcome]) -> bool {
    let mut met = true;
    let mut verdict = |ok: bool, what: String| {
        println!("  {}: {what}", if ok { "ok" } else { "MISSED" });
        met &= ok;
    };
    for o in outcomes {
        // With more claims than members, the waiting claims' own writes (finalizer,
        // Pending status) count too: reported, not judged.
        if o.claims <= o.members {
            verdict(
                o.writes_per_bind <= TARGET_WRITES_PER_BIND,
                format!(
                    "{}/{}: {:.2} writes per bind (target ≤ {TARGET_WRITES_PER_BIND})",
                    o.claims, o.members, o.writes_per_bind
                ),
            );
        }
        verdict(
            o.double_binds == 0,
            format!(
                "{}/{}: {} double binds (target 0)",
                o.claims, o.members, o.double_binds
            ),
        );
    }
    let on_emulator = std::env::var("BANLIEUE_KUBE_BACKEND").as_deref() != Ok("testbed");
    if let Some(o) = outcomes
        .iter()
        .find(|o| o.claims == 1_000 && o.members == 1_000)
        && on_emulator
    {
        verdict(
            o.p99 <= TARGET_P99_AT_1000,
            format!(
                "1000/1000: p99 {:?} (target ≤ {TARGET_P99_AT_1000:?})",
                o.p99
            ),
        );
    }
    let rate = |n: usize| {
        outcomes
            .iter()
            .find(|o| o.claims == n && o.members == n)
            .map(|o| o.binds_per_sec)
    };
    if let (Some(small), Some(large)) = (rate(200), rate(5_000)) {
        verdict(
            large >= TARGET_FLAT * small,
            format!(
                "binds/s at 5000 is {:.0} % of 200's (target ≥ {:.0} %)",
                100.0 * large / small,
                100.0 * TARGET_FLAT
            ),
        );
    }
    met
}
