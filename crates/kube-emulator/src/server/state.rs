//! The state every request handler shares: the store behind its lock, the
//! authenticators, the garbage collector's wake-up and the watch settings.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use crate::auth::Authenticator;
use crate::store::Store;

/// Shared server state.
pub(crate) struct AppState {
    /// The object store; every API operation holds this lock for its whole duration.
    pub(crate) store: Mutex<Store>,
    /// Authenticators.
    pub(crate) auth: Authenticator,
    /// Wakes the garbage collector.
    pub(crate) gc: Notify,
    /// Interval between watch bookmarks.
    pub(crate) bookmark_interval: Duration,
    /// `host:port` the server listens on.
    pub(crate) address: String,
}

impl AppState {
    /// Locks the store (a poisoned lock is recovered: the store stays consistent per operation).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}
