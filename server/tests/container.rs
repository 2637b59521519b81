//! The container recipe (`Containerfile`) against the repository and the chart: no image
//! engine runs here, so this is what holds it true. Every file it copies from the
//! repository exists, the build makes what the run-time stage copies (the server binary,
//! the site directory cargo-leptos writes), and the image runs as the chart's user, on
//! the chart's port, with the site where the server looks for it.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The recipe's instructions as `(INSTRUCTION, arguments)`, continuation lines joined and
/// comments left out.
fn instructions() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repository().join("Containerfile")).unwrap();
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let (instruction, arguments) = pending.split_once(' ').unwrap();
        out.push((instruction.to_owned(), arguments.trim().to_owned()));
        pending.clear();
    }
    assert!(pending.is_empty(), "a continued line ends the recipe");
    out
}

/// The arguments of every `instruction` in the last stage (the run-time image).
fn final_stage(instruction: &str) -> Vec<String> {
    let all = instructions();
    let start = all.iter().rposition(|(i, _)| i == "FROM").unwrap();
    all[start..]
        .iter()
        .filter(|(i, _)| i == instruction)
        .map(|(_, a)| a.clone())
        .collect()
}

fn values() -> Value {
    let text =
        std::fs::read_to_string(repository().join("charts/banlieue-console/values.yaml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// `[workspace.metadata.leptos]`'s `key` in the root Cargo.toml.
fn leptos_metadata(key: &str) -> String {
    let text = std::fs::read_to_string(repository().join("Cargo.toml")).unwrap();
    let section = text.split("[[workspace.metadata.leptos]]").nth(1).unwrap();
    section
        .lines()
        .find_map(|line| {
            let (k, v) = line.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| panic!("no {key} in [[workspace.metadata.leptos]]"))
}

/// `KEY=value` pairs of the run-time stage's `ENV`.
fn environment() -> Vec<(String, String)> {
    final_stage("ENV")
        .iter()
        .flat_map(|env| {
            env.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .map(|pair| {
            let (k, v) = pair.split_once('=').expect("ENV KEY=value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn env(key: &str) -> String {
    environment()
        .into_iter()
        .find_map(|(k, v)| (k == key).then_some(v))
        .unwrap_or_else(|| panic!("the image sets no {key}"))
}

/// `(source, destination)` of each `COPY --from=build` into the run-time image, the
/// source relative to the build stage's `WORKDIR`.
fn copied_from_build() -> Vec<(String, String)> {
    let workdir = instructions()
        .into_iter()
        .filter(|(i, _)| i == "WORKDIR")
        .map(|(_, a)| a)
        .next_back()
        .unwrap();
    final_stage("COPY")
        .iter()
        .filter_map(|args| args.strip_prefix("--from=build "))
        .map(|args| {
            let (source, destination) = args.split_once(' ').unwrap();
            let source = source
                .strip_prefix(&format!("{workdir}/"))
                .unwrap_or_else(|| panic!("{source} is outside the build's WORKDIR"));
            (source.to_owned(), destination.to_owned())
        })
        .collect()
}

#[test]
fn the_scripts_and_files_the_build_uses_exist() {
    let root = repository();
    for (instruction, arguments) in instructions() {
        if instruction == "RUN" {
            for word in arguments.split_whitespace() {
                if word.starts_with("scripts/") {
                    assert!(root.join(word).is_file(), "RUN {word}: no such script");
                }
            }
        }
    }
    let install = std::fs::read_to_string(root.join("scripts/install-tools")).unwrap();
    assert!(
        install.contains("--build-only)"),
        "install-tools takes --build-only"
    );
    for path in [
        "package.json",
        "package-lock.json",
        "Cargo.lock",
        "style/main.css",
    ] {
        assert!(root.join(path).is_file(), "{path}");
    }
    assert!(
        root.join(leptos_metadata("assets-dir")).is_dir(),
        "the assets directory"
    );
    // What the build stage must not be sent (the build would copy gigabytes).
    let ignored = std::fs::read_to_string(root.join(".containerignore")).unwrap();
    for path in ["target/", "**/node_modules/", ".git/"] {
        assert!(
            ignored.lines().any(|l| l == path),
            ".containerignore: {path}"
        );
    }
    assert_eq!(
        std::fs::read_link(root.join(".dockerignore")).unwrap(),
        Path::new(".containerignore")
    );
}

#[test]
fn the_image_holds_the_production_server_and_the_site() {
    let build = instructions()
        .into_iter()
        .filter(|(i, _)| i == "RUN")
        .map(|(_, a)| a)
        .collect::<Vec<_>>();
    let binary = leptos_metadata("bin-exe-name");
    assert!(
        build.iter().any(|run| run.contains("cargo build --release")
            && run.contains("-p server")
            && run.contains("--no-default-features")
            && run.contains(&format!("--bin {binary}"))),
        "the server is built in release without the dev-cluster feature: {build:?}"
    );
    assert!(
        build.iter().any(
            |run| run.contains("cargo leptos build --release --frontend-only")
                && run.contains("--precompress")
        ),
        "the site is built, with brotli and gzip copies of its files: {build:?}"
    );
    let copied = copied_from_build();
    let site = leptos_metadata("site-root");
    assert_eq!(
        copied.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        [
            format!("target/release/{binary}"),
            "target/release/hash.txt".to_owned(),
            site
        ],
        "the image takes the binary, the hashes of the site's file names and the site"
    );
    // Leptos looks for the hashes beside the binary (app::assets::hash_file).
    assert_eq!(
        Path::new(&copied[1].1),
        Path::new(&copied[0].1)
            .with_file_name(app::assets::HASH_FILE)
            .as_path()
    );
    // The server reads the site from LEPTOS_SITE_ROOT; the binary is the entry point.
    assert_eq!(env("LEPTOS_SITE_ROOT"), copied[2].1);
    assert_eq!(
        final_stage("ENTRYPOINT"),
        [format!(r#"["{}"]"#, copied[0].1)]
    );
    assert_eq!(final_stage("CMD"), [r#"["serve"]"#]);
    // The Cargo target the build names is the one the tests run.
    assert!(
        Path::new(env!("CARGO_BIN_EXE_banlieue-console")).ends_with(&binary),
        "bin-exe-name names the server's binary"
    );
}

#[test]
fn the_image_runs_as_the_charts_user_on_the_charts_port() {
    let values = values();
    let security = &values["podSecurityContext"];
    let user = final_stage("USER");
    assert_eq!(
        user,
        [format!(
            "{}:{}",
            security["runAsUser"].as_u64().unwrap(),
            security["runAsGroup"].as_u64().unwrap()
        )]
    );
    assert!(!user[0].starts_with("0:"), "not root");
    let port = values["containerPort"].as_u64().unwrap().to_string();
    assert_eq!(final_stage("EXPOSE"), [port.as_str()]);
    assert_eq!(env("BANLIEUE_LISTEN"), format!("0.0.0.0:{port}"));
    let base = final_stage("FROM");
    assert!(
        base[0].starts_with("gcr.io/distroless/cc-debian12"),
        "a distroless run-time image: {base:?}"
    );
}
