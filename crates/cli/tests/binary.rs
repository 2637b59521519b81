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
    seed_for(config, issuer, "kubernetes", exp, rt)
}

/// A cached session of alice at `issuer` for `audience`.
fn seed_for(config: &Path, issuer: &str, audience: &str, exp: i64, rt: Option<&str>) -> Entry {
    let cache = Cache::at(config);
    cache.ensure_dirs().unwrap();
    let key = CacheKey {
        issuer: issuer.into(),
        client_id: "banlieue-cli".into(),
        audience: audience.into(),
    };
    let entry = Entry {
        issuer: issuer.into(),
        client_id: "banlieue-cli".into(),
        audience: audience.into(),
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
        let g = slot
            .lock(std::time::Duration::from_secs(1), |_| {})
            .await
            .unwrap();
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

/// An issuer URL on a loopback port that refuses connections: the socket is bound but
/// never listens, and keeping it (the second value) keeps any other test from taking the
/// port meanwhile.
fn dead_issuer() -> (String, socket2::Socket) {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let any_port = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    socket.bind(&any_port.into()).unwrap();
    let port = socket.local_addr().unwrap().as_socket().unwrap().port();
    (format!("http://127.0.0.1:{port}"), socket)
}

#[test]
fn token_prints_only_the_exec_credential_from_a_fresh_cache() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens there: a fresh cached token needs no network.
    let (issuer, _reserved) = dead_issuer();
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
    let (issuer, _reserved) = dead_issuer();
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
    let (issuer, _reserved) = dead_issuer();
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
    let (issuer, _reserved) = dead_issuer();
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
            let authorization = req
                .lines()
                .find_map(|l| l.strip_prefix("authorization: "))
                .unwrap_or("none");
            lines.push(format!(
                "{} with {authorization}",
                req.lines().next().unwrap_or_default()
            ));
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
    // Signed in for the console's own audience: that ID token is the bearer.
    let issuer = format!("{base}/");
    let session = seed_for(dir.path(), &issuer, "banlieue-console", now() + 600, None);
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
    let expected = format!("GET /kubeconfig HTTP/1.1 with Bearer {}", session.id_token);
    assert!(requests.iter().all(|l| *l == expected), "{requests:?}");
}

/// What a fake issuer answers for one path: status, content type, body.
type Route = (u16, &'static str, String);

/// A fake issuer on a loopback port, answering every request with `route(base, path)` until
/// the test process ends. Enough for discovery, the JWKS, a refused refresh, a kubeconfig.
fn fake_issuer(route: fn(&str, &str) -> Route) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let b = base.clone();
    std::thread::spawn(move || {
        for stream in l.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if head.is_empty() {
                    head = line;
                }
            }
            // Read the body so that closing does not reset the connection.
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let path = head.split(' ').nth(1).unwrap_or("/").to_string();
            let (status, content_type, body) = route(&b, &path);
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    base
}

/// Discovery (naming `base` as the issuer, RFC 9207 advertised), an empty JWKS, and a token
/// endpoint that refuses every grant with `invalid_grant` and a description carrying an
/// escape sequence.
fn refusing_issuer(base: &str, path: &str) -> Route {
    match path {
        "/.well-known/openid-configuration" => (
            200,
            "application/json",
            serde_json::json!({
                "issuer": base,
                "authorization_endpoint": format!("{base}/oidc/authorize"),
                "token_endpoint": format!("{base}/oidc/token"),
                "jwks_uri": format!("{base}/oidc/jwks"),
                "revocation_endpoint": format!("{base}/oidc/revoke"),
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "authorization_response_iss_parameter_supported": true,
            })
            .to_string(),
        ),
        "/oidc/jwks" => (200, "application/json", r#"{"keys":[]}"#.into()),
        "/oidc/token" => (
            400,
            "application/json",
            r#"{"error":"invalid_grant","error_description":"the user's session has ended;\u001b[31m sign in again"}"#.into(),
        ),
        "/kubeconfig" => (
            404,
            "text/html; charset=utf-8",
            // What the console's error page looks like.
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>banlieue console</title></head>\
             <body><main><h1>banlieue console</h1><p role=\"alert\">The console has no Kubernetes cluster configured, so there is no kubeconfig to download.</p></main></body></html>"
                .into(),
        ),
        _ => (404, "text/plain", "Not found.".into()),
    }
}

/// Runs `banlieue` with stderr piped until it says it is waiting for the sign-in (or ends),
/// then stops it. Returns the stderr lines.
fn stderr_until_waiting(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let mut c = Command::new(BIN);
    c.args(args)
        .env("BANLIEUE_CONFIG_DIR", config)
        .env("BANLIEUE_NO_BROWSER", "1")
        .env_remove("KUBERNETES_EXEC_INFO")
        .env_remove("BANLIEUE_ISSUER")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        let waiting = line.contains("waiting for the sign-in");
        lines.push(line);
        if waiting {
            break;
        }
    }
    let _ = child.kill();
    child.wait().unwrap();
    lines
}

const INTERACTIVE: &str = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}"#;

#[test]
fn a_refused_refresh_is_explained_before_signing_in_again() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = fake_issuer(refusing_issuer);
    seed(dir.path(), &issuer, now() - 10, Some("dead"));
    let lines = stderr_until_waiting(
        dir.path(),
        &["auth", "token", "--issuer", &issuer],
        &[("KUBERNETES_EXEC_INFO", INTERACTIVE)],
    );
    let sign_in = lines
        .iter()
        .position(|l| l.starts_with("banlieue: sign in at: "))
        .unwrap_or_else(|| panic!("no sign-in: {lines:?}"));
    let before = lines[..sign_in].join("\n");
    assert!(
        before.contains("invalid_grant: the user's session has ended; sign in again"),
        "{lines:?}"
    );
    assert!(before.contains("signing in again"), "{lines:?}");
    assert!(!before.contains('\u{1b}'), "{lines:?}");
}

#[test]
fn a_refused_refresh_outside_a_terminal_fails_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = fake_issuer(refusing_issuer);
    seed(dir.path(), &issuer, now() - 10, Some("dead"));
    // stdin is not a terminal (Command::output) and kubectl is not involved: no browser.
    let o = run(
        dir.path(),
        &["auth", "token", "--issuer", &issuer, "--login-timeout", "5"],
        &[],
    );
    assert!(!o.status.success());
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("invalid_grant: the user's session has ended; sign in again"),
        "{err}"
    );
    assert!(err.contains("banlieue auth login"), "{err}");
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn token_without_a_terminal_and_without_kubectl_fails_fast() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing cached: a sign-in would be needed, but nobody can answer a browser here.
    let issuer = fake_issuer(refusing_issuer);
    let o = run(
        dir.path(),
        &["auth", "token", "--issuer", &issuer, "--login-timeout", "5"],
        &[],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not an interactive terminal"), "{err}");
    assert!(
        err.contains(&format!("banlieue auth login --issuer {issuer}")),
        "{err}"
    );
}

#[test]
fn login_does_not_claim_a_browser_without_a_display() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = fake_issuer(refusing_issuer);
    let mut c_env = vec![("BANLIEUE_NO_BROWSER", "")];
    // A headless Linux session: no display, no BROWSER command, not WSL.
    for k in ["DISPLAY", "WAYLAND_DISPLAY", "BROWSER", "WSL_DISTRO_NAME"] {
        c_env.push((k, ""));
    }
    let lines = stderr_until_waiting(dir.path(), &["auth", "login", "--issuer", &issuer], &c_env);
    let all = lines.join("\n");
    assert!(all.contains("banlieue: sign in at: "), "{all}");
    if cfg!(not(any(target_os = "macos", target_os = "windows"))) {
        assert!(!all.contains("opened your browser"), "{all}");
        assert!(all.contains("no browser can be opened here"), "{all}");
    }
}

#[test]
fn a_second_login_says_it_waits_for_the_first() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let issuer = fake_issuer(refusing_issuer);
    let login = |stderr: std::process::Stdio| {
        Command::new(BIN)
            // Bounded: a second login that never said so gives up within 20 + 30 s.
            .args([
                "auth",
                "login",
                "--issuer",
                &issuer,
                "--login-timeout",
                "20",
            ])
            .env("BANLIEUE_CONFIG_DIR", dir.path())
            .env("BANLIEUE_NO_BROWSER", "1")
            .env_remove("KUBERNETES_EXEC_INFO")
            .env_remove("BANLIEUE_ISSUER")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap()
    };
    // The first holds the cache's lock while it waits for its browser sign-in.
    let mut first = login(std::process::Stdio::piped());
    let mut first_err = BufReader::new(first.stderr.take().unwrap()).lines();
    assert!(
        first_err
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("waiting for the sign-in")),
        "the first login never waited for its browser"
    );
    let mut second = login(std::process::Stdio::piped());
    let told = BufReader::new(second.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("another banlieue command"))
        .unwrap_or_default();
    for child in [&mut first, &mut second] {
        let _ = child.kill();
        child.wait().unwrap();
    }
    assert!(
        told.starts_with("banlieue: another banlieue command is signing in for this issuer")
            && told.contains("waiting up to"),
        "the second login said: {told:?}"
    );
}

#[test]
fn an_issuer_with_a_trailing_slash_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let base = fake_issuer(refusing_issuer);
    let given = format!("{base}/");
    let o = run(dir.path(), &["auth", "login", "--issuer", &given], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("exactly"), "{err}");
    assert!(
        err.contains(&format!(
            "try `--issuer {base}` (without the trailing slash)"
        )),
        "{err}"
    );
}

#[test]
fn kubeconfig_shows_what_the_console_said() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = fake_issuer(refusing_issuer);
    seed_for(dir.path(), &issuer, "banlieue-console", now() + 600, None);
    let o = run(
        dir.path(),
        &["auth", "kubeconfig", "--issuer", &issuer],
        &[],
    );
    assert!(!o.status.success());
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("the console answered 404: The console has no Kubernetes cluster configured, so there is no kubeconfig to download."),
        "{err}"
    );
    assert!(!err.contains('<'), "{err}");
}

#[test]
fn status_with_nothing_cached_fails() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["auth", "status"],
        vec!["auth", "status", "--issuer", "https://console.example.org"],
    ] {
        let o = run(dir.path(), &args, &[]);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("banlieue auth login"), "{err}");
    }
}

#[test]
fn a_given_config_directory_keeps_its_permissions() {
    let dir = tempfile::tempdir().unwrap();
    // A shared directory with the sticky bit, like /tmp: used, not changed.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (issuer, _reserved) = dead_issuer();
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
