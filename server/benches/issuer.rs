//! Issuer benchmark (issue 17): our OIDC issuer's refresh-token grant side by side with
//! npm `oidc-provider` 9.13.3 (`bench/issuer/provider.mjs`, configured alike: one public
//! client, PKCE S256, an RSA-3072 RS256 key, rotation on every refresh, the in-memory
//! adapter).
//!
//! It starts our release server binary (`serve`, on a fresh SQLite database, no cluster)
//! and the Node provider on loopback, signs in through the real forms (the first admin,
//! its forced password change). Then, for C = 1, 4 and 16 workers, interleaved (ours,
//! theirs, ours, theirs), it obtains C fresh refresh-token chains from the server through
//! the real authorization code + PKCE flow and runs a closed loop: every worker owns one
//! chain and one keep-alive connection, posts `grant_type=refresh_token` and continues
//! with the rotated token of each answer. Per server and C it reports refreshes/s, p50/p90/p99,
//! errors (a worker whose chain breaks counts one and stops), server CPU per refresh
//! (utime + stime from `/proc/<pid>/stat`), RSS sampled every 50 ms during the load and
//! the process peak (`VmHWM`). It also measures discovery and JWKS GETs per second
//! (C = 4) and one RSA-3072 RS256 signature with aws-lc-rs in this process, the yardstick
//! of the CPU target. With `BANLIEUE_BENCH_POSTGRES_URL` set it runs everything again with
//! our server on PostgreSQL (a fresh `CREATE DATABASE` per run).
//!
//! Run: `make bench-issuer` (installs the npm package, starts a PostgreSQL with fsync on,
//! stops it afterwards), or `cargo bench -p server --bench issuer` for SQLite only;
//! `-- --quick` shortens every window (1 repetition × 3 s) to try it out. Prints one
//! Markdown table per backend and the issue's targets as met/MISSED; exits 1 when a
//! target is missed, 2 on bad arguments.
//!
//! Not a criterion benchmark: the quantities are distributions and ratios under a
//! concurrent load against two separate processes, not one operation iterated.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::header::{self, HeaderMap};
use sqlx::{Connection, Executor};

/// Our public client (crates/identity/src/oidc/clients.rs).
const OUR_CLIENT: &str = "banlieue-cli";
/// The one client of `provider.mjs`.
const THEIR_CLIENT: &str = "bench-cli";
/// The loopback redirect both clients register; nothing listens there, the code is read
/// from the `Location` header.
const REDIRECT: &str = "http://127.0.0.1:53124/callback";
/// Worker counts of the refresh load.
const CONCURRENCY: [usize; 3] = [1, 4, 16];
/// Workers of the discovery and JWKS loops.
const GET_CONCURRENCY: usize = 4;
/// How often RSS is sampled during a load window.
const RSS_EVERY: Duration = Duration::from_millis(50);
/// Signatures timed for the yardstick (after a short warm-up).
const SIGNATURES: usize = 300;

/// Other processes' CPU (in cores) during a window above which the run is called noisy.
const NOISY: f64 = 0.10;

/// The issue's targets.
const TARGET_RATIO_AT_4: f64 = 3.0;
const TARGET_P99_SHARE_AT_4: f64 = 0.5;
const TARGET_P99_AT_1: Duration = Duration::from_micros(1500);
const TARGET_CPU_PER_SIGNATURE: f64 = 1.25;
const TARGET_GET_RATIO: f64 = 2.0;
const TARGET_RSS_MIB: f64 = 40.0;
const TARGET_POSTGRES_SHARE: f64 = 0.5;

/// How long each measurement lasts.
#[derive(Debug, Clone, Copy)]
struct Plan {
    repetitions: usize,
    window: Duration,
    get_window: Duration,
}

/// Which server is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Theirs,
}

/// Where our server keeps its data.
#[derive(Debug, Clone)]
enum Backend {
    Sqlite,
    Postgres { admin_url: String },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres { .. } => "PostgreSQL",
        }
    }
}

fn main() {
    let plan = match parse_args(std::env::args().skip(1)) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("{message}");
            eprintln!(
                "usage: cargo bench -p server --bench issuer [-- --quick]  \
                 (--quick: 1 repetition × 3 s instead of 2 × 10 s; \
                 BANLIEUE_BENCH_POSTGRES_URL adds a run on PostgreSQL)"
            );
            std::process::exit(2);
        }
    };
    let ticks = clock_ticks_cached();
    let mut signatures = signature_times();
    println!(
        "One RSA-3072 RS256 signature (aws-lc-rs, kept key pair, median of {SIGNATURES}): {} \
         (timed again at the end)",
        micros(median(&signatures)),
    );
    println!(
        "Plan: C = {CONCURRENCY:?}, {} repetition(s) × {} s per server, interleaved; \
         discovery/JWKS C = {GET_CONCURRENCY} × {} s; CLK_TCK = {ticks}\n",
        plan.repetitions,
        plan.window.as_secs_f64(),
        plan.get_window.as_secs_f64()
    );
    ensure_node_modules().expect("bench/issuer: npm ci");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let mut backends = vec![Backend::Sqlite];
    match std::env::var("BANLIEUE_BENCH_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => backends.push(Backend::Postgres { admin_url: url }),
        _ => println!(
            "(BANLIEUE_BENCH_POSTGRES_URL is not set: SQLite only; `make bench-issuer` \
             starts a PostgreSQL)\n"
        ),
    }
    let mut reports = Vec::new();
    for backend in backends {
        let report = runtime
            .block_on(run_backend(&backend, plan))
            .unwrap_or_else(|e| panic!("{} run failed: {e:#}", backend.name()));
        print_report(&report);
        reports.push(report);
    }
    let at_start = median(&signatures);
    let at_end = signature_times();
    signatures.extend(&at_end);
    let signature = median(&signatures);
    println!(
        "One RSA-3072 RS256 signature: {} at the start, {} at the end, {} over both \
         → CPU target per refresh ≤ {}\n",
        micros(at_start),
        micros(median(&at_end)),
        micros(signature),
        micros(signature.mul_f64(TARGET_CPU_PER_SIGNATURE))
    );
    let verdicts = verdicts(&reports, signature);
    let noise = reports
        .iter()
        .flat_map(|r| r.refresh.iter())
        .flat_map(|(_, mine, other)| mine.iter().chain(other))
        .map(Window::other_share)
        .fold(0.0, f64::max);
    if noise > NOISY {
        println!(
            "WARNING: other processes used up to {:.0}% of a core during a window: \
             the figures are disturbed; run again on a quiet machine.\n",
            noise * 100.0
        );
    }
    println!("## Targets\n");
    for verdict in &verdicts {
        println!(
            "- {}: {} — {}",
            verdict.name,
            verdict.measured,
            if verdict.met { "met" } else { "MISSED" }
        );
    }
    if verdicts.iter().any(|v| !v.met) {
        std::process::exit(1);
    }
}

/// cargo passes `--bench`; ours is `--quick`. Anything else is a mistake.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Plan, String> {
    let mut plan = Plan {
        repetitions: 2,
        window: Duration::from_secs(10),
        get_window: Duration::from_secs(3),
    };
    for arg in args {
        match arg.as_str() {
            "--bench" => {}
            "--quick" => {
                plan = Plan {
                    repetitions: 1,
                    window: Duration::from_secs(3),
                    get_window: Duration::from_secs(1),
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(plan)
}

/// `getconf CLK_TCK` (the unit of `/proc/<pid>/stat` times), 100 when it cannot be read.
fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .filter(|ticks| *ticks > 0)
        .unwrap_or(100)
}

/// [`SIGNATURES`] timings of one RSA-3072 PKCS#1 v1.5 SHA-256 signature over a JWS signing
/// input of an ID token's size, with a key pair generated and kept in memory.
fn signature_times() -> Vec<Duration> {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::{KeyPair, KeySize};
    use aws_lc_rs::signature::RSA_PKCS1_SHA256;
    let pair = KeyPair::generate(KeySize::Rsa3072).expect("an RSA-3072 key");
    let rng = SystemRandom::new();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","kid":"bench","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(
        br#"{"iss":"http://127.0.0.1:3000","sub":"admin","aud":["kubernetes","banlieue-cli"],"azp":"banlieue-cli","groups":["admin"],"iat":1796140000,"exp":1796140300,"auth_time":1796140000}"#,
    );
    let input = format!("{header}.{claims}");
    let mut signature = vec![0; pair.public_modulus_len()];
    let mut times = Vec::with_capacity(SIGNATURES);
    for round in 0..SIGNATURES + 20 {
        let start = Instant::now();
        pair.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut signature)
            .expect("signing");
        if round >= 20 {
            times.push(start.elapsed());
        }
    }
    times
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

/// The workspace root (this file is `server/benches/issuer.rs`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// `npm ci` in `bench/issuer` when its `node_modules` is missing.
fn ensure_node_modules() -> Result<()> {
    let dir = workspace().join("bench/issuer");
    if dir.join("node_modules/oidc-provider").is_dir() {
        return Ok(());
    }
    println!("bench/issuer: npm ci");
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .status()
        .context("cannot run npm")?;
    ensure!(status.success(), "npm ci failed: {status}");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Server processes
// ---------------------------------------------------------------------------------------

/// A server process that is killed when this is dropped (also while unwinding a panic).
struct Server {
    side: Side,
    child: Child,
    /// `http://127.0.0.1:<port>`.
    base: String,
    /// The last lines it wrote (stderr; stdout too for Node), for error messages.
    tail: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails with what the process said when it has exited.
    fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{:?} server exited ({status}): {}",
                self.side,
                self.tail.lock().unwrap().join("\n")
            );
        }
        Ok(())
    }
}

/// Reads `stream` line by line on a thread until it closes, keeping the last 40 lines in
/// `tail` and handing each line to `lines` while someone listens.
fn drain(
    stream: impl std::io::Read + Send + 'static,
    tail: Arc<Mutex<Vec<String>>>,
    lines: std::sync::mpsc::Sender<String>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            {
                let mut tail = tail.lock().unwrap();
                if tail.len() == 40 {
                    tail.remove(0);
                }
                tail.push(line.clone());
            }
            let _ = lines.send(line);
        }
    });
}

/// A loopback port that was free a moment ago.
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts our release binary with `serve` on `database_url`; returns it with the initial
/// admin password it printed, once `/readyz` answers.
async fn start_ours(
    database_url: &str,
    kek: &std::path::Path,
    http: &reqwest::Client,
) -> Result<(Server, String)> {
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_banlieue-console"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BANLIEUE_DATABASE_URL", database_url)
        .env("BANLIEUE_KEY_ENCRYPTION_KEY_FILE", kek)
        .env("BANLIEUE_LISTEN", format!("127.0.0.1:{port}"))
        .env("BANLIEUE_EXTERNAL_URL", &base)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start banlieue-console")?;
    let tail = Arc::default();
    let (sender, lines) = std::sync::mpsc::channel();
    drain(child.stderr.take().unwrap(), Arc::clone(&tail), sender);
    let mut server = Server {
        side: Side::Ours,
        child,
        base,
        tail,
    };
    let password = loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                if let Some(password) = line.strip_prefix("initial admin password: ") {
                    break password.trim().to_owned();
                }
            }
            Err(_) => {
                server.check_alive()?;
                bail!("banlieue-console printed no initial admin password within 60 s");
            }
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        server.check_alive()?;
        let ready = http
            .get(format!("{}/readyz", server.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            break;
        }
        ensure!(Instant::now() < deadline, "/readyz did not answer in 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((server, password))
}

/// Starts `node bench/issuer/provider.mjs 0` (any free port) and waits for its `ready`.
fn start_theirs() -> Result<Server> {
    let dir = workspace().join("bench/issuer");
    let mut child = Command::new("node")
        .arg("provider.mjs")
        .arg("0")
        .current_dir(&dir)
        .env("NODE_ENV", "production")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start node (Node.js 20 or later is needed)")?;
    let tail = Arc::default();
    let (sender, lines) = std::sync::mpsc::channel();
    drain(
        child.stdout.take().unwrap(),
        Arc::clone(&tail),
        sender.clone(),
    );
    drain(child.stderr.take().unwrap(), Arc::clone(&tail), sender);
    let mut server = Server {
        side: Side::Theirs,
        child,
        base: String::new(),
        tail,
    };
    loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                if let Some(base) = line.strip_prefix("ready ") {
                    server.base = base.trim().to_owned();
                    return Ok(server);
                }
            }
            Err(_) => {
                server.check_alive()?;
                bail!("provider.mjs did not print `ready` within 60 s");
            }
        }
    }
}

/// utime + stime of `pid` in clock ticks (proc(5): fields 14 and 15).
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_name = &stat[stat.rfind(')').ok_or_else(|| anyhow!("odd stat"))? + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

/// utime + stime of this process (the load generator), in clock ticks.
fn own_ticks() -> Result<u64> {
    cpu_ticks(std::process::id())
}

/// Busy time of all CPUs (`/proc/stat`: user, nice, system, irq, softirq, steal), in
/// clock ticks.
fn machine_busy_ticks() -> Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat
        .lines()
        .find(|line| line.starts_with("cpu "))
        .ok_or_else(|| anyhow!("no cpu line in /proc/stat"))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest is counted in user).
    Ok([0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&i| fields.get(i).copied().unwrap_or(0))
        .sum())
}

/// utime + stime of the PostgreSQL server `postmaster` and its children (backends,
/// WAL writer, checkpointer …), in clock ticks. Our server's pooled connections live
/// through a window, so their backends do too.
fn postgres_ticks(postmaster: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let children: u64 = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(postmaster))
        .filter_map(|pid| cpu_ticks(pid).ok())
        .sum();
    children + cpu_ticks(postmaster).unwrap_or(0)
}

/// `PPid` of `pid`.
fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()
}

/// A `kB` line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB.
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Samples `VmRSS` of `pid` every [`RSS_EVERY`] on a thread until stopped; keeps the max.
struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                let mut max = 0;
                while !stop.load(Ordering::Relaxed) {
                    max = max.max(status_kib(pid, "VmRSS").unwrap_or(0));
                    std::thread::sleep(RSS_EVERY);
                }
                max.max(status_kib(pid, "VmRSS").unwrap_or(0))
            }
        });
        Self { stop, thread }
    }

    /// The largest sample, in KiB.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------
// HTTP: the sign-in and authorization flows
// ---------------------------------------------------------------------------------------

/// An HTTP/1.1 client that follows no redirects and uses no proxy. With one connection at
/// most, a closed-loop worker keeps a single keep-alive connection.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(1)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// Cookies by name; paths and expiry are ignored (the flows send each cookie back to the
/// server that set it, which is all they need).
#[derive(Default)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn take(&mut self, headers: &HeaderMap) {
        for value in headers.get_all(header::SET_COOKIE) {
            let Ok(text) = value.to_str() else { continue };
            let pair = text.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty() {
                    self.0.remove(name.trim());
                } else {
                    self.0.insert(name.trim().to_owned(), value.to_owned());
                }
            }
        }
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn encode(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(name, value)| {
            format!(
                "{}={}",
                percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC),
                percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn random_text(bytes: usize) -> String {
    let mut buffer = vec![0; bytes];
    aws_lc_rs::rand::fill(&mut buffer).expect("random bytes");
    URL_SAFE_NO_PAD.encode(buffer)
}

/// A PKCE pair (RFC 7636): a 43-character verifier and its S256 challenge.
fn pkce() -> (String, String) {
    let verifier = random_text(32);
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
    (verifier, URL_SAFE_NO_PAD.encode(digest.as_ref()))
}

/// A same-origin form POST with the jar's cookies, as a browser on `base` sends it.
async fn browser_post(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    jar: &mut Jar,
    fields: &[(&str, &str)],
) -> Result<reqwest::Response> {
    let response = http
        .post(format!("{base}{path}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ORIGIN, base)
        .header(header::COOKIE, jar.header())
        .body(encode(fields))
        .send()
        .await?;
    jar.take(response.headers());
    Ok(response)
}

fn location(response: &reqwest::Response) -> Result<String> {
    response
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("{} {} without Location", response.url(), response.status()))
}

/// Signs in as the first admin through `/sign-in`, then completes the forced password
/// change; returns the jar holding the session cookie.
async fn sign_in_ours(http: &reqwest::Client, base: &str, password: &str) -> Result<Jar> {
    let mut jar = Jar::default();
    let signed_in = browser_post(
        http,
        base,
        "/sign-in",
        &mut jar,
        &[("user_name", "admin"), ("password", password)],
    )
    .await?;
    ensure!(
        signed_in.status() == reqwest::StatusCode::SEE_OTHER,
        "sign-in answered {}",
        signed_in.status()
    );
    ensure!(
        location(&signed_in)? == "/change-password",
        "the first sign-in should ask for a new password"
    );
    let new_password = format!("bench-{}", random_text(18));
    let changed = browser_post(
        http,
        base,
        "/change-password",
        &mut jar,
        &[
            ("current_password", password),
            ("new_password", &new_password),
            ("confirm_password", &new_password),
        ],
    )
    .await?;
    ensure!(
        changed.status() == reqwest::StatusCode::SEE_OTHER,
        "change-password answered {}: {}",
        changed.status(),
        changed.text().await.unwrap_or_default()
    );
    ensure!(
        jar.0.contains_key("banlieue-session"),
        "no session cookie after the password change"
    );
    Ok(jar)
}

/// The endpoints a discovery document names.
struct Endpoints {
    discovery: String,
    authorize: String,
    token: String,
    jwks: String,
}

async fn endpoints(http: &reqwest::Client, base: &str) -> Result<Endpoints> {
    let discovery = format!("{base}/.well-known/openid-configuration");
    let doc = json(http.get(&discovery).send().await?).await?;
    let field = |name: &str| {
        doc[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("discovery of {base} has no {name}"))
    };
    Ok(Endpoints {
        authorize: field("authorization_endpoint")?,
        token: field("token_endpoint")?,
        jwks: field("jwks_uri")?,
        discovery,
    })
}

/// A JSON body (without reqwest's `json` feature).
async fn json(response: reqwest::Response) -> Result<serde_json::Value> {
    let status = response.status();
    let bytes = response.bytes().await?;
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{status}: not JSON: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        )
    })
}

/// The authorization request both flows send.
fn authorize_fields<'a>(
    client_id: &'a str,
    challenge: &'a str,
    state: &'a str,
    nonce: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("scope", "openid offline_access"),
        ("state", state),
        ("nonce", nonce),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ]
}

/// The code in a redirect to [`REDIRECT`], after checking its `state`.
fn code_of(location: &str, state: &str) -> Result<String> {
    ensure!(
        location.starts_with(REDIRECT),
        "expected a redirect to the client, got {location}"
    );
    let url = url::Url::parse(location)?;
    let query: BTreeMap<String, String> = url.query_pairs().into_owned().collect();
    ensure!(
        query.get("state").map(String::as_str) == Some(state),
        "state lost: {location}"
    );
    query
        .get("code")
        .cloned()
        .ok_or_else(|| anyhow!("no code: {location}"))
}

/// Exchanges `code` with its verifier; returns the refresh token.
async fn redeem(
    http: &reqwest::Client,
    token_url: &str,
    client_id: &str,
    code: &str,
    verifier: &str,
) -> Result<String> {
    let body = encode(&[
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", REDIRECT),
        ("client_id", client_id),
        ("code_verifier", verifier),
    ]);
    let answer = json(
        http.post(token_url)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await?,
    )
    .await?;
    ensure!(
        answer["id_token"].is_string(),
        "code exchange without id_token: {answer}"
    );
    answer["refresh_token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("code exchange without refresh_token: {answer}"))
}

/// One chain from our issuer: the confirmation page, the confirmation, the code, the
/// token endpoint.
async fn chain_ours(
    http: &reqwest::Client,
    base: &str,
    endpoints: &Endpoints,
    jar: &mut Jar,
) -> Result<String> {
    let (verifier, challenge) = pkce();
    let (state, nonce) = (random_text(12), random_text(12));
    let fields = authorize_fields(OUR_CLIENT, &challenge, &state, &nonce);
    let page = http
        .get(format!("{}?{}", endpoints.authorize, encode(&fields)))
        .header(header::COOKIE, jar.header())
        .send()
        .await?;
    let status = page.status();
    let body = page.text().await?;
    ensure!(
        status.is_success()
            && body.contains("name=\"decision\"")
            && !body.contains("name=\"password\""),
        "the authorization page ({status}) is not the confirmation of a signed-in admin"
    );
    let mut confirm = fields.clone();
    confirm.push(("decision", "allow"));
    let path = endpoints
        .authorize
        .strip_prefix(base)
        .ok_or_else(|| anyhow!("authorization endpoint outside {base}"))?;
    let confirmed = browser_post(http, base, path, jar, &confirm).await?;
    ensure!(
        confirmed.status() == reqwest::StatusCode::SEE_OTHER,
        "the confirmation answered {}",
        confirmed.status()
    );
    let code = code_of(&location(&confirmed)?, &state)?;
    redeem(http, &endpoints.token, OUR_CLIENT, &code, &verifier).await
}

/// One chain from oidc-provider: `/auth`, the interaction that finishes itself, the
/// resumed authorization, the code, `/token`.
async fn chain_theirs(http: &reqwest::Client, endpoints: &Endpoints) -> Result<String> {
    let (verifier, challenge) = pkce();
    let (state, nonce) = (random_text(12), random_text(12));
    let mut fields = authorize_fields(THEIR_CLIENT, &challenge, &state, &nonce);
    // oidc-provider drops offline_access unless consent is prompted (OIDC Core §11).
    fields.push(("prompt", "consent"));
    let mut jar = Jar::default();
    let mut url = url::Url::parse(&format!("{}?{}", endpoints.authorize, encode(&fields)))?;
    for _ in 0..10 {
        let response = http
            .get(url.clone())
            .header(header::COOKIE, jar.header())
            .send()
            .await?;
        jar.take(response.headers());
        ensure!(
            response.status().is_redirection(),
            "{url} answered {}: {}",
            response.status(),
            response.text().await.unwrap_or_default()
        );
        let next = location(&response)?;
        if next.starts_with(REDIRECT) {
            let code = code_of(&next, &state)?;
            return redeem(http, &endpoints.token, THEIR_CLIENT, &code, &verifier).await;
        }
        url = url.join(&next)?;
    }
    bail!("oidc-provider did not redirect to the client within 10 hops")
}

// ---------------------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------------------

/// One measured window of one server.
#[derive(Debug, Clone)]
struct Window {
    /// Successful requests.
    done: u64,
    elapsed: Duration,
    /// Sorted latencies of the successful requests.
    latencies: Vec<Duration>,
    errors: u64,
    first_error: Option<String>,
    /// Server CPU (user + system) during the window.
    cpu: Duration,
    /// Largest RSS sample during the window, KiB.
    rss_kib: u64,
    /// CPU of this process (the load generator) during the window.
    client_cpu: Duration,
    /// CPU of the PostgreSQL processes during the window, when our server runs on it.
    database_cpu: Option<Duration>,
    /// CPU the rest of the machine used during the window (neither the measured server,
    /// its database, nor this process): other work that disturbs the figures.
    other_cpu: Duration,
}

impl Window {
    fn per_sec(&self) -> f64 {
        self.done as f64 / self.elapsed.as_secs_f64()
    }

    fn cpu_per_request(&self) -> Option<Duration> {
        (self.done > 0).then(|| self.cpu.div_f64(self.done as f64))
    }

    fn database_per_request(&self) -> Option<Duration> {
        let cpu = self.database_cpu?;
        (self.done > 0).then(|| cpu.div_f64(self.done as f64))
    }

    /// The load generator's CPU, in cores.
    fn client_share(&self) -> f64 {
        self.client_cpu.as_secs_f64() / self.elapsed.as_secs_f64()
    }

    /// The CPU of everything else on the machine, in cores.
    fn other_share(&self) -> f64 {
        self.other_cpu.as_secs_f64() / self.elapsed.as_secs_f64()
    }
}

/// What one worker did.
struct WorkerOutcome {
    latencies: Vec<Duration>,
    error: Option<String>,
}

/// The request a worker repeats.
#[derive(Clone)]
enum Load {
    /// `grant_type=refresh_token` against the token endpoint, for this client.
    Refresh {
        token_url: Arc<str>,
        client_id: &'static str,
    },
    /// A plain GET.
    Get { url: Arc<str> },
}

/// One request; for a refresh, returns the rotated token. The latency ends when the whole
/// body has arrived.
async fn once(
    http: &reqwest::Client,
    load: &Load,
    chain: &str,
) -> Result<(Duration, Option<String>)> {
    let start = Instant::now();
    let request = match load {
        Load::Refresh {
            token_url,
            client_id,
        } => http
            .post(&**token_url)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(encode(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", chain),
                ("client_id", client_id),
            ])),
        Load::Get { url } => http.get(&**url),
    };
    let response = request.send().await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    let latency = start.elapsed();
    ensure!(
        status == reqwest::StatusCode::OK,
        "{status}: {}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
    );
    match load {
        Load::Get { .. } => Ok((latency, None)),
        Load::Refresh { .. } => {
            let answer: serde_json::Value = serde_json::from_slice(&bytes)?;
            ensure!(answer["id_token"].is_string(), "no id_token: {answer}");
            let rotated = answer["refresh_token"]
                .as_str()
                .ok_or_else(|| anyhow!("no refresh_token: {answer}"))?;
            ensure!(rotated != chain, "the refresh token did not rotate");
            Ok((latency, Some(rotated.to_owned())))
        }
    }
}

/// A closed-loop worker: one request to open its connection, then, from the common
/// start, requests back to back until `duration` has passed. Stops at its first error.
async fn worker(
    load: Load,
    mut chain: String,
    start: Arc<tokio::sync::Barrier>,
    duration: Duration,
) -> WorkerOutcome {
    let http = http_client();
    let warm = once(&http, &load, &chain).await;
    start.wait().await;
    let mut outcome = WorkerOutcome {
        latencies: Vec::with_capacity(8192),
        error: None,
    };
    match warm {
        Ok((_, rotated)) => chain = rotated.unwrap_or(chain),
        Err(error) => {
            outcome.error = Some(format!("warm-up: {error:#}"));
            return outcome;
        }
    }
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        match once(&http, &load, &chain).await {
            Ok((latency, rotated)) => {
                outcome.latencies.push(latency);
                chain = rotated.unwrap_or(chain);
            }
            Err(error) => {
                outcome.error = Some(format!("{error:#}"));
                return outcome;
            }
        }
    }
    outcome
}

/// Runs one worker per chain against `server` for `duration` (for GETs the chains are
/// empty strings). With `postmaster`, the CPU of that PostgreSQL server is counted apart.
async fn window(
    server: &Server,
    load: &Load,
    chains: Vec<String>,
    duration: Duration,
    postmaster: Option<u32>,
) -> Result<Window> {
    let start = Arc::new(tokio::sync::Barrier::new(chains.len() + 1));
    let workers: Vec<_> = chains
        .into_iter()
        .map(|chain| tokio::spawn(worker(load.clone(), chain, Arc::clone(&start), duration)))
        .collect();
    start.wait().await;
    let began = Instant::now();
    let cpu_before = cpu_ticks(server.pid())?;
    let client_before = own_ticks()?;
    let machine_before = machine_busy_ticks()?;
    let database_before = postmaster.map(postgres_ticks);
    let rss = RssSampler::start(server.pid());
    let mut outcomes = Vec::with_capacity(workers.len());
    for worker in workers {
        outcomes.push(worker.await?);
    }
    let elapsed = began.elapsed();
    let cpu_after = cpu_ticks(server.pid())?;
    let client_after = own_ticks()?;
    let machine_after = machine_busy_ticks()?;
    let database_ticks = postmaster
        .zip(database_before)
        .map(|(postmaster, before)| postgres_ticks(postmaster).saturating_sub(before));
    let rss_kib = rss.finish();
    let server_ticks = cpu_after - cpu_before;
    let client_ticks = client_after - client_before;
    let other_ticks = (machine_after - machine_before)
        .saturating_sub(server_ticks + client_ticks + database_ticks.unwrap_or(0));
    let mut result = Window {
        done: 0,
        elapsed,
        latencies: Vec::new(),
        errors: 0,
        first_error: None,
        cpu: ticks_to_time(server_ticks),
        rss_kib,
        client_cpu: ticks_to_time(client_ticks),
        database_cpu: database_ticks.map(ticks_to_time),
        other_cpu: ticks_to_time(other_ticks),
    };
    for outcome in outcomes {
        result.done += outcome.latencies.len() as u64;
        result.latencies.extend(outcome.latencies);
        if let Some(error) = outcome.error {
            result.errors += 1;
            result.first_error.get_or_insert(error);
        }
    }
    result.latencies.sort_unstable();
    Ok(result)
}

fn ticks_to_time(ticks: u64) -> Duration {
    Duration::from_secs_f64(ticks as f64 / clock_ticks_cached() as f64)
}

/// The one `CLK_TCK` of this run.
fn clock_ticks_cached() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(clock_ticks)
}

// ---------------------------------------------------------------------------------------
// One backend
// ---------------------------------------------------------------------------------------

/// Everything measured in one run (one backend for our server).
struct Report {
    backend: &'static str,
    plan: Plan,
    /// Per C: our windows and theirs, in the order they ran.
    refresh: Vec<(usize, Vec<Window>, Vec<Window>)>,
    /// Per C: `VmHWM` of ours and theirs after that C's windows, KiB.
    peaks: Vec<(u64, u64)>,
    discovery: (Window, Window),
    jwks: (Window, Window),
}

/// A fresh PostgreSQL database for one run, dropped afterwards.
struct Database {
    admin_url: String,
    name: String,
    /// The server's postmaster, when it runs on this machine (its CPU is measured).
    postmaster: Option<u32>,
}

impl Database {
    async fn create(admin_url: &str) -> Result<(Self, String)> {
        let name = format!(
            "banlieue_bench_{}_{}",
            std::process::id(),
            time::OffsetDateTime::now_utc().unix_timestamp()
        );
        let mut admin = sqlx::PgConnection::connect(admin_url)
            .await
            .context("cannot connect to BANLIEUE_BENCH_POSTGRES_URL")?;
        admin
            .execute(format!("CREATE DATABASE {name}").as_str())
            .await?;
        let (backend,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
            .fetch_one(&mut admin)
            .await?;
        let postmaster = u32::try_from(backend).ok().and_then(parent_of);
        admin.close().await?;
        let mut url = url::Url::parse(admin_url)?;
        url.set_path(&format!("/{name}"));
        Ok((
            Self {
                admin_url: admin_url.to_owned(),
                name,
                postmaster,
            },
            url.to_string(),
        ))
    }

    async fn drop_now(self) -> Result<()> {
        let mut admin = sqlx::PgConnection::connect(&self.admin_url).await?;
        admin
            .execute(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name).as_str())
            .await?;
        Ok(())
    }
}

async fn run_backend(backend: &Backend, plan: Plan) -> Result<Report> {
    println!("# {}: starting both servers", backend.name());
    let dir = tempfile::tempdir()?;
    let (database, database_url) = match backend {
        Backend::Sqlite => (
            None,
            format!("sqlite://{}/console.db", dir.path().display()),
        ),
        Backend::Postgres { admin_url } => {
            let (database, url) = Database::create(admin_url).await?;
            (Some(database), url)
        }
    };
    let postmaster = database.as_ref().and_then(|d| d.postmaster);
    let kek = dir.path().join("key-encryption-key");
    banlieue_identity::oidc::KeyEncryption::create_file(&kek)?;
    let result = measure_backend(backend, plan, &database_url, &kek, postmaster).await;
    if let Some(database) = database {
        database.drop_now().await?;
    }
    result
}

/// `postmaster`: the PostgreSQL server of `database_url`, whose CPU is reported with ours.
async fn measure_backend(
    backend: &Backend,
    plan: Plan,
    database_url: &str,
    kek: &std::path::Path,
    postmaster: Option<u32>,
) -> Result<Report> {
    let http = http_client();
    let (mut ours, password) = start_ours(database_url, kek, &http).await?;
    let mut jar = sign_in_ours(&http, &ours.base, &password).await?;
    let our_endpoints = endpoints(&http, &ours.base).await?;
    let mut theirs = start_theirs()?;
    let their_endpoints = endpoints(&http, &theirs.base).await?;

    println!(
        "  ours {} (signed in as admin), oidc-provider {}",
        ours.base, theirs.base
    );
    let our_load = Load::Refresh {
        token_url: our_endpoints.token.as_str().into(),
        client_id: OUR_CLIENT,
    };
    let their_load = Load::Refresh {
        token_url: their_endpoints.token.as_str().into(),
        client_id: THEIR_CLIENT,
    };

    let mut refresh = Vec::new();
    let mut peaks = Vec::new();
    for c in CONCURRENCY {
        let mut mine = Vec::new();
        let mut other = Vec::new();
        for rep in 1..=plan.repetitions {
            for side in [Side::Ours, Side::Theirs] {
                // Fresh chains for every window, obtained just before it: oidc-provider's
                // in-memory adapter is an LRU of 1,000 entries that evicts the grants of
                // idle chains, and keeps a per-grant index that grows with every refresh.
                let mut chains = Vec::with_capacity(c);
                for _ in 0..c {
                    chains.push(match side {
                        Side::Ours => {
                            chain_ours(&http, &ours.base, &our_endpoints, &mut jar).await?
                        }
                        Side::Theirs => chain_theirs(&http, &their_endpoints).await?,
                    });
                }
                let (server, load) = match side {
                    Side::Ours => (&mut ours, &our_load),
                    Side::Theirs => (&mut theirs, &their_load),
                };
                server.check_alive()?;
                let database = postmaster.filter(|_| side == Side::Ours);
                let measured = window(server, load, chains, plan.window, database).await?;
                println!(
                    "  C={c:>2} rep {rep} {:<13} {:>5.0} refreshes/s  p50 {}  p90 {}  p99 {}  \
                     CPU/refresh {}  RSS {:.1} MiB  errors {}  (load generator {:.0}%, \
                     other processes {:.0}% of a core)",
                    side_name(side),
                    measured.per_sec(),
                    millis(percentile(&measured.latencies, 50.0)),
                    millis(percentile(&measured.latencies, 90.0)),
                    millis(percentile(&measured.latencies, 99.0)),
                    cpu_text(measured.cpu_per_request(), measured.database_per_request()),
                    mib(measured.rss_kib),
                    measured.errors,
                    measured.client_share() * 100.0,
                    measured.other_share() * 100.0,
                );
                if let Some(error) = &measured.first_error {
                    println!("    first error: {error}");
                }
                match side {
                    Side::Ours => mine.push(measured),
                    Side::Theirs => other.push(measured),
                }
            }
        }
        peaks.push((
            status_kib(ours.pid(), "VmHWM").unwrap_or(0),
            status_kib(theirs.pid(), "VmHWM").unwrap_or(0),
        ));
        refresh.push((c, mine, other));
    }

    let mut gets = Vec::new();
    for (name, our_url, their_url) in [
        (
            "discovery",
            &our_endpoints.discovery,
            &their_endpoints.discovery,
        ),
        ("JWKS", &our_endpoints.jwks, &their_endpoints.jwks),
    ] {
        let mut pair = Vec::new();
        for (server, url) in [(&mut ours, our_url), (&mut theirs, their_url)] {
            server.check_alive()?;
            let load = Load::Get {
                url: url.as_str().into(),
            };
            let slots = vec![String::new(); GET_CONCURRENCY];
            let measured = window(server, &load, slots, plan.get_window, None).await?;
            if let Some(error) = &measured.first_error {
                println!("  {name} {:?}: first error: {error}", server.side);
            }
            pair.push(measured);
        }
        let theirs_window = pair.pop().unwrap();
        gets.push((pair.pop().unwrap(), theirs_window));
    }
    let jwks = gets.pop().unwrap();
    let discovery = gets.pop().unwrap();
    drop(theirs);
    drop(ours);
    Ok(Report {
        backend: backend.name(),
        plan,
        refresh,
        peaks,
        discovery,
        jwks,
    })
}

// ---------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Ours => "ours",
        Side::Theirs => "oidc-provider",
    }
}

/// Nearest-rank percentile of sorted latencies (zero when there are none).
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// Server CPU per request, with the database's when it is a process of its own.
fn cpu_text(server: Option<Duration>, database: Option<Duration>) -> String {
    match (server, database) {
        (None, _) => "–".into(),
        (Some(server), None) => micros(server),
        (Some(server), Some(database)) => {
            format!("{} (+ {} PostgreSQL)", micros(server), micros(database))
        }
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// All windows of one server at one C taken together.
struct Pooled {
    per_sec: f64,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    /// Per-repetition p99, lowest and highest.
    p99_range: (Duration, Duration),
    errors: u64,
    cpu_per_request: Option<Duration>,
    database_per_request: Option<Duration>,
    rss_kib: u64,
}

fn pool(windows: &[Window]) -> Pooled {
    let done: u64 = windows.iter().map(|w| w.done).sum();
    let elapsed: Duration = windows.iter().map(|w| w.elapsed).sum();
    let cpu: Duration = windows.iter().map(|w| w.cpu).sum();
    let mut latencies: Vec<Duration> = windows
        .iter()
        .flat_map(|w| w.latencies.iter().copied())
        .collect();
    latencies.sort_unstable();
    let p99s: Vec<Duration> = windows
        .iter()
        .map(|w| percentile(&w.latencies, 99.0))
        .collect();
    Pooled {
        per_sec: done as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 50.0),
        p90: percentile(&latencies, 90.0),
        p99: percentile(&latencies, 99.0),
        p99_range: (
            p99s.iter().copied().min().unwrap_or_default(),
            p99s.iter().copied().max().unwrap_or_default(),
        ),
        errors: windows.iter().map(|w| w.errors).sum(),
        cpu_per_request: (done > 0).then(|| cpu.div_f64(done as f64)),
        database_per_request: windows
            .iter()
            .map(|w| w.database_cpu)
            .sum::<Option<Duration>>()
            .filter(|_| done > 0)
            .map(|cpu| cpu.div_f64(done as f64)),
        rss_kib: windows.iter().map(|w| w.rss_kib).max().unwrap_or(0),
    }
}

fn p99_text(pooled: &Pooled) -> String {
    let (low, high) = pooled.p99_range;
    if low == high {
        millis(pooled.p99)
    } else {
        format!("{} ({}–{})", millis(pooled.p99), millis(low), millis(high))
    }
}

fn print_report(report: &Report) {
    println!(
        "\n## Refresh grant, our server on {} ({} × {} s per server and C, interleaved)\n",
        report.backend,
        report.plan.repetitions,
        report.plan.window.as_secs_f64()
    );
    println!(
        "| C | ours refreshes/s | oidc-provider | ratio | p99 ours / theirs | \
         CPU/refresh ours / theirs | RSS during load ours / theirs | peak ours / theirs |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for ((c, mine, other), (peak_ours, peak_theirs)) in report.refresh.iter().zip(&report.peaks) {
        let (a, b) = (pool(mine), pool(other));
        println!(
            "| {c} | {:.0} | {:.0} | {:.2}× | {} / {} | {} / {} | {:.1} / {:.1} MiB | {:.1} / {:.1} MiB |",
            a.per_sec,
            b.per_sec,
            a.per_sec / b.per_sec,
            p99_text(&a),
            p99_text(&b),
            cpu_text(a.cpu_per_request, a.database_per_request),
            cpu_text(b.cpu_per_request, None),
            mib(a.rss_kib),
            mib(b.rss_kib),
            mib(*peak_ours),
            mib(*peak_theirs),
        );
    }
    println!("\n| C | server | p50 | p90 | p99 | errors |");
    println!("|---|---|---|---|---|---|");
    for (c, mine, other) in &report.refresh {
        for (side, windows) in [(Side::Ours, mine), (Side::Theirs, other)] {
            let p = pool(windows);
            println!(
                "| {c} | {} | {} | {} | {} | {} |",
                side_name(side),
                millis(p.p50),
                millis(p.p90),
                millis(p.p99),
                p.errors
            );
        }
    }
    println!();
    for (name, (a, b)) in [("Discovery", &report.discovery), ("JWKS", &report.jwks)] {
        println!(
            "{name} GET (C = {GET_CONCURRENCY}, {} s): ours {:.0}/s (p99 {}, errors {}), \
             oidc-provider {:.0}/s (p99 {}, errors {}), ratio {:.2}×",
            report.plan.get_window.as_secs_f64(),
            a.per_sec(),
            millis(percentile(&a.latencies, 99.0)),
            a.errors,
            b.per_sec(),
            millis(percentile(&b.latencies, 99.0)),
            b.errors,
            a.per_sec() / b.per_sec()
        );
    }
    println!();
}

/// One target and how it went.
struct Verdict {
    name: String,
    measured: String,
    met: bool,
}

fn verdicts(reports: &[Report], signature: Duration) -> Vec<Verdict> {
    let mut out = Vec::new();
    let at = |report: &Report, c: usize| {
        let (_, mine, other) = report
            .refresh
            .iter()
            .find(|(n, _, _)| *n == c)
            .expect("measured C");
        (pool(mine), pool(other))
    };
    let Some(sqlite) = reports.iter().find(|r| r.backend == "SQLite") else {
        return out;
    };
    let (ours4, theirs4) = at(sqlite, 4);
    let ratio = ours4.per_sec / theirs4.per_sec;
    out.push(Verdict {
        name: format!("C = 4 throughput ≥ {TARGET_RATIO_AT_4}× oidc-provider (SQLite)"),
        measured: format!(
            "{ratio:.2}× ({:.0} vs {:.0}/s)",
            ours4.per_sec, theirs4.per_sec
        ),
        met: ratio >= TARGET_RATIO_AT_4,
    });
    out.push(Verdict {
        name: "C = 4 p99 ≤ ½ oidc-provider's (SQLite)".into(),
        measured: format!("{} vs {}", millis(ours4.p99), millis(theirs4.p99)),
        met: ours4.p99.as_secs_f64() <= TARGET_P99_SHARE_AT_4 * theirs4.p99.as_secs_f64(),
    });
    let (ours1, _) = at(sqlite, 1);
    out.push(Verdict {
        name: format!("C = 1 p99 ≤ {} (SQLite)", millis(TARGET_P99_AT_1)),
        measured: millis(ours1.p99),
        met: ours1.p99 <= TARGET_P99_AT_1,
    });
    let cpu_limit = signature.mul_f64(TARGET_CPU_PER_SIGNATURE);
    let worst_cpu = sqlite
        .refresh
        .iter()
        .filter_map(|(c, mine, _)| Some((*c, pool(mine).cpu_per_request?)))
        .max_by_key(|(_, cpu)| *cpu);
    out.push(Verdict {
        name: format!(
            "server CPU per refresh ≤ {TARGET_CPU_PER_SIGNATURE} × one signature = {} \
             (SQLite, every C)",
            micros(cpu_limit)
        ),
        measured: worst_cpu.map_or("no refresh".into(), |(c, cpu)| {
            format!("worst {} at C = {c}", micros(cpu))
        }),
        met: worst_cpu.is_some_and(|(_, cpu)| cpu <= cpu_limit),
    });
    for (name, (a, b)) in [("discovery", &sqlite.discovery), ("JWKS", &sqlite.jwks)] {
        let ratio = a.per_sec() / b.per_sec();
        out.push(Verdict {
            name: format!("{name} GET ≥ {TARGET_GET_RATIO}× oidc-provider (SQLite)"),
            measured: format!("{ratio:.2}× ({:.0} vs {:.0}/s)", a.per_sec(), b.per_sec()),
            met: ratio >= TARGET_GET_RATIO && a.errors == 0,
        });
    }
    for report in reports {
        let rss = report
            .refresh
            .iter()
            .map(|(_, mine, _)| pool(mine).rss_kib)
            .max()
            .unwrap_or(0);
        out.push(Verdict {
            name: format!(
                "RSS during refresh load ≤ {TARGET_RSS_MIB} MiB ({})",
                report.backend
            ),
            measured: format!("{:.1} MiB", mib(rss)),
            met: mib(rss) <= TARGET_RSS_MIB,
        });
        let errors: u64 = report
            .refresh
            .iter()
            .map(|(_, mine, _)| pool(mine).errors)
            .sum();
        out.push(Verdict {
            name: format!("every refresh chain of ours survives ({})", report.backend),
            measured: format!("{errors} broken"),
            met: errors == 0,
        });
    }
    match reports.iter().find(|r| r.backend == "PostgreSQL") {
        None => println!(
            "(PostgreSQL not measured: set BANLIEUE_BENCH_POSTGRES_URL or run `make \
             bench-issuer`; its target is not checked)\n"
        ),
        Some(postgres) => {
            for c in CONCURRENCY {
                let (on_sqlite, _) = at(sqlite, c);
                let (on_postgres, _) = at(postgres, c);
                let share = on_postgres.per_sec / on_sqlite.per_sec;
                out.push(Verdict {
                    name: format!("C = {c}: PostgreSQL throughput within 2× of SQLite"),
                    measured: format!(
                        "{:.0} vs {:.0}/s ({share:.2}×)",
                        on_postgres.per_sec, on_sqlite.per_sec
                    ),
                    met: share >= TARGET_POSTGRES_SHARE,
                });
            }
        }
    }
    out
}
