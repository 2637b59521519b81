//! The names of the site's files as the build wrote them. With `hash-files` (the
//! workspace's Cargo.toml) cargo-leptos puts each file's content hash in its name
//! (`banlieue-console.<hash>.css`, …) and writes the hashes to [`HASH_FILE`] beside the
//! server's binary, where Leptos' `HydrationScripts` reads those of the script and the
//! wasm. The stylesheet is ours to link, on pages and on error documents alike.

use std::path::PathBuf;

/// The file cargo-leptos writes the hashes to, beside the server's binary: the default of
/// its `hash-file-name`, which Leptos' `LeptosOptions::hash_file` assumes too. One line
/// per file, `<extension>: <hash>`.
pub const HASH_FILE: &str = "hash.txt";

/// The stylesheet's name before hashing (`<site-pkg-dir>/<output-name>.css`).
const STYLESHEET_STEM: &str = "/pkg/banlieue-console";

/// Where the build's hashes are: beside the running binary. `None` where there is no
/// binary to ask (the browser).
pub fn hash_file() -> Option<PathBuf> {
    Some(std::env::current_exe().ok()?.parent()?.join(HASH_FILE))
}

/// The stylesheet's path, `/pkg/banlieue-console.<hash>.css` when the build hashed the
/// file names, else `/pkg/banlieue-console.css`. Read on each call, as Leptos reads the
/// hashes of the script and the wasm on each page.
pub fn stylesheet() -> String {
    let hashes = hash_file().and_then(|file| std::fs::read_to_string(file).ok());
    stylesheet_path(hashes.as_deref())
}

/// The stylesheet's path given the hash file's text (`None`: no hashing).
fn stylesheet_path(hashes: Option<&str>) -> String {
    match hashes.and_then(|hashes| hash_of(hashes, "css")) {
        Some(hash) => format!("{STYLESHEET_STEM}.{hash}.css"),
        None => format!("{STYLESHEET_STEM}.css"),
    }
}

/// The hash that `hashes` (the hash file's lines) gives the file ending in `extension`.
fn hash_of<'a>(hashes: &'a str, extension: &str) -> Option<&'a str> {
    hashes.lines().find_map(|line| {
        let (file, hash) = line.split_once(':')?;
        (file.trim() == extension && !hash.trim().is_empty()).then(|| hash.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stylesheet_takes_the_hash_the_build_wrote() {
        let hashes = "js: Jh2tJ1QPsXyOdzjFvk5sFA\nwasm: 7mJ3VbbYBzoyBBmH_JFqmA\ncss: kq1fX2kqJZ5Zb0o9oFY6dw\n";
        assert_eq!(
            stylesheet_path(Some(hashes)),
            "/pkg/banlieue-console.kq1fX2kqJZ5Zb0o9oFY6dw.css"
        );
    }

    #[test]
    fn without_hashes_the_stylesheet_keeps_its_name() {
        for hashes in [
            None,
            Some(""),
            Some("js: abc\nwasm: def\n"),
            Some("css:  \n"),
        ] {
            assert_eq!(
                stylesheet_path(hashes),
                "/pkg/banlieue-console.css",
                "{hashes:?}"
            );
        }
    }
}
