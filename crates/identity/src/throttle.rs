use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How failed sign-ins slow further attempts down.
#[derive(Debug, Clone, Copy)]
pub struct ThrottlePolicy {
    /// Failures allowed before any delay (SPEC §3: 5): the attempt after the fifth
    /// failure already waits.
    pub free_failures: u32,
    /// Delay after the first failure beyond the free ones; it doubles with each further one.
    pub base_delay: Duration,
    /// Upper bound of the delay.
    pub max_delay: Duration,
    /// A key with no failure for this long starts over.
    pub forget_after: Duration,
}

impl Default for ThrottlePolicy {
    fn default() -> Self {
        Self {
            free_failures: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(15 * 60),
            forget_after: Duration::from_secs(60 * 60),
        }
    }
}

/// Exponential back-off after failed sign-ins, kept per user name and per source IP.
///
/// The user-name key is whatever name was typed, known or not, so a throttled unknown
/// name looks exactly like a throttled real one. Success clears the user key only: an
/// attacker cannot reset their IP's count by signing in to their own account.
/// State is in memory, per process.
#[derive(Debug)]
pub struct SignInThrottle {
    policy: ThrottlePolicy,
    users: Mutex<Failures<String>>,
    sources: Mutex<Failures<IpAddr>>,
}

#[derive(Debug)]
struct Failures<K> {
    entries: HashMap<K, Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    count: u32,
    last: Instant,
    blocked_until: Instant,
}

/// Entries kept per map before old ones are pruned.
const MAX_ENTRIES: usize = 100_000;

impl SignInThrottle {
    pub fn new(policy: ThrottlePolicy) -> Self {
        Self {
            policy,
            users: Mutex::new(Failures::new()),
            sources: Mutex::new(Failures::new()),
        }
    }

    /// `Err(retry_after)` while either key is blocked at `now`.
    pub fn check(&self, user: &str, source: IpAddr, now: Instant) -> Result<(), Duration> {
        let wait = lock(&self.users)
            .blocked_for(user, now)
            .max(lock(&self.sources).blocked_for(&source, now));
        if wait.is_zero() { Ok(()) } else { Err(wait) }
    }

    pub fn record_failure(&self, user: &str, source: IpAddr, now: Instant) {
        lock(&self.users).fail(user.to_owned(), now, &self.policy);
        lock(&self.sources).fail(source, now, &self.policy);
    }

    pub fn record_success(&self, user: &str) {
        lock(&self.users).entries.remove(user);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<K: Eq + Hash> Failures<K> {
    fn new() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }

    fn blocked_for<Q>(&self, key: &Q, now: Instant) -> Duration
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.entries.get(key).map_or(Duration::ZERO, |e| {
            e.blocked_until.saturating_duration_since(now)
        })
    }

    fn fail(&mut self, key: K, now: Instant, policy: &ThrottlePolicy) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries
                .retain(|_, e| now.saturating_duration_since(e.last) < policy.forget_after);
        }
        let entry = self.entries.entry(key).or_insert(Entry {
            count: 0,
            last: now,
            blocked_until: now,
        });
        if now.saturating_duration_since(entry.last) >= policy.forget_after {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        if entry.count >= policy.free_failures {
            let doublings = (entry.count - policy.free_failures).min(30);
            let delay = policy
                .base_delay
                .saturating_mul(1 << doublings)
                .min(policy.max_delay);
            entry.blocked_until = now + delay;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER_IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    #[test]
    fn five_failures_are_free_then_delays_double_up_to_the_cap() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let t0 = Instant::now();
        for _ in 0..4 {
            throttle.record_failure("alice", IP, t0);
            assert_eq!(throttle.check("alice", IP, t0), Ok(()));
        }
        let mut expected = Duration::from_secs(1);
        for _ in 0..12 {
            throttle.record_failure("alice", IP, t0);
            let want = expected.min(Duration::from_secs(900));
            assert_eq!(throttle.check("alice", IP, t0), Err(want));
            expected *= 2;
        }
        assert_eq!(
            throttle.check("alice", IP, t0 + Duration::from_secs(900)),
            Ok(())
        );
    }

    #[test]
    fn user_and_source_keys_block_independently() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let now = Instant::now();
        for i in 0..5 {
            throttle.record_failure(&format!("user{i}"), IP, now);
        }
        // The source is blocked for every name, another source is not.
        assert!(throttle.check("someone", IP, now).is_err());
        assert_eq!(throttle.check("someone", OTHER_IP, now), Ok(()));

        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        for i in 0..5 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 1, i));
            throttle.record_failure("bob", ip, now);
        }
        // The user is blocked from every source.
        assert!(throttle.check("bob", OTHER_IP, now).is_err());
        throttle.record_success("bob");
        assert_eq!(throttle.check("bob", OTHER_IP, now), Ok(()));
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_hour() {
        let throttle = SignInThrottle::new(ThrottlePolicy::default());
        let t0 = Instant::now();
        for _ in 0..4 {
            throttle.record_failure("carol", IP, t0);
        }
        let later = t0 + Duration::from_secs(3601);
        throttle.record_failure("carol", IP, later);
        assert_eq!(throttle.check("carol", IP, later), Ok(()));
    }
}
