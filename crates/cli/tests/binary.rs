//! Runs the real `banlieue` binary: stdout discipline, exit codes, cache use without network,
//! the transport rule, `kubeconfig` against a loopback HTTP server, `status`, `logout`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use banlieue_cli::cache::{Cache, CacheKey, Entry};

const BIN: &str = env!("CARGO_BIN_EXE_banlieue");

fn run(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("BANLIEUE_CONFIG_DIR", config)
        .env("BANLIEUE_NO_BROWSER", "1")
        .env_remove("KUBERNETES_EXEC_INFO")
        .env_remove("BANLIEUE_ISSUER");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn seed(config: &Path, issuer: &str, exp: i64, rt: Option<&str>) -> Entry {
    let cache = Cache::at(config);
    cache.ensure_dirs().unwrap();
    let key = CacheKey {
        issuer: issuer.into(),
        client_id: "banlieue-cli".into(),
        audience: "kubernetes".into(),
    };
    let entry = Entry {
        issuer: issuer.into(),
        client_id: "banlieue-cli".into(),
        audience: "kubernetes".into(),
        id_token: "eyJhbGciOiJSUzI1NiJ9.e30.c2ln".into(),
        expires_at: exp,
        refresh_token: rt.map(Into::into),
        sub: "alice".into(),
        groups: vec!["admin".into(), "dev".into()],
    };
    let slot = cache.slot(&key);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let g = slot.lock(std::time::Duration::from_secs(1)).await.unwrap();
        g.write(&entry).unwrap();
    });
    entry
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A loopback port with nothing listening (bound, then closed).
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn token_prints_only_the_exec_credential_from_a_fresh_cache() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens there: a fresh cached token needs no network.
    let issuer = format!("http://127.0.0.1:{}", dead_port());
    let exp = now() + 120;
    let e = seed(dir.path(), &issuer, exp, Some("rt"));
    let o = run(dir.path(), &["auth", "token", "--issuer", &issuer], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["apiVersion"], "client.authentication.k8s.io/v1");
    assert_eq!(v["kind"], "ExecCredential");
    assert_eq!(v["status"]["token"], e.id_token);
    let ts =
        chrono::DateTime::parse_from_rfc3339(v["status"]["expirationTimestamp"].as_str().unwrap())
            .unwrap();
    assert_eq!(ts.timestamp(), exp);
}

#[test]
fn token_not_interactive_with_nothing_cached_fails_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let given = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o7777;
    let issuer = format!("http://127.0.0.1:{}", dead_port());
    let info = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}"#;
    let o = run(
        dir.path(),
        &["auth", "token", "--issuer", &issuer],
        &[("KUBERNETES_EXEC_INFO", info)],
    );
    assert!(!o.status.success());
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("banlieue auth login"), "{err}");
    // The CLI's own directory is private; the given one is left as it was.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&dir.path().join("sessions")), 0o700);
    assert_eq!(mode(dir.path()), given);
}

#[test]
fn plain_http_is_refused_except_to_loopback() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in ["login", "token", "kubeconfig"] {
        let o = run(
            dir.path(),
            &["auth", cmd, "--issuer", "http://console.example.org"],
            &[],
        );
        assert!(!o.status.success());
        assert!(o.stdout.is_empty());
        assert!(stderr(&o).contains("plain http"), "{cmd}: {}", stderr(&o));
    }
}

#[test]
fn issuer_is_required() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["auth", "token"], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--issuer"));
}

#[test]
fn unreachable_issuer_gives_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = format!("http://127.0.0.1:{}", dead_port());
    seed(dir.path(), &issuer, now() - 10, Some("rt"));
    let o = run(dir.path(), &["auth", "token", "--issuer", &issuer], &[]);
    assert!(!o.status.success());
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.starts_with("banlieue: error: discovery"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn status_shows_the_session_without_token_text() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = "https://console.example.org";
    let e = seed(dir.path(), issuer, now() + 100, Some("secret-refresh"));
    for args in [
        vec!["auth", "status", "--issuer", issuer],
        vec!["auth", "status"],
    ] {
        let o = run(dir.path(), &args, &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8(o.stdout).unwrap();
        for want in ["alice", "admin, dev", "kubernetes", "available", issuer] {
            assert!(out.contains(want), "{want} missing in {out}");
        }
        assert!(!out.contains(&e.id_token) && !out.contains("secret-refresh"));
    }
    let o = run(
        dir.path(),
        &["auth", "status", "--issuer", "https://other.example.org"],
        &[],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not signed in"));
}

#[test]
fn logout_deletes_even_when_the_issuer_is_unreachable_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = format!("http://127.0.0.1:{}", dead_port());
    seed(dir.path(), &issuer, now() + 100, Some("rt"));
    let o = run(dir.path(), &["auth", "logout", "--issuer", &issuer], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("removed the local session"), "{err}");
    assert!(Cache::at(dir.path()).list().is_empty());
    let o = run(dir.path(), &["auth", "logout", "--issuer", &issuer], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Serves one fixed kubeconfig on a loopback port for `n` requests, then stops.
fn serve_kubeconfig(
    body: &'static str,
    n: usize,
) -> (String, std::thread::JoinHandle<Vec<String>>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for _ in 0..n {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let k = s.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..k]).into_owned();
            lines.push(req.lines().next().unwrap_or_default().to_string());
            write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: application/yaml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        lines
    });
    (base, h)
}

#[test]
fn kubeconfig_to_stdout_and_to_a_private_file() {
    const YAML: &str = "apiVersion: v1\nkind: Config\n";
    let dir = tempfile::tempdir().unwrap();
    let (base, server) = serve_kubeconfig(YAML, 3);
    let issuer = format!("{base}/");
    let o = run(
        dir.path(),
        &["auth", "kubeconfig", "--issuer", &issuer],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, YAML.as_bytes());

    let out = dir.path().join("kc.yaml");
    let out_s = out.to_str().unwrap();
    let o = run(
        dir.path(),
        &["auth", "kubeconfig", "--issuer", &issuer, "--out", out_s],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), YAML);
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );

    std::fs::write(&out, "mine").unwrap();
    let o = run(
        dir.path(),
        &["auth", "kubeconfig", "--issuer", &issuer, "--out", out_s],
        &[],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
    let o = run(
        dir.path(),
        &[
            "auth",
            "kubeconfig",
            "--issuer",
            &issuer,
            "--out",
            out_s,
            "--force",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), YAML);
    let requests = server.join().unwrap();
    assert!(
        requests.iter().all(|l| l == "GET /kubeconfig HTTP/1.1"),
        "{requests:?}"
    );
}

#[test]
fn a_given_config_directory_keeps_its_permissions() {
    let dir = tempfile::tempdir().unwrap();
    // A shared directory with the sticky bit, like /tmp: used, not changed.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let issuer = format!("http://127.0.0.1:{}", dead_port());
    seed(&shared, &issuer, now() + 120, Some("rt"));
    let o = run(&shared, &["auth", "token", "--issuer", &issuer], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&shared), 0o1777);
    assert_eq!(mode(&shared.join("sessions")), 0o700);

    // Writable by others without the sticky bit: refused, and still not changed.
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = run(&open, &["auth", "token", "--issuer", &issuer], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("other users can write to it"), "{err}");
    assert_eq!(mode(&open), 0o777);
}
