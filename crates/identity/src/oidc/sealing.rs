//! The issuer's private signing keys at rest: sealed with AES-256-GCM (aws-lc-rs) under a
//! key-encryption key (KEK) that lives outside the database, so a copy of the database
//! alone (a backup, a stolen file) signs nothing.
//!
//! A sealed key is `BKE1 ‖ KEK id (8 bytes) ‖ nonce (12) ‖ ciphertext ‖ tag (16)`, with the
//! key's `kid` as additional authenticated data (a sealed key moved to another row does not
//! open). The KEK id is the first 8 bytes of SHA-256 of the KEK: it says which KEK sealed a
//! key, so a rotation can keep the previous KEK for opening until every key is sealed again
//! under the current one.

use std::io::Write;
use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::digest::{SHA256, digest};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

const MAGIC: &[u8; 4] = b"BKE1";
const ID_LEN: usize = 8;
/// Bytes of a KEK (AES-256).
pub const KEK_LEN: usize = 32;

/// What can go wrong with the key-encryption key or a sealed key.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The KEK file cannot be read, is not 32 bytes in base64, or others may read it.
    #[error("key-encryption key {path}: {reason}")]
    KeyFile { path: String, reason: String },
    /// A sealed key does not open: another KEK sealed it (and it is not configured as
    /// the previous one), or it was altered.
    #[error("signing key {kid} does not open with the configured key-encryption keys: {reason}")]
    Open { kid: String, reason: String },
    /// The system's random source or the cipher failed.
    #[error("sealing a signing key failed")]
    Seal,
}

struct Kek {
    id: [u8; ID_LEN],
    key: LessSafeKey,
}

impl Kek {
    fn new(bytes: &[u8; KEK_LEN]) -> Self {
        let mut id = [0u8; ID_LEN];
        id.copy_from_slice(&digest(&SHA256, bytes).as_ref()[..ID_LEN]);
        let key = UnboundKey::new(&AES_256_GCM, bytes).expect("a 32-byte AES-256 key");
        Self {
            id,
            key: LessSafeKey::new(key),
        }
    }
}

/// The KEK that seals, and optionally the previous one, which only opens (during a
/// rotation).
pub struct KeyEncryption {
    current: Kek,
    previous: Option<Kek>,
}

impl std::fmt::Debug for KeyEncryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyEncryption").finish_non_exhaustive()
    }
}

/// What opening a sealed key gave.
pub(crate) struct Opened {
    /// The PKCS#8 DER private key.
    pub pkcs8: Vec<u8>,
    /// Sealed under another KEK than the current one (or not sealed, from before
    /// sealing): seal it again.
    pub stale: bool,
}

impl KeyEncryption {
    /// From raw KEKs.
    pub fn new(current: &[u8; KEK_LEN], previous: Option<&[u8; KEK_LEN]>) -> Self {
        Self {
            current: Kek::new(current),
            previous: previous.map(Kek::new),
        }
    }

    /// Reads the KEK files: each holds 32 random bytes in base64 (what
    /// [`KeyEncryption::create_file`] writes, or `head -c 32 /dev/urandom | base64`), and
    /// only its owner may read it.
    ///
    /// Errors: [`SealError::KeyFile`] naming the file and what is wrong.
    pub fn from_files(current: &Path, previous: Option<&Path>) -> Result<Self, SealError> {
        let current = read_kek(current)?;
        let previous = previous.map(read_kek).transpose()?;
        Ok(Self::new(&current, previous.as_ref()))
    }

    /// Writes a new random KEK to `path` (which must not exist), mode 0600.
    ///
    /// Errors: [`SealError::KeyFile`].
    pub fn create_file(path: &Path) -> Result<(), SealError> {
        use std::os::unix::fs::OpenOptionsExt;
        let failed = |reason: String| SealError::KeyFile {
            path: path.display().to_string(),
            reason,
        };
        let mut bytes = [0u8; KEK_LEN];
        aws_lc_rs::rand::fill(&mut bytes).map_err(|_| failed("no random bytes".into()))?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| failed(e.to_string()))?;
        writeln!(file, "{}", STANDARD.encode(bytes))
            .and_then(|()| file.sync_all())
            .map_err(|e| failed(e.to_string()))
    }

    /// Seals `pkcs8`, the private key of `kid`, under the current KEK.
    ///
    /// Errors: [`SealError::Seal`].
    pub(crate) fn seal(&self, kid: &str, pkcs8: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|_| SealError::Seal)?;
        let mut in_out = pkcs8.to_vec();
        self.current
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(kid.as_bytes()),
                &mut in_out,
            )
            .map_err(|_| SealError::Seal)?;
        let mut sealed = Vec::with_capacity(MAGIC.len() + ID_LEN + NONCE_LEN + in_out.len());
        sealed.extend_from_slice(MAGIC);
        sealed.extend_from_slice(&self.current.id);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&in_out);
        Ok(sealed)
    }

    /// Whether the stored key `kid` opens with the configured KEKs, as start-up needs of
    /// every stored key (`check-config` asks before a start would fail). A plain PKCS#8
    /// key from before sealing opens.
    ///
    /// Errors: [`SealError::Open`].
    pub fn check_opens(&self, kid: &str, stored: &[u8]) -> Result<(), SealError> {
        self.open(kid, stored).map(drop)
    }

    /// Opens what [`KeyEncryption::seal`] made for `kid` with the current or the previous
    /// KEK. A key stored before sealing existed (plain PKCS#8) is returned as it is,
    /// marked stale.
    ///
    /// Errors: [`SealError::Open`].
    pub(crate) fn open(&self, kid: &str, stored: &[u8]) -> Result<Opened, SealError> {
        let failed = |reason: &str| SealError::Open {
            kid: kid.to_owned(),
            reason: reason.to_owned(),
        };
        let Some(rest) = stored.strip_prefix(MAGIC) else {
            return Ok(Opened {
                pkcs8: stored.to_vec(),
                stale: true,
            });
        };
        if rest.len() < ID_LEN + NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(failed("too short"));
        }
        let (id, rest) = rest.split_at(ID_LEN);
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let kek = [Some(&self.current), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|kek| kek.id == id)
            .ok_or_else(|| failed("sealed under a key-encryption key that is not configured"))?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| failed("bad nonce"))?;
        let mut in_out = ciphertext.to_vec();
        let pkcs8 = kek
            .key
            .open_in_place(nonce, Aad::from(kid.as_bytes()), &mut in_out)
            .map_err(|_| failed("altered, or sealed for another key"))?
            .to_vec();
        Ok(Opened {
            pkcs8,
            stale: kek.id != self.current.id,
        })
    }
}

/// Whether a key file of permission bits `mode`, owned by the uid `owner`, is private
/// enough for the process of effective uid `reader`: readable by its owner alone (0600,
/// 0400), or, as Kubernetes mounts a Secret for a pod with an `fsGroup`, a file of root's
/// that its group may only read (0440), read by a process that is not root (so through
/// that group, the pod's). Never writable or readable by others.
fn private_to_reader(mode: u32, owner: u32, reader: u32) -> bool {
    let group_read = 0o040;
    mode & 0o077 == 0 || (mode & 0o077 == group_read && owner == 0 && reader != 0)
}

fn read_kek(path: &Path) -> Result<[u8; KEK_LEN], SealError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let failed = |reason: String| SealError::KeyFile {
        path: path.display().to_string(),
        reason,
    };
    let metadata = std::fs::metadata(path).map_err(|e| failed(e.to_string()))?;
    let mode = metadata.permissions().mode() & 0o777;
    let reader = rustix::process::geteuid().as_raw();
    if !private_to_reader(mode, metadata.uid(), reader) {
        return Err(failed(format!(
            "mode {mode:o} lets others than its owner read it; run `chmod 600 {}`",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|_| failed("not base64".into()))?;
    bytes.try_into().map_err(|_| {
        failed(format!(
            "not {KEK_LEN} bytes (e.g. `head -c 32 /dev/urandom | base64`)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; KEK_LEN] = [1; KEK_LEN];
    const B: [u8; KEK_LEN] = [2; KEK_LEN];

    #[test]
    fn a_sealed_key_opens_only_for_its_kid_and_its_kek() {
        let sealing = KeyEncryption::new(&A, None);
        let sealed = sealing.seal("kid-1", b"pkcs8 bytes").unwrap();
        assert!(
            !sealed.windows(11).any(|w| w == b"pkcs8 bytes"),
            "no plaintext"
        );
        let opened = sealing.open("kid-1", &sealed).unwrap();
        assert_eq!(
            (opened.pkcs8.as_slice(), opened.stale),
            (&b"pkcs8 bytes"[..], false)
        );
        assert!(sealing.open("kid-2", &sealed).is_err(), "bound to its kid");
        assert!(KeyEncryption::new(&B, None).open("kid-1", &sealed).is_err());
        let mut altered = sealed.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(sealing.open("kid-1", &altered).is_err());
        assert!(sealing.open("kid-1", &sealed[..20]).is_err());
    }

    #[test]
    fn the_previous_kek_opens_and_says_to_seal_again() {
        let old = KeyEncryption::new(&A, None).seal("k", b"secret").unwrap();
        let rotating = KeyEncryption::new(&B, Some(&A));
        let opened = rotating.open("k", &old).unwrap();
        assert_eq!(
            (opened.pkcs8.as_slice(), opened.stale),
            (&b"secret"[..], true)
        );
        let resealed = rotating.seal("k", &opened.pkcs8).unwrap();
        assert!(
            !KeyEncryption::new(&B, None)
                .open("k", &resealed)
                .unwrap()
                .stale
        );
    }

    #[test]
    fn a_key_from_before_sealing_is_read_and_marked_stale() {
        let opened = KeyEncryption::new(&A, None)
            .open("k", b"\x30\x82plain")
            .unwrap();
        assert!(opened.stale);
        assert_eq!(opened.pkcs8, b"\x30\x82plain");
    }

    #[test]
    fn a_kek_file_is_its_owners_alone_or_a_kubernetes_secret_read_through_the_pods_group() {
        let (root, console) = (0, 10001);
        for mode in [0o600, 0o400] {
            assert!(private_to_reader(mode, console, console), "{mode:o}");
            assert!(private_to_reader(mode, root, root), "{mode:o}");
        }
        // A Secret volume with fsGroup: root's, group-readable, read by a non-root pod.
        assert!(private_to_reader(0o440, root, console));
        // Not when the reader is root (then only 0600 will do), the owner is not root
        // (a file someone shared with a group), or anything more is allowed.
        assert!(!private_to_reader(0o440, root, root));
        assert!(!private_to_reader(0o640, console, console));
        for mode in [0o460, 0o444, 0o404, 0o442, 0o640 | 0o020, 0o450] {
            assert!(!private_to_reader(mode, root, console), "{mode:o}");
        }
    }

    #[test]
    fn kek_files_are_32_base64_bytes_for_their_owner_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kek");
        KeyEncryption::create_file(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(
            KeyEncryption::create_file(&path).is_err(),
            "never overwritten"
        );
        let sealed = KeyEncryption::from_files(&path, None)
            .unwrap()
            .seal("k", b"x")
            .unwrap();
        assert!(
            KeyEncryption::from_files(&path, None)
                .unwrap()
                .open("k", &sealed)
                .is_ok()
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let exposed = KeyEncryption::from_files(&path, None)
            .unwrap_err()
            .to_string();
        assert!(exposed.contains("chmod 600"), "{exposed}");
        let short = dir.path().join("short");
        std::fs::write(&short, STANDARD.encode([0u8; 16])).unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = KeyEncryption::from_files(&short, None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("not 32 bytes"), "{error}");
    }
}
