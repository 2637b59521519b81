use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordVerifier, SaltString, rand_core::OsRng};
use argon2::{Algorithm, Argon2, Params, PasswordHasher as _, Version};
use banlieue_domain::Password;
use tokio::sync::{OnceCell, Semaphore};

/// Failures of hashing itself (never "wrong password": that is `Ok(false)`).
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("argon2 failed: {0}")]
    Argon2(String),
    #[error("the hashing worker stopped: {0}")]
    Worker(#[from] tokio::task::JoinError),
    #[error("the hashing queue is closed")]
    Closed,
    /// [`PasswordHasher::QUEUE`] hashes are already waiting: answered at once, without
    /// hashing (HTTP 503 with `Retry-After`).
    #[error("too many password checks are waiting; retry after {retry_after:?}")]
    Busy { retry_after: Duration },
}

/// argon2id password hashing in PHC string format, off the async executor.
///
/// At most two hashes run at once (each takes 64 MiB and a core for a few hundred
/// milliseconds); at most [`PasswordHasher::QUEUE`] further callers wait on a semaphore,
/// and any beyond are refused at once with [`HashError::Busy`], so a flood can neither
/// make every sign-in wait behind it nor hold memory per waiting request. Production
/// parameters are RFC 9106 §4's second recommended option: m = 64 MiB, t = 3, p = 4.
#[derive(Clone)]
pub struct PasswordHasher {
    inner: Arc<Inner>,
}

struct Inner {
    params: Params,
    permits: Semaphore,
    /// Hashes running or waiting.
    queued: AtomicUsize,
    dummy: OnceCell<String>,
    verifications: AtomicU64,
}

impl PasswordHasher {
    /// How many hashes may run at the same time.
    pub const CONCURRENCY: usize = 2;

    /// How many hashes may wait for one of the [`Self::CONCURRENCY`] slots.
    pub const QUEUE: usize = 8;

    /// What a caller refused by a full queue is told to wait.
    pub const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

    /// The production hasher: argon2id, m = 65536 KiB, t = 3, p = 4.
    pub fn rfc9106_second_recommendation() -> Self {
        Self::with_params(
            Params::new(64 * 1024, 3, 4, None).expect("constant parameters are valid"),
        )
    }

    /// A hasher with other parameters: for tests of rehashing and for benchmarks.
    pub fn with_params(params: Params) -> Self {
        Self {
            inner: Arc::new(Inner {
                params,
                permits: Semaphore::new(Self::CONCURRENCY),
                queued: AtomicUsize::new(0),
                dummy: OnceCell::new(),
                verifications: AtomicU64::new(0),
            }),
        }
    }

    /// Hashes `password` with a fresh 16-byte salt; returns the PHC string
    /// (`$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>`).
    pub async fn hash(&self, password: &Password) -> Result<String, HashError> {
        let params = self.inner.params.clone();
        let secret = password.expose().to_vec();
        self.run(move || {
            let salt = SaltString::generate(&mut OsRng);
            Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
                .hash_password(&secret, &salt)
                .map(|h| h.to_string())
                .map_err(|e| HashError::Argon2(e.to_string()))
        })
        .await
    }

    /// Verifies `password` against a stored PHC string using the parameters recorded in
    /// it. An unparsable stored hash is an error, not a mismatch.
    pub async fn verify(&self, password: &Password, phc: &str) -> Result<bool, HashError> {
        let secret = password.expose().to_vec();
        let phc = phc.to_owned();
        let inner = self.inner.clone();
        self.run(move || {
            inner.verifications.fetch_add(1, Ordering::Relaxed);
            let parsed = PasswordHash::new(&phc).map_err(|e| HashError::Argon2(e.to_string()))?;
            match Argon2::default().verify_password(&secret, &parsed) {
                Ok(()) => Ok(true),
                Err(argon2::password_hash::Error::Password) => Ok(false),
                Err(e) => Err(HashError::Argon2(e.to_string())),
            }
        })
        .await
    }

    /// Spends exactly what [`verify`](Self::verify) spends, against a hash of a random
    /// password: for unknown and disabled users, so timing reveals nothing (SPEC §3).
    pub async fn verify_dummy(&self, password: &Password) -> Result<(), HashError> {
        let dummy = self
            .inner
            .dummy
            .get_or_try_init(|| async {
                let random = Password::presented(&crate::generate_password())
                    .expect("generated passwords are short");
                self.hash(&random).await
            })
            .await?;
        self.verify(password, dummy).await.map(|_| ())
    }

    /// Whether `phc` was made with other parameters than this hasher's (algorithm,
    /// version, m, t, p): the caller then rehashes after a successful verification.
    pub fn needs_rehash(&self, phc: &str) -> bool {
        let Ok(parsed) = PasswordHash::new(phc) else {
            return true;
        };
        let current = &self.inner.params;
        parsed.algorithm != Algorithm::Argon2id.ident()
            || parsed.version != Some(Version::V0x13.into())
            || Params::try_from(&parsed).map_or(true, |p| {
                p.m_cost() != current.m_cost()
                    || p.t_cost() != current.t_cost()
                    || p.p_cost() != current.p_cost()
            })
    }

    /// How many verifications (real or dummy) this hasher has run (a refused one, see
    /// [`HashError::Busy`], is not counted): exported as a metric,
    /// and what tests use to prove every sign-in path costs exactly one.
    pub fn verifications(&self) -> u64 {
        self.inner.verifications.load(Ordering::Relaxed)
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, HashError> + Send + 'static,
    ) -> Result<T, HashError> {
        let queued = self.inner.queued.fetch_add(1, Ordering::AcqRel);
        let _place = QueuePlace(&self.inner.queued);
        if queued >= Self::CONCURRENCY + Self::QUEUE {
            return Err(HashError::Busy {
                retry_after: Self::BUSY_RETRY_AFTER,
            });
        }
        let _permit = self
            .inner
            .permits
            .acquire()
            .await
            .map_err(|_| HashError::Closed)?;
        tokio::task::spawn_blocking(work).await?
    }
}

/// A caller's place in the hash queue, given up when it drops (done, refused or
/// cancelled).
struct QueuePlace<'a>(&'a AtomicUsize);

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for PasswordHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordHasher")
            .field("params", &self.inner.params)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cheap() -> PasswordHasher {
        PasswordHasher::with_params(Params::new(256, 1, 1, None).unwrap())
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_without_hashing() {
        let hasher = PasswordHasher::with_params(Params::new(8 * 1024, 2, 1, None).unwrap());
        let phc = hasher
            .hash(&Password::presented("right").unwrap())
            .await
            .unwrap();
        let wrong = Password::presented("wrong").unwrap();
        let extra = 5;
        let mut checks = tokio::task::JoinSet::new();
        for _ in 0..PasswordHasher::CONCURRENCY + PasswordHasher::QUEUE + extra {
            let (hasher, wrong, phc) = (hasher.clone(), wrong.clone(), phc.clone());
            checks.spawn(async move { hasher.verify(&wrong, &phc).await });
        }
        let results = checks.join_all().await;
        let busy = results
            .iter()
            .filter(|r| matches!(r, Err(HashError::Busy { .. })))
            .count();
        assert_eq!(busy, extra, "every caller beyond the queue is refused");
        assert_eq!(
            hasher.verifications(),
            (PasswordHasher::CONCURRENCY + PasswordHasher::QUEUE) as u64
        );
        assert!(
            hasher.verify(&wrong, &phc).await.is_ok(),
            "the queue empties"
        );
    }

    #[tokio::test]
    async fn hashes_verify_and_mismatches_are_false() {
        let hasher = cheap();
        let right = Password::presented("correct horse battery").unwrap();
        let wrong = Password::presented("correct horse battery!").unwrap();
        let phc = hasher.hash(&right).await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=256,t=1,p=1$"), "{phc}");
        assert!(hasher.verify(&right, &phc).await.unwrap());
        assert!(!hasher.verify(&wrong, &phc).await.unwrap());
        assert!(hasher.verify(&right, "not a phc string").await.is_err());
    }

    #[tokio::test]
    async fn production_parameters_are_rfc9106_second_option() {
        let hasher = PasswordHasher::rfc9106_second_recommendation();
        let phc = hasher
            .hash(&Password::presented("p").unwrap())
            .await
            .unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=65536,t=3,p=4$"), "{phc}");
        assert!(!hasher.needs_rehash(&phc));
        assert!(cheap().needs_rehash(&phc));
    }

    #[tokio::test]
    async fn no_truncation_of_long_passwords() {
        let hasher = cheap();
        let long = "a".repeat(100);
        let phc = hasher
            .hash(&Password::presented(&long).unwrap())
            .await
            .unwrap();
        let altered = format!("{}{}", &long[..72], "b".repeat(28));
        assert!(
            !hasher
                .verify(&Password::presented(&altered).unwrap(), &phc)
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn dummy_verification_counts_like_a_real_one() {
        let hasher = cheap();
        let before = hasher.verifications();
        hasher
            .verify_dummy(&Password::presented("").unwrap())
            .await
            .unwrap();
        assert_eq!(hasher.verifications(), before + 1);
    }
}
