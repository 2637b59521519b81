//! Writes the CRD manifests generated from the Rust types into
//! `charts/banlieue-console/crds/` (or the directory given as the only argument).
//!
//! `cargo run -p banlieue-cluster --bin crdgen`

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/banlieue-console/crds")
        });
    std::fs::create_dir_all(&dir)?;
    for (file, yaml) in cluster::crd::crd_manifests()? {
        let path = dir.join(file);
        std::fs::write(&path, yaml)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
