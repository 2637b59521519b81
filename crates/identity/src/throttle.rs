//! Sign-in throttling: exponential back-off per source address and a per-user ceiling,
//! counted before any password is hashed, in bounded memory.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    /// `Some(n)` when this refusal should be audited: the first of its key in a
    /// [`THROTTLED_AUDIT_WINDOW`], with `n` refusals of that key not audited since the
    /// last row. `None`: counted, not written.
    pub audit: Option<u32>,
}

/// Throttled attempts of one key write at most one audit row per window.
pub const THROTTLED_AUDIT_WINDOW: Duration = Duration::from_secs(60);

/// Entries kept per table (sources, user names, known addresses); beyond it the oldest
/// go first. At the cap the three tables take ≈ 15 MiB (see the memory test).
pub const MAX_ENTRIES: usize = 50_000;

/// Addresses remembered per user.
const KNOWN_ADDRESSES_PER_USER: usize = 4;

/// What a refused attempt waits when its only fault is that another attempt of the same
/// key is still being checked.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(1);

/// Exponential back-off after failed sign-ins, per source address and per user name.
///
/// An attempt is admitted only while each of its keys is not blocked and has no other
/// attempt in flight, so a burst of parallel guesses gets as many hashes as a patient
/// attacker, and one key never holds more than one of the hasher's slots. An attempt that
/// ends without a verdict (its request was dropped) counts as a failure.
///
/// The user key is a digest of whatever name was typed, known or not, so a throttled
/// unknown name looks exactly like a throttled real one; it is not consulted from an
/// address where that name signed in within [`ThrottlePolicy::known_address_ttl`].
/// Success clears nothing: an attacker cannot reset a count by signing in to their own
/// account. State is in memory, per process, in tables of at most [`MAX_ENTRIES`].
#[derive(Debug)]
pub struct SignInThrottle {
    policy: ThrottlePolicy,
    /// What [`Millis`] count from.
    epoch: Instant,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    sources: Failures<SourceKey>,
    users: Failures<NameKey>,
    known: HashMap<NameKey, KnownAddresses>,
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

/// An instant as milliseconds since the throttle was made, counted from 1: 8 bytes where
/// `Instant` takes 16, in tables of up to [`MAX_ENTRIES`] rows. [`Millis::NEVER`] (0)
/// marks an empty slot or an event that has not happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
struct Millis(u64);

impl Millis {
    const NEVER: Millis = Millis(0);

    fn since(self, earlier: Millis) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    fn until(self, later: Millis) -> Duration {
        later.since(self)
    }

    fn after(self, delay: Duration) -> Millis {
        Millis(
            self.0
                .saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)),
        )
    }
}

/// 128 bits of SHA-256 over the typed name: names of any length cost the same memory.
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

#[derive(Debug)]
struct Failures<K> {
    entries: HashMap<K, Entry>,
}

impl<K> Default for Failures<K> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    count: u32,
    in_flight: u32,
    last: Millis,
    blocked_until: Millis,
    /// Refusals since the last audited one.
    unaudited: u32,
    last_audited: Millis,
}

/// A user's last [`KNOWN_ADDRESSES_PER_USER`] addresses of a successful sign-in, with
/// when (`Millis::NEVER`: an empty slot).
#[derive(Debug, Clone, Copy, Default)]
struct KnownAddresses {
    sources: [SourceKey; KNOWN_ADDRESSES_PER_USER],
    seen: [Millis; KNOWN_ADDRESSES_PER_USER],
}

impl KnownAddresses {
    fn contains(&self, source: SourceKey, now: Millis, ttl: Duration) -> bool {
        self.sources
            .iter()
            .zip(self.seen)
            .any(|(known, seen)| *known == source && seen != Millis::NEVER && now.since(seen) < ttl)
    }

    /// Remembers `source` as seen `now`, in its own slot, else the least recently seen
    /// (an empty one first).
    fn remember(&mut self, source: SourceKey, now: Millis) {
        let slot = (0..KNOWN_ADDRESSES_PER_USER)
            .find(|&i| self.seen[i] != Millis::NEVER && self.sources[i] == source)
            .or_else(|| (0..KNOWN_ADDRESSES_PER_USER).min_by_key(|&i| self.seen[i]))
            .unwrap_or(0);
        self.sources[slot] = source;
        self.seen[slot] = now;
    }

    fn last_seen(&self) -> Option<Millis> {
        self.seen.iter().copied().max()
    }
}

/// One admitted attempt: report its verdict with [`Attempt::succeeded`] or
/// [`Attempt::failed`]; dropped without one, it counts as failed.
#[derive(Debug)]
pub struct Attempt<'a> {
    throttle: &'a SignInThrottle,
    source: SourceKey,
    /// `None` when the user key is not consulted (a known address).
    user: Option<NameKey>,
    name: NameKey,
    /// When it was admitted; its verdict is recorded as of then.
    at: Millis,
    finished: bool,
}

impl Attempt<'_> {
    /// The password was right: the source becomes one of the user's known addresses.
    pub fn succeeded(mut self) {
        self.finished = true;
        let now = self.at;
        let mut state = self.throttle.lock();
        state.sources.finish(&self.source);
        if let Some(user) = &self.user {
            state.users.finish(user);
        }
        if !state.known.contains_key(&self.name) && state.known.len() >= MAX_ENTRIES {
            let ttl = self.throttle.policy.known_address_ttl;
            evict_oldest(&mut state.known, now, ttl, |k| k.last_seen());
        }
        state
            .known
            .entry(self.name)
            .or_default()
            .remember(self.source, now);
    }

    /// Nothing was checked (the hasher was busy, the store failed, the new password was
    /// refused before the old one was checked): the attempt counts neither way.
    pub fn unchecked(mut self) {
        self.finished = true;
        let mut state = self.throttle.lock();
        state.sources.finish(&self.source);
        if let Some(user) = &self.user {
            state.users.finish(user);
        }
    }

    /// The password was wrong (or the user unknown or disabled).
    pub fn failed(mut self) {
        self.finished = true;
        self.record_failure();
    }

    fn record_failure(&self) {
        let now = self.at;
        let policy = &self.throttle.policy;
        let mut state = self.throttle.lock();
        state.sources.finish(&self.source);
        state
            .sources
            .fail(self.source, now, policy, policy.free_failures);
        if let Some(user) = self.user {
            state.users.finish(&user);
            state
                .users
                .fail(user, now, policy, policy.free_failures_per_user);
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.record_failure();
        }
    }
}

impl SignInThrottle {
    pub fn new(policy: ThrottlePolicy) -> Self {
        Self {
            policy,
            epoch: Instant::now(),
            state: Mutex::new(State::default()),
        }
    }

    /// Admits one attempt for the typed `user` from `source` at `now`, or refuses it
    /// with how long to wait: while a key is blocked by its back-off, or while another
    /// attempt of the same key is being checked.
    pub fn admit(
        &self,
        user: &str,
        source: IpAddr,
        now: Instant,
    ) -> Result<Attempt<'_>, Throttled> {
        let now = Millis(
            u64::try_from(now.saturating_duration_since(self.epoch).as_millis())
                .unwrap_or(u64::MAX - 1)
                + 1,
        );
        let source = SourceKey::of(source);
        let name = NameKey::of(user);
        let mut state = self.lock();
        let known = state
            .known
            .get(&name)
            .is_some_and(|k| k.contains(source, now, self.policy.known_address_ttl));
        let user = (!known).then_some(name);
        let source_wait = state.sources.wait(&source, now);
        let user_wait = user.map_or(Duration::ZERO, |u| state.users.wait(&u, now));
        if !source_wait.is_zero() || !user_wait.is_zero() {
            // The key that blocks for longer carries the refusal's audit summary.
            let audit = if source_wait >= user_wait {
                state.sources.refused(&source, now)
            } else {
                state.users.refused(&name, now)
            };
            return Err(Throttled {
                retry_after: source_wait.max(user_wait),
                audit,
            });
        }
        state.sources.begin(source, now, &self.policy);
        if let Some(user) = user {
            state.users.begin(user, now, &self.policy);
        }
        Ok(Attempt {
            throttle: self,
            source,
            user,
            name,
            at: now,
            finished: false,
        })
    }

    /// Entries held now in the source, user-name and known-address tables.
    pub fn entries(&self) -> (usize, usize, usize) {
        let state = self.lock();
        (
            state.sources.entries.len(),
            state.users.entries.len(),
            state.known.len(),
        )
    }

    /// Bytes the three tables have allocated: each slot of a table holds one key, one
    /// value and one control byte.
    pub fn table_bytes(&self) -> usize {
        fn bytes<K, V>(table: &HashMap<K, V>) -> usize {
            table.capacity() * (std::mem::size_of::<(K, V)>() + 1)
        }
        let state = self.lock();
        bytes(&state.sources.entries) + bytes(&state.users.entries) + bytes(&state.known)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<K: Eq + Hash + Copy> Failures<K> {
    /// How long `key` must wait at `now` before an attempt is admitted.
    fn wait(&self, key: &K, now: Millis) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| {
            let blocked = now.until(e.blocked_until);
            if blocked.is_zero() && e.in_flight > 0 {
                IN_FLIGHT_WAIT
            } else {
                blocked
            }
        })
    }

    /// Counts a refusal of `key`; `Some(unaudited)` when it is the first in its window.
    fn refused(&mut self, key: &K, now: Millis) -> Option<u32> {
        let entry = self.entries.get_mut(key)?;
        let due = entry.last_audited == Millis::NEVER
            || now.since(entry.last_audited) >= THROTTLED_AUDIT_WINDOW;
        if due {
            let unaudited = std::mem::take(&mut entry.unaudited);
            entry.last_audited = now;
            Some(unaudited)
        } else {
            entry.unaudited = entry.unaudited.saturating_add(1);
            None
        }
    }

    fn begin(&mut self, key: K, now: Millis, policy: &ThrottlePolicy) {
        if !self.entries.contains_key(&key) && self.entries.len() >= MAX_ENTRIES {
            evict_oldest(&mut self.entries, now, policy.forget_after, |e| {
                (e.in_flight == 0).then_some(e.last)
            });
        }
        let entry = self.entries.entry(key).or_insert(Entry {
            count: 0,
            in_flight: 0,
            last: now,
            blocked_until: now,
            unaudited: 0,
            last_audited: Millis::NEVER,
        });
        entry.in_flight += 1;
    }

    fn finish(&mut self, key: &K) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
        }
    }

    fn fail(&mut self, key: K, now: Millis, policy: &ThrottlePolicy, free: u32) {
        let Some(entry) = self.entries.get_mut(&key) else {
            return;
        };
        if now.since(entry.last) >= policy.forget_after {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        if entry.count >= free {
            let doublings = (entry.count - free).min(30);
            let delay = policy
                .base_delay
                .saturating_mul(1 << doublings)
                .min(policy.max_delay);
            entry.blocked_until = now.after(delay);
        }
    }
}

/// Makes room in a full table: drops what was last seen `ttl` or more ago, then, if that
/// freed less than a tenth, the least recently seen tenth. `seen` is `None` for an entry
/// that must stay (an attempt of it is in flight). The table is then rebuilt at its
/// size for [`MAX_ENTRIES`]: removals leave markers that would otherwise make it grow.
fn evict_oldest<K: Eq + Hash + Copy, V>(
    table: &mut HashMap<K, V>,
    now: Millis,
    ttl: Duration,
    seen: impl Fn(&V) -> Option<Millis>,
) {
    table.retain(|_, v| seen(v).is_none_or(|at| now.since(at) < ttl));
    let tenth = MAX_ENTRIES / 10;
    if table.len() + tenth > MAX_ENTRIES {
        let mut ages: Vec<(Millis, K)> = table
            .iter()
            .filter_map(|(k, v)| seen(v).map(|at| (at, *k)))
            .collect();
        let cut = tenth.min(ages.len());
        if cut > 0 {
            ages.select_nth_unstable_by_key(cut - 1, |(at, _)| *at);
            for (_, key) in &ages[..cut] {
                table.remove(key);
            }
        }
    }
    table.shrink_to(MAX_ENTRIES);
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER_IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    fn fail(throttle: &SignInThrottle, user: &str, source: IpAddr, now: Instant) {
        throttle.admit(user, source, now).unwrap().failed();
    }

    #[test]
    fn five_failures_from_a_source_are_free_then_delays_double_up_to_the_cap() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let t0 = Instant::now();
        for _ in 0..4 {
            fail(&throttle, "alice", IP, t0);
        }
        fail(&throttle, "alice", IP, t0);
        let mut delay = Duration::from_secs(1);
        assert_eq!(
            throttle.admit("alice", IP, t0).unwrap_err().retry_after,
            delay
        );
        let mut at = t0;
        for _ in 0..12 {
            at += delay;
            fail(&throttle, "alice", IP, at);
            delay = (delay * 2).min(Duration::from_secs(900));
            assert_eq!(
                throttle.admit("alice", IP, at).unwrap_err().retry_after,
                delay
            );
        }
        assert!(throttle.admit("alice", IP, at + delay).is_ok());
    }

    #[test]
    fn one_attempt_per_key_is_in_flight_and_a_dropped_one_is_a_failure() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let now = Instant::now();
        let first = throttle.admit("alice", IP, now).unwrap();
        let second = throttle.admit("alice", IP, now).unwrap_err();
        assert_eq!(second.retry_after, IN_FLIGHT_WAIT);
        // Another source for a name with an attempt in flight waits too.
        assert!(throttle.admit("alice", OTHER_IP, now).is_err());
        drop(first);
        for _ in 0..4 {
            fail(&throttle, "alice", IP, now);
        }
        assert!(
            throttle.admit("alice", IP, now).is_err(),
            "the dropped attempt was the first of five failures"
        );
    }

    #[test]
    fn a_known_address_escapes_the_users_ceiling_but_not_its_own_back_off() {
        let policy = ThrottlePolicy {
            free_failures_per_user: 10,
            ..ThrottlePolicy::default()
        };
        let throttle = SignInThrottle::new(policy);
        let now = Instant::now();
        throttle.admit("admin", IP, now).unwrap().succeeded();
        // An attacker elsewhere, from many addresses, reaches the user's ceiling.
        for i in 0..10u8 {
            fail(&throttle, "admin", IpAddr::from([10, 0, 0, i]), now);
        }
        assert!(
            throttle
                .admit("admin", IpAddr::from([10, 0, 1, 1]), now)
                .is_err(),
            "a new address waits"
        );
        let usual = throttle.admit("admin", IP, now);
        assert!(usual.is_ok(), "the person's usual address does not");
        usual.unwrap().succeeded();
        // At the usual address, the address's own back-off still applies.
        for _ in 0..5 {
            fail(&throttle, "admin", IP, now);
        }
        assert!(throttle.admit("admin", IP, now).is_err());
    }

    #[test]
    fn a_source_is_blocked_for_every_name_and_ipv6_counts_by_64() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let now = Instant::now();
        use std::net::Ipv6Addr;
        let host = |last: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, last));
        for i in 0..5 {
            fail(&throttle, &format!("user{i}"), host(i), now);
        }
        assert!(throttle.admit("someone", host(99), now).is_err());
        let other_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1));
        assert!(throttle.admit("someone", other_64, now).is_ok());
        let mapped = IpAddr::V6(std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        for i in 0..5 {
            fail(&throttle, &format!("v4user{i}"), IP, now);
        }
        assert!(
            throttle.admit("x", mapped, now).is_err(),
            "IPv4-mapped is IPv4"
        );
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_hour() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let t0 = Instant::now();
        for _ in 0..4 {
            fail(&throttle, "carol", IP, t0);
        }
        let later = t0 + Duration::from_secs(3601);
        fail(&throttle, "carol", IP, later);
        assert!(throttle.admit("carol", IP, later).is_ok());
    }

    #[test]
    fn refusals_are_audited_once_per_key_and_window() {
        let throttle = SignInThrottle::new(ThrottlePolicy {
            base_delay: Duration::from_secs(600),
            ..ThrottlePolicy::default()
        });
        let now = Instant::now();
        for _ in 0..5 {
            fail(&throttle, "dave", IP, now);
        }
        assert_eq!(throttle.admit("dave", IP, now).unwrap_err().audit, Some(0));
        for _ in 0..3 {
            assert_eq!(throttle.admit("dave", IP, now).unwrap_err().audit, None);
        }
        let next_window = now + THROTTLED_AUDIT_WINDOW;
        assert_eq!(
            throttle.admit("dave", IP, next_window).unwrap_err().audit,
            Some(3)
        );
    }

    #[test]
    fn memory_stays_bounded_under_distinct_names_and_addresses() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let now = Instant::now();
        let long_name = "x".repeat(16 * 1024);
        for i in 0..100_000u32 {
            let source = IpAddr::V6(std::net::Ipv6Addr::from_bits(u128::from(i) << 64));
            let name = format!("{long_name}{i}");
            let attempt = throttle.admit(&name, source, now).unwrap();
            if i % 2 == 0 {
                attempt.failed();
            } else {
                attempt.succeeded();
            }
        }
        let (sources, users, known) = throttle.entries();
        assert!(sources <= MAX_ENTRIES, "{sources}");
        assert!(users <= MAX_ENTRIES, "{users}");
        assert!(known <= MAX_ENTRIES, "{known}");
        let bytes = throttle.table_bytes();
        eprintln!("throttle tables after 100,000 names and addresses: {bytes} bytes");
        assert!(bytes <= 16 << 20, "{bytes} bytes");
    }
}
