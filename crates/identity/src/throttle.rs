//! Sign-in throttling: exponential back-off per source address and a per-user ceiling,
//! counted before any password is hashed, shared by every replica through the database.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use banlieue_store::{BackoffRule, BackoffState, SignInClaim, SignInKeys, Store, StoreError};
use time::OffsetDateTime;

use crate::HashLane;

/// How failed sign-ins slow further attempts down.
#[derive(Debug, Clone, Copy)]
pub struct ThrottlePolicy {
    /// Failures from one source (an IPv4 address, or an IPv6 /64) before its next attempt
    /// waits (SPEC §3: 5): the attempt after the fifth failure already waits.
    pub free_failures: u32,
    /// Failures for one user name, from addresses that are not among the user's known
    /// addresses, before such attempts wait: the ceiling on guessing one person's
    /// password from many addresses. From a known address only the source's back-off
    /// applies, so nobody elsewhere can lock a person out of where they usually sign in.
    pub free_failures_per_user: u32,
    /// Delay after the first failure beyond the free ones; it doubles with each further one.
    pub base_delay: Duration,
    /// Upper bound of the delay.
    pub max_delay: Duration,
    /// A key with no failure for this long starts over.
    pub forget_after: Duration,
    /// How long an address where a user signed in stays one of their known addresses.
    pub known_address_ttl: Duration,
}

impl Default for ThrottlePolicy {
    fn default() -> Self {
        Self {
            free_failures: 5,
            free_failures_per_user: 50,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(15 * 60),
            forget_after: Duration::from_secs(60 * 60),
            known_address_ttl: Duration::from_secs(30 * 24 * 60 * 60),
        }
    }
}

/// Why an attempt is refused before its password is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttled {
    /// When to try again (`Retry-After`).
    pub retry_after: Duration,
    /// `Some(n)` when this refusal should be audited: the first of its key on this replica
    /// in a [`THROTTLED_AUDIT_WINDOW`], with `n` refusals of that key not audited since
    /// the last row. `None`: counted, not written.
    pub audit: Option<u32>,
}

/// Throttled attempts of one key write at most one audit row per window and replica.
pub const THROTTLED_AUDIT_WINDOW: Duration = Duration::from_secs(60);

/// Entries kept per in-memory table (refusals remembered, audit summaries); beyond it the
/// oldest go first.
pub const MAX_ENTRIES: usize = 50_000;

/// Addresses remembered per user.
const KNOWN_ADDRESSES_PER_USER: u32 = 4;

/// What a refused attempt waits when its only fault is that another attempt of the same
/// key is still being checked.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(1);

/// How long an admitted attempt holds its keys at most: far longer than a password check
/// (the hasher refuses work it cannot start soon), so only an attempt whose replica died
/// while checking it lets its keys go this way.
const IN_FLIGHT_LEASE: Duration = Duration::from_secs(30);

/// Exponential back-off after failed sign-ins, per source address and per user name,
/// kept in the database so that every replica counts the same failures.
///
/// An attempt is admitted only while each of its keys is not blocked and has no other
/// attempt in flight on any replica, so a burst of parallel guesses gets as many hashes
/// as a patient attacker, however many replicas it is spread over, and one key never
/// holds more than one of the hasher's slots. An attempt that ends without a verdict (its
/// request was dropped) counts as a failure.
///
/// The user key is a digest of whatever name was typed, known or not, so a throttled
/// unknown name looks exactly like a throttled real one; it is not consulted from an
/// address where that name signed in within [`ThrottlePolicy::known_address_ttl`].
/// Success clears nothing: an attacker cannot reset a count by signing in to their own
/// account. Each replica remembers the blocks the database reported until they end (a
/// block never shortens), so a flood of refused attempts costs no query, and keeps the
/// audit summaries of its own refusals; both tables hold at most [`MAX_ENTRIES`].
#[derive(Debug)]
pub struct SignInThrottle {
    policy: ThrottlePolicy,
    store: Store,
    memory: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    /// Blocks the database reported, until when (milliseconds since the epoch).
    blocked: HashMap<Blocked, i64>,
    /// This replica's refusals per blocking key, for their audit rows.
    audits: HashMap<Key, Audit>,
}

/// What a remembered block refuses: every attempt from a source, or a name's attempts
/// from one source (from another, the name may be at a known address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Blocked {
    Source(SourceKey),
    NameFrom(NameKey, SourceKey),
}

/// A throttled key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Source(SourceKey),
    Name(NameKey),
}

impl Key {
    /// The key as the database holds it: `s:` or `u:` and 32 hex digits.
    fn column(self) -> String {
        let (kind, bytes) = match self {
            Key::Source(SourceKey(bytes)) => ("s:", bytes),
            Key::Name(NameKey(bytes)) => ("u:", bytes),
        };
        let mut text = String::with_capacity(34);
        text.push_str(kind);
        for byte in bytes {
            text.push_str(&format!("{byte:02x}"));
        }
        text
    }
}

#[derive(Debug, Clone, Copy)]
struct Audit {
    last_audited_ms: i64,
    /// Refusals since the last audited one.
    unaudited: u32,
}

/// A source address as throttled, as 16 bytes: IPv4 (also when IPv4-mapped) as its
/// IPv4-mapped IPv6 form, IPv6 by its /64, the smallest block a single host is usually
/// given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct SourceKey([u8; 16]);

impl SourceKey {
    fn of(address: IpAddr) -> Self {
        let v6 = match address {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let bits = match v6.to_ipv4_mapped() {
            Some(_) => v6.to_bits(),
            None => v6.to_bits() & !((1u128 << 64) - 1),
        };
        Self(bits.to_be_bytes())
    }
}

/// 128 bits of SHA-256 over the typed name: names of any length cost the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct NameKey([u8; 16]);

impl NameKey {
    fn of(name: &str) -> Self {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, name.as_bytes());
        let mut key = [0; 16];
        key.copy_from_slice(&digest.as_ref()[..16]);
        Self(key)
    }
}

/// One admitted attempt, holding its keys in the database: report its verdict with
/// [`Attempt::succeeded`], [`Attempt::failed`] or [`Attempt::unchecked`]; dropped without
/// one, it counts as failed. A verdict is written by a task of its own, so a request
/// cancelled while it is written still has it recorded.
#[derive(Debug)]
pub struct Attempt {
    /// `None` once its verdict is on its way.
    held: Option<Held>,
}

/// What an admitted attempt holds, and what its verdict needs.
#[derive(Debug)]
struct Held {
    store: Store,
    policy: ThrottlePolicy,
    source: String,
    name: String,
    /// Whether the name's key is held (false: a known address).
    name_held: bool,
    /// When it was admitted; its verdict is recorded as of then.
    at: OffsetDateTime,
    /// The end of its claim, which also tells its claim from a later one.
    lease_until: OffsetDateTime,
}

#[derive(Debug, Clone, Copy)]
enum Verdict {
    Succeeded,
    Unchecked,
    Failed,
}

impl Attempt {
    /// Where this attempt's password check queues: [`HashLane::Known`] from one of the
    /// name's known addresses, else [`HashLane::Anonymous`]. It says nothing about
    /// whether the name exists (known addresses are kept by the typed name's digest).
    pub fn hash_lane(&self) -> HashLane {
        match &self.held {
            Some(held) if !held.name_held => HashLane::Known,
            _ => HashLane::Anonymous,
        }
    }

    /// The password was right: the source becomes one of the user's known addresses.
    pub async fn succeeded(mut self) {
        self.settle(Verdict::Succeeded).await;
    }

    /// Nothing was checked (the hasher was busy, the store failed, the new password was
    /// refused before the old one was checked): the attempt counts neither way.
    pub async fn unchecked(mut self) {
        self.settle(Verdict::Unchecked).await;
    }

    /// The password was wrong (or the user unknown or disabled).
    pub async fn failed(mut self) {
        self.settle(Verdict::Failed).await;
    }

    async fn settle(&mut self, verdict: Verdict) {
        if let Some(held) = self.held.take() {
            let _ = tokio::spawn(held.record(verdict)).await;
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        // Without a runtime (the process is ending) the lease lets the keys go instead.
        if let Some(held) = self.held.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(held.record(Verdict::Failed));
        }
    }
}

impl Held {
    async fn record(self, verdict: Verdict) {
        let mut held = vec![self.source.as_str()];
        if self.name_held {
            held.push(&self.name);
        }
        let keys = SignInKeys {
            source: &self.source,
            name: &self.name,
        };
        let recorded = match verdict {
            Verdict::Succeeded | Verdict::Unchecked => {
                let remember = matches!(verdict, Verdict::Succeeded).then_some(keys);
                self.store
                    .release_sign_in(
                        &held,
                        self.lease_until,
                        remember,
                        KNOWN_ADDRESSES_PER_USER,
                        self.at,
                    )
                    .await
            }
            Verdict::Failed => {
                let mut failures = vec![(self.source.as_str(), self.policy.source_rule())];
                if self.name_held {
                    failures.push((&self.name, self.policy.name_rule()));
                }
                self.store
                    .count_sign_in_failure(&failures, self.lease_until, self.at)
                    .await
            }
        };
        log_failure(recorded);
    }
}

fn log_failure(result: Result<(), StoreError>) {
    if let Err(error) = result {
        tracing::error!(%error, "the sign-in back-off could not be recorded");
    }
}

impl ThrottlePolicy {
    fn source_rule(&self) -> BackoffRule {
        BackoffRule {
            free_failures: self.free_failures,
            base_delay: self.base_delay,
            max_delay: self.max_delay,
            forget_after: self.forget_after,
        }
    }

    fn name_rule(&self) -> BackoffRule {
        BackoffRule {
            free_failures: self.free_failures_per_user,
            ..self.source_rule()
        }
    }
}

impl SignInThrottle {
    /// A throttle whose state is in `store`.
    pub fn new(policy: ThrottlePolicy, store: Store) -> Self {
        Self {
            policy,
            store,
            memory: Mutex::new(Memory::default()),
        }
    }

    /// Admits one attempt for the typed `user` from `source` at `now`, or refuses it
    /// with how long to wait: while a key is blocked by its back-off, or while another
    /// attempt of the same key is being checked (on any replica).
    ///
    /// Errors: [`StoreError`] when the database cannot be read or written.
    pub async fn admit(
        &self,
        user: &str,
        source: IpAddr,
        now: OffsetDateTime,
    ) -> Result<Result<Attempt, Throttled>, StoreError> {
        let now_ms = millis(now);
        let source = SourceKey::of(source);
        let name = NameKey::of(user);
        if let Some(refused) = self.memory().remembered_refusal(source, name, now_ms) {
            return Ok(Err(refused));
        }
        let (source_column, name_column) = (Key::Source(source).column(), Key::Name(name).column());
        let keys = SignInKeys {
            source: &source_column,
            name: &name_column,
        };
        let lease_until = now + IN_FLIGHT_LEASE;
        let claim = self
            .store
            .claim_sign_in(keys, now, lease_until, now - self.policy.known_address_ttl)
            .await?;
        let (source_row, name_row) = match claim {
            SignInClaim::Claimed { name_held } => {
                return Ok(Ok(Attempt {
                    held: Some(Held {
                        store: self.store.clone(),
                        policy: self.policy,
                        source: source_column,
                        name: name_column,
                        name_held,
                        at: now,
                        lease_until,
                    }),
                }));
            }
            SignInClaim::Refused { source, name } => (source, name),
        };
        let source_refusal = Refusal::of(source_row, now_ms);
        let name_refusal = Refusal::of(name_row, now_ms);
        // The key that refuses for longer carries the refusal's audit summary.
        let (key, refusal) = if source_refusal.wait_ms >= name_refusal.wait_ms {
            (Key::Source(source), source_refusal)
        } else {
            (Key::Name(name), name_refusal)
        };
        let mut memory = self.memory();
        if refusal.blocked {
            let blocked = match key {
                Key::Source(source) => Blocked::Source(source),
                Key::Name(name) => Blocked::NameFrom(name, source),
            };
            memory.remember_block(blocked, now_ms + refusal.wait_ms, now_ms);
        }
        let audit = memory.refused(key, now_ms);
        let wait_ms = match refusal.wait_ms {
            0 => duration_ms(IN_FLIGHT_WAIT),
            wait => wait,
        };
        Ok(Err(Throttled {
            retry_after: Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0)),
            audit,
        }))
    }

    /// Entries held now in this replica's tables of remembered blocks and audit
    /// summaries.
    pub fn entries(&self) -> (usize, usize) {
        let memory = self.memory();
        (memory.blocked.len(), memory.audits.len())
    }

    /// Deletes the database's rows that no longer count at `now`: keys without a failure
    /// for [`ThrottlePolicy::forget_after`] that are neither blocked nor held, and known
    /// addresses older than [`ThrottlePolicy::known_address_ttl`]. Any replica may run it
    /// (every few minutes). Returns how many rows went.
    ///
    /// Errors: [`StoreError`].
    pub async fn prune(&self, now: OffsetDateTime) -> Result<u64, StoreError> {
        self.store
            .prune_sign_in_backoff(
                now,
                now - self.policy.forget_after,
                now - self.policy.known_address_ttl,
            )
            .await
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What one key's row says about an attempt at a given instant.
struct Refusal {
    wait_ms: i64,
    /// By its back-off (it will not end sooner), not by another attempt in flight.
    blocked: bool,
}

impl Refusal {
    fn of(row: Option<BackoffState>, now_ms: i64) -> Self {
        let Some(row) = row else {
            return Refusal {
                wait_ms: 0,
                blocked: false,
            };
        };
        let blocked_ms = millis(row.blocked_until) - now_ms;
        if blocked_ms > 0 {
            Refusal {
                wait_ms: blocked_ms,
                blocked: true,
            }
        } else if millis(row.in_flight_until) > now_ms {
            Refusal {
                wait_ms: duration_ms(IN_FLIGHT_WAIT),
                blocked: false,
            }
        } else {
            Refusal {
                wait_ms: 0,
                blocked: false,
            }
        }
    }
}

impl Memory {
    /// A refusal by a remembered block still running at `now_ms`, audited as such.
    fn remembered_refusal(
        &mut self,
        source: SourceKey,
        name: NameKey,
        now_ms: i64,
    ) -> Option<Throttled> {
        let until = |blocked| {
            self.blocked
                .get(&blocked)
                .copied()
                .filter(|&until| until > now_ms)
        };
        let by_source = until(Blocked::Source(source)).map(|until| (Key::Source(source), until));
        let by_name = until(Blocked::NameFrom(name, source)).map(|until| (Key::Name(name), until));
        let (key, until) = match (by_source, by_name) {
            (Some(s), Some(n)) => {
                if s.1 >= n.1 {
                    s
                } else {
                    n
                }
            }
            (one, other) => one.or(other)?,
        };
        Some(Throttled {
            retry_after: Duration::from_millis(u64::try_from(until - now_ms).unwrap_or(0)),
            audit: self.refused(key, now_ms),
        })
    }

    fn remember_block(&mut self, blocked: Blocked, until_ms: i64, now_ms: i64) {
        if !self.blocked.contains_key(&blocked) {
            make_room(&mut self.blocked, |&until| until <= now_ms, |&until| until);
        }
        let until = self.blocked.entry(blocked).or_insert(until_ms);
        *until = (*until).max(until_ms);
    }

    /// Counts a refusal of `key`; `Some(unaudited)` when it is the first in its window.
    fn refused(&mut self, key: Key, now_ms: i64) -> Option<u32> {
        let window = duration_ms(THROTTLED_AUDIT_WINDOW);
        if !self.audits.contains_key(&key) {
            make_room(
                &mut self.audits,
                |audit| now_ms - audit.last_audited_ms >= window,
                |audit| audit.last_audited_ms,
            );
            self.audits.insert(
                key,
                Audit {
                    last_audited_ms: now_ms,
                    unaudited: 0,
                },
            );
            return Some(0);
        }
        let audit = self.audits.get_mut(&key)?;
        if now_ms - audit.last_audited_ms >= window {
            audit.last_audited_ms = now_ms;
            Some(std::mem::take(&mut audit.unaudited))
        } else {
            audit.unaudited = audit.unaudited.saturating_add(1);
            None
        }
    }
}

/// Makes room for one more entry in a full table: drops the entries that no longer
/// matter, then, if that freed less than a tenth, the tenth that is oldest by `age`.
/// The table is then rebuilt at its size for [`MAX_ENTRIES`]: removals leave markers
/// that would otherwise make it grow.
fn make_room<K: Eq + Hash + Copy, V>(
    table: &mut HashMap<K, V>,
    spent: impl Fn(&V) -> bool,
    age: impl Fn(&V) -> i64,
) {
    if table.len() < MAX_ENTRIES {
        return;
    }
    table.retain(|_, v| !spent(v));
    let tenth = MAX_ENTRIES / 10;
    if table.len() + tenth > MAX_ENTRIES {
        let mut ages: Vec<(i64, K)> = table.iter().map(|(k, v)| (age(v), *k)).collect();
        ages.select_nth_unstable_by_key(tenth - 1, |(at, _)| *at);
        for (_, key) in &ages[..tenth] {
            table.remove(key);
        }
    }
    table.shrink_to(MAX_ENTRIES);
}

fn millis(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn duration_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER_IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    /// A whole second, so that waits computed from stored milliseconds are exact.
    fn t0() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    async fn store(dir: &tempfile::TempDir) -> Store {
        Store::open(&format!("sqlite://{}/throttle.db", dir.path().display()))
            .await
            .unwrap()
    }

    async fn throttle(dir: &tempfile::TempDir, policy: ThrottlePolicy) -> SignInThrottle {
        SignInThrottle::new(policy, store(dir).await)
    }

    async fn admit(
        throttle: &SignInThrottle,
        user: &str,
        source: IpAddr,
        now: OffsetDateTime,
    ) -> Result<Attempt, Throttled> {
        throttle.admit(user, source, now).await.unwrap()
    }

    async fn fail(throttle: &SignInThrottle, user: &str, source: IpAddr, now: OffsetDateTime) {
        admit(throttle, user, source, now)
            .await
            .unwrap()
            .failed()
            .await;
    }

    #[tokio::test]
    async fn five_failures_from_a_source_are_free_then_delays_double_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let throttle = throttle(&dir, ThrottlePolicy::default()).await;
        let t0 = t0();
        for _ in 0..5 {
            fail(&throttle, "alice", IP, t0).await;
        }
        let mut delay = Duration::from_secs(1);
        let refused = admit(&throttle, "alice", IP, t0).await.unwrap_err();
        assert_eq!(refused.retry_after, delay);
        let mut at = t0;
        for _ in 0..12 {
            at += delay;
            fail(&throttle, "alice", IP, at).await;
            delay = (delay * 2).min(Duration::from_secs(900));
            let refused = admit(&throttle, "alice", IP, at).await.unwrap_err();
            assert_eq!(refused.retry_after, delay);
        }
        assert!(admit(&throttle, "alice", IP, at + delay).await.is_ok());
    }

    #[tokio::test]
    async fn one_attempt_per_key_is_in_flight_and_a_dropped_one_is_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let throttle = throttle(&dir, ThrottlePolicy::default()).await;
        let now = t0();
        let first = admit(&throttle, "alice", IP, now).await.unwrap();
        let second = admit(&throttle, "alice", IP, now).await.unwrap_err();
        assert_eq!(second.retry_after, IN_FLIGHT_WAIT);
        // Another source for a name with an attempt in flight waits too.
        assert!(admit(&throttle, "alice", OTHER_IP, now).await.is_err());
        drop(first);
        let source = Key::Source(SourceKey::of(IP)).column();
        let mut counted = None;
        for _ in 0..100 {
            counted = throttle.store.sign_in_backoff(&source).await.unwrap();
            if counted.is_some_and(|row| row.failures == 1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(counted.map(|row| row.failures), Some(1), "{counted:?}");
        for _ in 0..4 {
            fail(&throttle, "alice", IP, now).await;
        }
        assert!(
            admit(&throttle, "alice", IP, now).await.is_err(),
            "the dropped attempt was the first of five failures"
        );
    }

    #[tokio::test]
    async fn a_claim_that_outlived_its_lease_does_not_free_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let throttle = throttle(&dir, ThrottlePolicy::default()).await;
        let t0 = t0();
        let late = admit(&throttle, "frank", IP, t0).await.unwrap();
        let after = t0 + IN_FLIGHT_LEASE + Duration::from_secs(1);
        let next = admit(&throttle, "frank", IP, after).await;
        let next = next.expect("the lease ended: the keys are claimed again");
        late.failed().await;
        let refused = admit(&throttle, "frank", OTHER_IP, after)
            .await
            .unwrap_err();
        assert_eq!(
            refused.retry_after, IN_FLIGHT_WAIT,
            "the next claim still holds the name"
        );
        next.unchecked().await;
        let name = Key::Name(NameKey::of("frank")).column();
        let row = throttle
            .store
            .sign_in_backoff(&name)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.failures, 1, "the late attempt's failure counts");
        assert!(admit(&throttle, "frank", OTHER_IP, after).await.is_ok());
    }

    #[tokio::test]
    async fn a_known_address_escapes_the_users_ceiling_but_not_its_own_back_off() {
        let dir = tempfile::tempdir().unwrap();
        let policy = ThrottlePolicy {
            free_failures_per_user: 10,
            ..ThrottlePolicy::default()
        };
        let throttle = throttle(&dir, policy).await;
        let now = t0();
        admit(&throttle, "admin", IP, now)
            .await
            .unwrap()
            .succeeded()
            .await;
        // An attacker elsewhere, from many addresses, reaches the user's ceiling.
        for i in 0..10u8 {
            fail(&throttle, "admin", IpAddr::from([10, 0, 0, i]), now).await;
        }
        assert!(
            admit(&throttle, "admin", IpAddr::from([10, 0, 1, 1]), now)
                .await
                .is_err(),
            "a new address waits"
        );
        let usual = admit(&throttle, "admin", IP, now).await;
        assert!(usual.is_ok(), "the person's usual address does not");
        usual.unwrap().succeeded().await;
        // At the usual address, the address's own back-off still applies.
        for _ in 0..5 {
            fail(&throttle, "admin", IP, now).await;
        }
        assert!(admit(&throttle, "admin", IP, now).await.is_err());
    }

    #[tokio::test]
    async fn a_source_is_blocked_for_every_name_and_ipv6_counts_by_64() {
        use std::net::Ipv6Addr;
        let dir = tempfile::tempdir().unwrap();
        let throttle = throttle(&dir, ThrottlePolicy::default()).await;
        let now = t0();
        let host = |last: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, last));
        for i in 0..5 {
            fail(&throttle, &format!("user{i}"), host(i), now).await;
        }
        assert!(admit(&throttle, "someone", host(99), now).await.is_err());
        let other_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1));
        assert!(admit(&throttle, "someone", other_64, now).await.is_ok());
        let mapped = IpAddr::V6(std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        for i in 0..5 {
            fail(&throttle, &format!("v4user{i}"), IP, now).await;
        }
        assert!(
            admit(&throttle, "x", mapped, now).await.is_err(),
            "IPv4-mapped is IPv4"
        );
    }

    #[tokio::test]
    async fn failures_are_forgotten_after_a_quiet_hour_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let throttle = throttle(&dir, ThrottlePolicy::default()).await;
        let t0 = t0();
        for _ in 0..4 {
            fail(&throttle, "carol", IP, t0).await;
        }
        let later = t0 + Duration::from_secs(3601);
        fail(&throttle, "carol", IP, later).await;
        let admitted = admit(&throttle, "carol", IP, later).await;
        admitted.expect("the count started over").unchecked().await;
        let source = Key::Source(SourceKey::of(IP)).column();
        let much_later = later + Duration::from_secs(3601);
        assert_eq!(
            throttle.prune(much_later).await.unwrap(),
            2,
            "source and name"
        );
        assert_eq!(throttle.store.sign_in_backoff(&source).await.unwrap(), None);
    }

    #[tokio::test]
    async fn refusals_are_audited_once_per_key_and_window_and_remembered_blocks_need_no_query() {
        let dir = tempfile::tempdir().unwrap();
        let throttle = throttle(
            &dir,
            ThrottlePolicy {
                base_delay: Duration::from_secs(600),
                ..ThrottlePolicy::default()
            },
        )
        .await;
        let now = t0();
        for _ in 0..5 {
            fail(&throttle, "dave", IP, now).await;
        }
        assert_eq!(
            admit(&throttle, "dave", IP, now).await.unwrap_err().audit,
            Some(0)
        );
        // The block is remembered: refusals go on with the database gone.
        throttle.store.close().await;
        std::fs::remove_dir_all(dir.path()).unwrap();
        for _ in 0..3 {
            assert_eq!(
                admit(&throttle, "dave", IP, now).await.unwrap_err().audit,
                None
            );
        }
        let next_window = now + THROTTLED_AUDIT_WINDOW;
        assert_eq!(
            admit(&throttle, "dave", IP, next_window)
                .await
                .unwrap_err()
                .audit,
            Some(3)
        );
        assert!(
            throttle.admit("dave", OTHER_IP, now).await.is_err(),
            "another source is not blocked: it needs the database"
        );
    }

    #[tokio::test]
    async fn replicas_on_one_database_count_the_same_failures_and_share_the_in_flight_key() {
        let dir = tempfile::tempdir().unwrap();
        let (one, other) = (
            throttle(&dir, ThrottlePolicy::default()).await,
            throttle(&dir, ThrottlePolicy::default()).await,
        );
        let now = t0();
        let checking = admit(&one, "erin", IP, now).await.unwrap();
        let refused = admit(&other, "erin", OTHER_IP, now).await.unwrap_err();
        assert_eq!(refused.retry_after, IN_FLIGHT_WAIT, "the name is in flight");
        checking.failed().await;
        for i in 1..5 {
            let replica = if i % 2 == 0 { &one } else { &other };
            fail(replica, "erin", IP, now).await;
        }
        for replica in [&one, &other] {
            let refused = admit(replica, "erin", IP, now).await.unwrap_err();
            assert_eq!(refused.retry_after, Duration::from_secs(1));
        }
    }

    #[test]
    fn memory_stays_bounded_under_distinct_names_and_addresses() {
        let mut memory = Memory::default();
        let now = millis(t0());
        for i in 0..100_000u32 {
            let source = SourceKey::of(IpAddr::V6(std::net::Ipv6Addr::from_bits(
                u128::from(i) << 64,
            )));
            let name = NameKey::of(&format!("user{i}"));
            memory.remember_block(Blocked::NameFrom(name, source), now + 1000, now);
            memory.refused(Key::Name(name), now);
            memory.remember_block(Blocked::Source(source), now + 1000, now);
            memory.refused(Key::Source(source), now);
        }
        assert!(
            memory.blocked.len() <= MAX_ENTRIES,
            "{}",
            memory.blocked.len()
        );
        assert!(
            memory.audits.len() <= MAX_ENTRIES,
            "{}",
            memory.audits.len()
        );
        // Each slot of a table holds one key, one value and one control byte.
        fn bytes<K, V>(table: &HashMap<K, V>) -> usize {
            table.capacity() * (std::mem::size_of::<(K, V)>() + 1)
        }
        let bytes = bytes(&memory.blocked) + bytes(&memory.audits);
        eprintln!("throttle memory after 100,000 names and addresses: {bytes} bytes");
        assert!(bytes <= 8 << 20, "{bytes} bytes");
    }
}
