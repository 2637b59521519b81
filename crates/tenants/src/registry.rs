//! The current set of tenants, read from a [`TenantSource`]: strictly at start, then
//! leniently every refresh interval (`BANLIEUE_TENANTS_REFRESH`, default 30 s).
//!
//! - At start, anything wrong stops the console: an unreadable source, or any document
//!   refused ([`crate::document`]).
//! - On refresh, a refused document drops its tenant alone (its tokens are then refused,
//!   the reason logged) and the others reload; a failed read keeps the last set.
//! - A set older than [`STALE_AFTER_INTERVALS`] intervals is not trusted at all: every
//!   tenant token is refused ([`Stale`], a 503) until a read succeeds, so a suspension
//!   cannot go unseen for long while the source is unreachable.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::document::{self, DocumentError, Tenant, Warning};
use crate::source::{ReadError, TenantSource};

/// After how many refresh intervals without a successful read the set is stale.
pub const STALE_AFTER_INTERVALS: u32 = 10;

/// The default refresh interval (`BANLIEUE_TENANTS_REFRESH`).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(30);

/// Why the console cannot start with this source.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The source could not be read.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// Documents were refused; each names its document and field.
    #[error("{}", refused.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Refused {
        /// Every refused document's fault.
        refused: Vec<DocumentError>,
    },
}

/// The tenant set is older than [`STALE_AFTER_INTERVALS`] refresh intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the tenants were last read {} s ago, longer than the {} s allowed", age.as_secs(), allowed.as_secs())]
pub struct Stale {
    /// Since the last successful read.
    pub age: Duration,
    /// The most age trusted.
    pub allowed: Duration,
}

/// One successful read: the valid tenants, when they were read, and what was refused.
#[derive(Debug)]
pub struct Snapshot {
    /// The valid tenants, by id.
    pub tenants: BTreeMap<String, Tenant>,
    /// The documents refused in that read.
    pub refused: Vec<DocumentError>,
    /// When the read completed.
    pub read_at: Instant,
}

/// What one refresh did.
#[derive(Debug)]
pub enum Refresh {
    /// The source was read: how many tenants are valid now, and the documents dropped.
    Read {
        /// Valid tenants.
        tenants: usize,
        /// Documents refused (their tenants' tokens are refused).
        refused: Vec<DocumentError>,
    },
    /// The source could not be read; the last set stays (until it is stale).
    Failed(ReadError),
}

/// The console's tenants, shared by every request.
pub struct TenantRegistry {
    source: TenantSource,
    interval: Duration,
    current: RwLock<Arc<Snapshot>>,
}

impl TenantRegistry {
    /// Reads `source` once, strictly, at `now`: the registry and the warnings of its
    /// tenants (each to be logged), refreshed later every `interval`.
    ///
    /// Errors: [`LoadError`] when the source cannot be read or any document is refused.
    pub async fn load(
        source: TenantSource,
        interval: Duration,
        now: Instant,
    ) -> Result<(Self, Vec<Warning>), LoadError> {
        let set = document::check_all(source.read().await?);
        if !set.refused.is_empty() {
            return Err(LoadError::Refused {
                refused: set.refused,
            });
        }
        let snapshot = Snapshot {
            tenants: set.tenants,
            refused: Vec::new(),
            read_at: now,
        };
        let registry = Self {
            source,
            interval,
            current: RwLock::new(Arc::new(snapshot)),
        };
        Ok((registry, set.warnings))
    }

    /// Where the tenants come from.
    pub fn source(&self) -> &TenantSource {
        &self.source
    }

    /// Reads the source again at `now`: the valid tenants replace the set, refused
    /// documents drop their tenants; a failed read changes nothing. Refusals and failures
    /// are logged when they differ from the last refresh's.
    pub async fn refresh(&self, now: Instant) -> Refresh {
        let documents = match self.source.read().await {
            Ok(documents) => documents,
            Err(error) => {
                tracing::warn!(source = %self.source.describe(), %error, "tenants not refreshed: the last set stays");
                return Refresh::Failed(error);
            }
        };
        let set = document::check_all(documents);
        let previous = self.snapshot();
        if set.refused != previous.refused {
            for refused in &set.refused {
                tracing::warn!(%refused, "tenant dropped: its tokens are refused until its document is fixed");
            }
        }
        let outcome = Refresh::Read {
            tenants: set.tenants.len(),
            refused: set.refused.clone(),
        };
        let snapshot = Arc::new(Snapshot {
            tenants: set.tenants,
            refused: set.refused,
            read_at: now,
        });
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = snapshot;
        outcome
    }

    /// The last successful read, however old.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The tenants to verify with at `now`.
    ///
    /// Errors: [`Stale`] when the last successful read is older than
    /// [`STALE_AFTER_INTERVALS`] intervals.
    pub fn current(&self, now: Instant) -> Result<Arc<Snapshot>, Stale> {
        let snapshot = self.snapshot();
        let age = now.saturating_duration_since(snapshot.read_at);
        let allowed = self.interval * STALE_AFTER_INTERVALS;
        if age > allowed {
            return Err(Stale { age, allowed });
        }
        Ok(snapshot)
    }

    /// Refreshes every interval until the task is aborted.
    pub fn spawn_refresh(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(self.interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                self.refresh(Instant::now()).await;
            }
        })
    }
}
