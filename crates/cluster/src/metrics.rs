//! Counters the controllers keep, for `/metrics` and for the benchmark.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by the controllers (all monotonic since process start).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Reconcile passes, all controllers.
    pub reconciles: AtomicU64,
    /// Reconcile passes that returned an error.
    pub reconcile_errors: AtomicU64,
    /// API writes (create, patch, delete) made by the claim controller.
    pub claim_writes: AtomicU64,
    /// API writes made by the pool controller.
    pub pool_writes: AtomicU64,
    /// API writes made by the simulated provider.
    pub provider_writes: AtomicU64,
    /// Members taken by a claim (successful member patches).
    pub binds: AtomicU64,
    /// Member patches refused with 409 (another claim won the race).
    pub bind_conflicts: AtomicU64,
}

impl Metrics {
    /// Adds one to a counter.
    pub(crate) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
