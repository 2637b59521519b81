//! The `banlieue-console` binary as an operator meets it: the first start, the admin
//! bootstrap command and configuration errors.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The binary with the database and a site (an empty `pkg` directory) in `db_dir`.
fn console(db_dir: &std::path::Path) -> Command {
    let site = db_dir.join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_banlieue-console"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LEPTOS_SITE_ROOT", site)
        .env(
            "BANLIEUE_DATABASE_URL",
            format!("sqlite://{}/console.db", db_dir.display()),
        )
        .env("BANLIEUE_LISTEN", "127.0.0.1:0");
    command
}

/// Starts `serve`, waits until it logs that it serves, stops it with SIGTERM and returns
/// everything it wrote to stderr.
fn serve_once(db_dir: &std::path::Path) -> String {
    let mut child: Child = console(db_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    // Drain stdout until the process exits, so its logging never hits a closed pipe.
    let drain = std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if line.contains("serving") {
                let _ = started_tx.send(());
            }
        }
    });
    started_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the console did not start serving");
    let terminated = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    let output = child.wait_with_output().unwrap();
    drain.join().unwrap();
    assert!(
        output.status.success(),
        "graceful shutdown exits 0: {:?}",
        output.status
    );
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn the_first_start_prints_the_admin_password_once_and_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = serve_once(dir.path());
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr: {stderr:?}");
    let password = lines[0].strip_prefix("initial admin password: ").unwrap();
    assert_eq!(password.len(), 24);
    assert!(password.chars().all(|c| c.is_ascii_alphanumeric()));
    let db = std::fs::read(dir.path().join("console.db")).unwrap();
    assert!(
        !db.windows(password.len()).any(|w| w == password.as_bytes()),
        "the password is stored nowhere in clear"
    );

    assert_eq!(serve_once(dir.path()), "", "a second start prints nothing");

    let bootstrap = console(dir.path())
        .args(["admin", "bootstrap"])
        .output()
        .unwrap();
    assert!(!bootstrap.status.success());
    let message = String::from_utf8(bootstrap.stderr).unwrap();
    assert!(
        message.contains("an enabled admin already exists"),
        "{message}"
    );
}

#[test]
fn admin_bootstrap_creates_the_first_admin_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let output = console(dir.path())
        .args(["admin", "bootstrap"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("initial admin password: "), "{stderr}");
    assert_eq!(
        serve_once(dir.path()),
        "",
        "serve sees the admin and prints nothing"
    );
}

#[test]
fn configuration_errors_are_actionable() {
    let dir = tempfile::tempdir().unwrap();
    let bad_listen = console(dir.path())
        .env("BANLIEUE_LISTEN", "localhost")
        .arg("check-config")
        .output()
        .unwrap();
    assert!(!bad_listen.status.success());
    assert!(String::from_utf8_lossy(&bad_listen.stderr).contains("BANLIEUE_LISTEN"));

    let missing_dir = console(dir.path())
        .env("BANLIEUE_DATABASE_URL", "sqlite://no/such/dir/console.db")
        .arg("check-config")
        .output()
        .unwrap();
    assert!(!missing_dir.status.success());
    let message = String::from_utf8_lossy(&missing_dir.stderr);
    assert!(
        message.contains("no/such/dir") && message.contains("does not exist"),
        "{message}"
    );
    assert!(!message.contains("panicked"), "{message}");

    // Checking changes nothing: no database file appears, none is migrated.
    let ok = console(dir.path()).arg("check-config").output().unwrap();
    assert!(ok.status.success(), "{ok:?}");
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(said.contains("configuration is valid"), "{said}");
    assert!(said.contains("will be created at first start"), "{said}");
    assert!(!dir.path().join("console.db").exists());

    // A database file others may read (here the umask's 0644) is refused, saying how to fix.
    let file = dir.path().join("console.db");
    std::fs::File::create(&file).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let exposed = console(dir.path()).arg("check-config").output().unwrap();
    assert!(!exposed.status.success());
    let message = String::from_utf8_lossy(&exposed.stderr);
    assert!(message.contains("chmod 600"), "{message}");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let empty = console(dir.path()).arg("check-config").output().unwrap();
    let said = String::from_utf8_lossy(&empty.stdout);
    assert!(said.contains("migrations to apply at start"), "{said}");
    assert_eq!(
        std::fs::metadata(dir.path().join("console.db"))
            .unwrap()
            .len(),
        0,
        "nothing was written"
    );

    assert!(
        console(dir.path())
            .args(["admin", "bootstrap"])
            .status()
            .unwrap()
            .success()
    );
    let current = console(dir.path()).arg("check-config").output().unwrap();
    let said = String::from_utf8_lossy(&current.stdout);
    assert!(said.ends_with("database reachable, no tenants\n"), "{said}");
    assert!(said.contains("will be created at first start"), "{said}");
    // The issuer's first start makes the key that seals the signing keys, beside the
    // database, for the console alone; the keys in the database are sealed with it.
    let resealed = console(dir.path())
        .args(["admin", "reseal-signing-keys"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&resealed.stdout);
    assert!(
        resealed.status.success() && said.contains("(0 sealed again)"),
        "{resealed:?}"
    );
    let sealed = console(dir.path()).arg("check-config").output().unwrap();
    let said = String::from_utf8_lossy(&sealed.stdout);
    assert!(said.contains("(opens the 1 stored signing keys)"), "{said}");
    let kek = dir.path().join("key-encryption-key");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&kek).unwrap().permissions())
            & 0o777,
        0o600
    );
    // Without it, the console makes no new one the sealed keys would not open.
    std::fs::remove_file(&kek).unwrap();
    let refused = console(dir.path())
        .args(["admin", "rotate-signing-key"])
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && message.contains("is missing, and the database holds 1 signing key(s) sealed"),
        "{message}"
    );
    assert!(!kek.exists(), "no key was made");
    // Another key-encryption key cannot open them: the console says which key is wrong.
    let other = dir.path().join("other-kek");
    std::fs::write(&other, "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=\n").unwrap();
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let refused = console(dir.path())
        .args(["admin", "rotate-signing-key"])
        .env("BANLIEUE_KEY_ENCRYPTION_KEY_FILE", &other)
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && message.contains("does not open with the configured key-encryption keys"),
        "{message}"
    );
    // check-config says so before a start would.
    let refused = console(dir.path())
        .arg("check-config")
        .env("BANLIEUE_KEY_ENCRYPTION_KEY_FILE", &other)
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && message.contains("sealed under another key-encryption key than")
            && message.contains("does not open with the configured key-encryption keys"),
        "{message}"
    );
    let refused = console(dir.path()).arg("check-config").output().unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && message.contains("is missing, and the database holds 1"),
        "{message}"
    );
}

#[test]
fn check_config_refuses_what_serve_could_not_use() {
    let dir = tempfile::tempdir().unwrap();
    // A filter RUST_LOG cannot be would be ignored in silence: every command refuses it.
    let bad_filter = console(dir.path())
        .env("RUST_LOG", "info,sqlx=loud")
        .arg("check-config")
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&bad_filter.stderr);
    assert!(
        !bad_filter.status.success()
            && message.contains("RUST_LOG=\"info,sqlx=loud\" is not a log filter"),
        "{message}"
    );
    // A relative site root that is not there (another working directory): pages without
    // styles or script. check-config refuses it, naming the working directory.
    let no_site = console(dir.path())
        .env("LEPTOS_SITE_ROOT", "site-elsewhere")
        .current_dir(dir.path())
        .arg("check-config")
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&no_site.stderr);
    assert!(
        !no_site.status.success()
            && message
                .contains("LEPTOS_SITE_ROOT site-elsewhere, relative to the working directory")
            && message.contains("has no pkg directory"),
        "{message}"
    );
}

#[test]
fn the_tenants_are_checked_strictly_by_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let check = |env: &[(&str, &str)]| {
        let output = console(dir.path())
            .envs(env.iter().copied())
            .arg("check-config")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    };
    let file = dir.path().join("tenants.yaml");
    let file_text = file.to_str().unwrap();
    let refused = |env: &[(&str, &str)], needle: &str| {
        let (ok, text) = check(env);
        assert!(!ok && text.contains(needle), "{env:?}: {text}");
    };
    // Settings the chosen source does not use, and what a source needs.
    refused(
        &[("BANLIEUE_TENANTS_FILE", file_text)],
        "which does not use it",
    );
    refused(
        &[("BANLIEUE_TENANTS_SOURCE", "file")],
        "BANLIEUE_TENANTS_FILE / --tenants-file is not set",
    );
    refused(
        &[
            ("BANLIEUE_TENANTS_SOURCE", "kubernetes"),
            ("BANLIEUE_TENANTS_FILE", file_text),
        ],
        "kubernetes, which does not use it",
    );
    refused(
        &[("BANLIEUE_TENANTS_SOURCE", "kubernetes")],
        "the console has no cluster",
    );
    let source = [
        ("BANLIEUE_TENANTS_SOURCE", "file"),
        ("BANLIEUE_TENANTS_FILE", file_text),
    ];
    refused(&source, "cannot read the tenants file");
    let document = |extra: &str| {
        format!(
            "apiVersion: console.banlieue.io/v1alpha1\nkind: ConsoleTenant\nmetadata:\n  name: acme\n\
             spec:\n  tenantId: acme\n  oidc:\n    issuer: https://idp.acme.example\n{extra}\
             \n    tenantClaim: tenant\n    usernameClaim: sub\n    rolesClaim: roles\n\
             \n  defaultRole: viewer\n  allowedRoles: [viewer]\n  namespaces: [acme]\n"
        )
    };
    std::fs::write(
        &file,
        document("    jwksUrl: https://idp.acme.example/keys"),
    )
    .unwrap();
    refused(&source, "spec.oidc.jwksUrl: unknown field");
    std::fs::write(&file, document("    audience: banlieue-console")).unwrap();
    let mut with_refresh = source.to_vec();
    with_refresh.push(("BANLIEUE_TENANTS_REFRESH", "1"));
    refused(
        &with_refresh,
        "BANLIEUE_TENANTS_REFRESH: 1 is outside 5–3600 seconds",
    );

    let (ok, text) = check(&source);
    assert!(
        ok && text.contains("1 tenants from the tenants file"),
        "{text}"
    );
    // No audience: accepted, with a warning naming the tenant.
    std::fs::write(&file, document("")).unwrap();
    let (ok, text) = check(&source);
    assert!(
        ok && text.contains("tenant acme has no oidc.audience"),
        "{text}"
    );
}

#[test]
fn operators_manage_users_from_the_shell_under_the_same_rules() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| console(dir.path()).args(args).output().unwrap();
    assert!(run(&["admin", "bootstrap"]).status.success());

    let created = run(&[
        "admin",
        "user",
        "create",
        "alice",
        "--roles",
        "developer,viewer",
        "--email",
        "a@x.test",
    ]);
    assert!(created.status.success(), "{created:?}");
    let stderr = String::from_utf8(created.stderr).unwrap();
    let password = stderr.trim().strip_prefix("password for alice: ").unwrap();
    assert_eq!(password.len(), 24);

    let listed = String::from_utf8(run(&["admin", "user", "list"]).stdout).unwrap();
    assert_eq!(
        listed,
        "admin\tadmin\tmust-change-password\nalice\tdeveloper,viewer\tmust-change-password\n"
    );

    let taken = run(&["admin", "user", "create", "alice"]);
    assert!(!taken.status.success());
    assert!(String::from_utf8_lossy(&taken.stderr).contains("already exists"));
    let bad_role = run(&["admin", "user", "create", "bob", "--roles", "Not A Role"]);
    assert!(!bad_role.status.success());
    assert!(String::from_utf8_lossy(&bad_role.stderr).contains("invalid roles"));

    assert!(run(&["admin", "user", "disable", "alice"]).status.success());
    let listed =
        String::from_utf8(run(&["admin", "user", "list", "--search", "ali"]).stdout).unwrap();
    assert_eq!(listed, "alice\tdeveloper,viewer\tdisabled\n");
    assert!(run(&["admin", "user", "enable", "alice"]).status.success());
    let last_admin = run(&["admin", "user", "disable", "admin"]);
    assert!(!last_admin.status.success());
    assert!(String::from_utf8_lossy(&last_admin.stderr).contains("last enabled admin"));

    let reset = run(&["admin", "user", "set-password", "alice"]);
    assert!(reset.status.success());
    let new_password = String::from_utf8(reset.stderr).unwrap();
    assert!(new_password.starts_with("password for alice: "));
    assert_ne!(
        new_password
            .trim()
            .strip_prefix("password for alice: ")
            .unwrap(),
        password
    );
    assert!(
        run(&["admin", "user", "revoke-sessions", "alice"])
            .status
            .success()
    );
    let missing = run(&["admin", "user", "revoke-sessions", "nobody"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no such user"));
}
