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
    /// The caller's [`HashLane`] is full ([`PasswordHasher::CONCURRENCY`] +
    /// [`PasswordHasher::QUEUE`] hashes running or waiting): answered at once, without
    /// hashing (HTTP 503 with `Retry-After`).
    #[error("too many password checks are waiting; retry after {retry_after:?}")]
    Busy { retry_after: Duration },
}

/// Where a hash waits for one of the hasher's slots.
///
/// Anyone on the network can ask for an anonymous hash, from as many addresses and with
/// as many names as they have; known callers have proved something already. Anonymous
/// hashes run one at a time, on one of the two slots, so an anonymous flood fills its own
/// lane, never the known one, and leaves a slot to known callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashLane {
    /// A sign-in for a name from an address where that name has not signed in lately.
    Anonymous,
    /// A sign-in from one of the name's known addresses (see
    /// [`ThrottlePolicy::known_address_ttl`](crate::ThrottlePolicy::known_address_ttl)),
    /// or a hash a signed-in person asked for (a password change, an admin's action).
    Known,
}

/// argon2id password hashing in PHC string format, off the async executor.
///
/// At most two hashes run at once (each takes 64 MiB and a core for a few hundred
/// milliseconds). Each [`HashLane`] holds at most [`PasswordHasher::CONCURRENCY`] +
/// [`PasswordHasher::QUEUE`] callers, running or waiting, and any beyond are refused at
/// once with [`HashError::Busy`], so a
/// flood can neither make every sign-in wait behind it nor hold memory per waiting
/// request. Anonymous hashes run one at a time, so a known hash never waits behind one
/// unless known hashes hold the other slot. Production parameters are RFC 9106 §4's
/// second recommended option: m = 64 MiB, t = 3, p = 4.
#[derive(Clone)]
pub struct PasswordHasher {
    inner: Arc<Inner>,
}

struct Inner {
    params: Params,
    /// One per hash that may run; fair, so waiters take them in order.
    slots: Semaphore,
    /// One: the anonymous hash that holds it is the only one of its lane holding or
    /// waiting for a slot.
    anonymous_turn: Semaphore,
    /// Anonymous hashes running or waiting.
    anonymous: AtomicUsize,
    /// Known hashes running or waiting.
    known: AtomicUsize,
    dummy: OnceCell<String>,
    verifications: AtomicU64,
}

impl PasswordHasher {
    /// How many hashes may run at the same time.
    pub const CONCURRENCY: usize = 2;

    /// With [`Self::CONCURRENCY`], how many hashes each [`HashLane`] holds, running or
    /// waiting.
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
                slots: Semaphore::new(Self::CONCURRENCY),
                anonymous_turn: Semaphore::new(1),
                anonymous: AtomicUsize::new(0),
                known: AtomicUsize::new(0),
                dummy: OnceCell::new(),
                verifications: AtomicU64::new(0),
            }),
        }
    }

    /// Hashes `password` with a fresh 16-byte salt; returns the PHC string
    /// (`$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>`). It queues in the
    /// [`HashLane::Known`] lane: only someone the console knows sets a password.
    pub async fn hash(&self, password: &Password) -> Result<String, HashError> {
        let params = self.inner.params.clone();
        let secret = password.expose().to_vec();
        self.run(HashLane::Known, move || {
            let salt = SaltString::generate(&mut OsRng);
            Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
                .hash_password(&secret, &salt)
                .map(|h| h.to_string())
                .map_err(|e| HashError::Argon2(e.to_string()))
        })
        .await
    }

    /// Verifies `password` against a stored PHC string using the parameters recorded in
    /// it, queued in `lane`. An unparsable stored hash is an error, not a mismatch.
    pub async fn verify(
        &self,
        password: &Password,
        phc: &str,
        lane: HashLane,
    ) -> Result<bool, HashError> {
        let secret = password.expose().to_vec();
        let phc = phc.to_owned();
        let inner = self.inner.clone();
        self.run(lane, move || {
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
    /// password, queued in `lane`: for unknown and disabled users, so timing reveals
    /// nothing (SPEC §3).
    pub async fn verify_dummy(&self, password: &Password, lane: HashLane) -> Result<(), HashError> {
        let dummy = self
            .inner
            .dummy
            .get_or_try_init(|| async {
                let random = Password::presented(&crate::generate_password())
                    .expect("generated passwords are short");
                self.hash(&random).await
            })
            .await?;
        self.verify(password, dummy, lane).await.map(|_| ())
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
    /// [`HashError::Busy`], is not counted): what tests use to prove every sign-in path
    /// costs exactly one.
    pub fn verifications(&self) -> u64 {
        self.inner.verifications.load(Ordering::Relaxed)
    }

    async fn run<T: Send + 'static>(
        &self,
        lane: HashLane,
        work: impl FnOnce() -> Result<T, HashError> + Send + 'static,
    ) -> Result<T, HashError> {
        let inner = &*self.inner;
        let places = match lane {
            HashLane::Anonymous => &inner.anonymous,
            HashLane::Known => &inner.known,
        };
        let queued = places.fetch_add(1, Ordering::AcqRel);
        let _place = QueuePlace(places);
        if queued >= Self::CONCURRENCY + Self::QUEUE {
            return Err(HashError::Busy {
                retry_after: Self::BUSY_RETRY_AFTER,
            });
        }
        let _turn = match lane {
            HashLane::Known => None,
            HashLane::Anonymous => Some(inner.anonymous_turn.acquire().await),
        }
        .transpose()
        .map_err(|_| HashError::Closed)?;
        let _slot = inner.slots.acquire().await.map_err(|_| HashError::Closed)?;
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

    /// A hasher slow enough for its lanes to fill, the hash of "right", and "wrong".
    async fn slow_with_hash() -> (PasswordHasher, String, Password) {
        let hasher = PasswordHasher::with_params(Params::new(8 * 1024, 2, 1, None).unwrap());
        let phc = hasher
            .hash(&Password::presented("right").unwrap())
            .await
            .unwrap();
        (hasher, phc, Password::presented("wrong").unwrap())
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_without_hashing() {
        let (hasher, phc, wrong) = slow_with_hash().await;
        let extra = 5;
        let mut checks = tokio::task::JoinSet::new();
        for _ in 0..PasswordHasher::CONCURRENCY + PasswordHasher::QUEUE + extra {
            let (hasher, wrong, phc) = (hasher.clone(), wrong.clone(), phc.clone());
            checks.spawn(async move { hasher.verify(&wrong, &phc, HashLane::Anonymous).await });
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
            hasher
                .verify(&wrong, &phc, HashLane::Anonymous)
                .await
                .is_ok(),
            "the queue empties"
        );
    }

    #[tokio::test]
    async fn a_known_hash_passes_a_full_anonymous_lane() {
        let (hasher, phc, wrong) = slow_with_hash().await;
        let finished = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut checks = tokio::task::JoinSet::new();
        let lane_size = PasswordHasher::CONCURRENCY + PasswordHasher::QUEUE;
        for _ in 0..lane_size {
            let (hasher, wrong, phc, finished) =
                (hasher.clone(), wrong.clone(), phc.clone(), finished.clone());
            checks.spawn(async move {
                hasher
                    .verify(&wrong, &phc, HashLane::Anonymous)
                    .await
                    .unwrap();
                finished.lock().unwrap().push(HashLane::Anonymous);
            });
        }
        while hasher.inner.anonymous.load(Ordering::Acquire) < lane_size {
            tokio::task::yield_now().await;
        }
        assert!(matches!(
            hasher.verify(&wrong, &phc, HashLane::Anonymous).await,
            Err(HashError::Busy { .. })
        ));
        assert!(
            hasher
                .verify(
                    &Password::presented("right").unwrap(),
                    &phc,
                    HashLane::Known
                )
                .await
                .unwrap()
        );
        finished.lock().unwrap().push(HashLane::Known);
        checks.join_all().await;
        let finished = finished.lock().unwrap();
        let ahead = finished
            .iter()
            .position(|lane| *lane == HashLane::Known)
            .unwrap();
        // The one anonymous hash running when it came finishes first (one more is allowed
        // for a thread scheduled late); behind one queue it would have been all ten.
        assert!(ahead <= 2, "{ahead} anonymous hashes finished first");
    }

    #[tokio::test]
    async fn hashes_verify_and_mismatches_are_false() {
        let hasher = cheap();
        let right = Password::presented("correct horse battery").unwrap();
        let wrong = Password::presented("correct horse battery!").unwrap();
        let phc = hasher.hash(&right).await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=256,t=1,p=1$"), "{phc}");
        let lane = HashLane::Known;
        assert!(hasher.verify(&right, &phc, lane).await.unwrap());
        assert!(!hasher.verify(&wrong, &phc, lane).await.unwrap());
        assert!(
            hasher
                .verify(&right, "not a phc string", lane)
                .await
                .is_err()
        );
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
                .verify(
                    &Password::presented(&altered).unwrap(),
                    &phc,
                    HashLane::Known
                )
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn dummy_verification_counts_like_a_real_one() {
        let hasher = cheap();
        let before = hasher.verifications();
        hasher
            .verify_dummy(&Password::presented("").unwrap(), HashLane::Anonymous)
            .await
            .unwrap();
        assert_eq!(hasher.verifications(), before + 1);
    }
}
