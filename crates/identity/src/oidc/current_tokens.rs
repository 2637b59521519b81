//! The refresh tokens this process handed out last, each with its family and user as they
//! were written, so the next refresh of a chain goes straight to its write.
//!
//! Nothing here is trusted as the truth: the rotation only succeeds if the token is still
//! current, its family not revoked and its user unchanged (`users.version`), checked by
//! the database in the write itself. A stale entry (another replica rotated the chain, an
//! administrator changed the user) makes that write fail, and the refresh reads the rows
//! again and judges what it finds.

use std::collections::HashMap;
use std::sync::Mutex;

use banlieue_store::RefreshTokenRecord;

/// At most this many chains are remembered (a few hundred bytes each); past it an
/// arbitrary entry makes room, and its chain's next refresh reads the database.
const CAPACITY: usize = 4096;

/// Token hash → the token's record as this process wrote it.
#[derive(Default)]
pub(crate) struct CurrentTokens {
    by_hash: Mutex<HashMap<String, RefreshTokenRecord>>,
}

impl CurrentTokens {
    /// Takes the record of the token with this hash out, if this process issued it and
    /// still remembers it: a token is presented once in the normal course, and a repeat
    /// (a retry in the grace window, a replay) is judged from the database.
    pub(crate) fn take(&self, token_hash: &str) -> Option<RefreshTokenRecord> {
        self.lock().remove(token_hash)
    }

    /// Remembers `record`, the token just issued.
    pub(crate) fn put(&self, record: RefreshTokenRecord) {
        let mut by_hash = self.lock();
        if by_hash.len() >= CAPACITY
            && let Some(evicted) = by_hash.keys().next().cloned()
        {
            by_hash.remove(&evicted);
        }
        by_hash.insert(record.token_hash.clone(), record);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RefreshTokenRecord>> {
        self.by_hash.lock().unwrap_or_else(|p| p.into_inner())
    }
}
