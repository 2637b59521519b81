//! Files the emulator writes: owner-only files, and the store's snapshot (written
//! atomically).

use std::path::PathBuf;

use crate::store::Snapshot;

/// Writes a file readable by its owner only (it holds a private key and a token).
pub(crate) fn write_private(path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

/// Writes the snapshot file atomically (a temporary file renamed); failures are logged.
pub(crate) fn write_snapshot(path: &PathBuf, snap: &Snapshot) {
    let tmp = path.with_extension("tmp");
    match serde_json::to_vec(snap) {
        Ok(bytes) => {
            if let Err(e) = write_private(&tmp, &bytes).and_then(|_| std::fs::rename(&tmp, path)) {
                tracing::warn!(path = %path.display(), error = %e, "snapshot not written");
            }
        }
        Err(e) => tracing::warn!(error = %e, "snapshot not serialised"),
    }
}
