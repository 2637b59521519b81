//! Watch fan-out: the changes writes produce (`Change`, with its encoded watch line), a
//! change log per resource type that open watches read at their own pace, and a
//! dispatcher task that wakes the watches of a changed type in slices.
//!
//! A write appends its change to its type's log and, if watches of that type are parked,
//! hands the type to the dispatcher: it never wakes a watch itself, so a write costs the
//! same with 1,000 watches open as with none, and holds the store lock only for the
//! append. The dispatcher wakes [`WAKE_SLICE`] watches at a time and yields between
//! slices, so other requests (the next write) run between them instead of after every
//! watch. A watch woken late finds every change queued since it last read and sends them
//! together (one chunk, one TLS record), so the more the fan-out falls behind, the less
//! each change costs.
//!
//! A round that wakes `SPACED_FANOUT` watches or more starts at least `ROUND_SPACING`
//! after the type's previous round: a round's cost is one write per watch whatever it
//! carries, so this bounds the fan-out's cost for a type with hundreds of watches
//! (40 rounds a second) however fast it is written, at the price of up to
//! `ROUND_SPACING` more delivery latency while writes come faster than that. Smaller
//! fan-outs, and the first change after a quiet spell, are woken at once.
//!
//! Only watches of the changed type are woken (a watch serves one type, as in the real
//! API server's per-type watch cache). Each type's log keeps at most `LOG_CAPACITY`
//! changes that some watch has not read; a watch further behind has lagged and ends with
//! an `ERROR` event, `410 Expired` (the real server closes a watch that cannot keep up).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A change, as streamed by watches.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    /// The `resourceVersion` this change produced.
    pub(crate) rv: u64,
    /// API group.
    pub(crate) group: String,
    /// Resource plural.
    pub(crate) plural: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub(crate) kind: &'static str,
    /// The object after the change (for `DELETED`, its last state with the deletion's RV).
    pub(crate) object: Value,
    /// For `MODIFIED`: the object before the change (watches use it to turn an object
    /// entering or leaving a selector into `ADDED` or `DELETED`, as the watch cache does).
    pub(crate) prev: Option<Value>,
    /// The encoded watch line (`{"type":…,"object":…}\n`), computed once and shared by
    /// every watch that sends this change unchanged.
    pub(crate) line: OnceLock<bytes::Bytes>,
}

impl Change {
    /// The watch event line for this change, encoded once.
    pub(crate) fn line(&self) -> bytes::Bytes {
        self.line
            .get_or_init(|| {
                let mut line = serde_json::to_vec(
                    &serde_json::json!({"type": self.kind, "object": self.object}),
                )
                .unwrap_or_default();
                line.push(b'\n');
                bytes::Bytes::from(line)
            })
            .clone()
    }
}

/// A watch event line, `{"type":<kind>,"object":<object_json>}\n`, from an object
/// already encoded.
pub(crate) fn event_line(kind: &str, object_json: &[u8]) -> bytes::Bytes {
    let mut line = Vec::with_capacity(object_json.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object_json);
    line.extend_from_slice(b"}\n");
    bytes::Bytes::from(line)
}

/// Most changes a type's log keeps for watches that have not read them yet.
pub(crate) const LOG_CAPACITY: usize = 16_384;

/// Watches the dispatcher wakes before it lets other tasks run.
pub const WAKE_SLICE: usize = 32;

/// Parked watches from which a type's wake rounds are spaced by [`ROUND_SPACING`].
pub(crate) const SPACED_FANOUT: usize = 256;

/// Least time between the starts of two wake rounds of [`SPACED_FANOUT`] watches or more.
pub(crate) const ROUND_SPACING: Duration = Duration::from_millis(25);

/// `(group, plural)`.
type TypeKey = (String, String);

/// The fan-out hub, shared by the store (which publishes), open watches (which read) and
/// the dispatcher task ([`Feed::dispatch`]).
#[derive(Default)]
pub(crate) struct Feed {
    topics: Mutex<HashMap<TypeKey, Arc<Topic>>>,
    /// Types with parked watches and new changes, for the dispatcher.
    ready: Mutex<Vec<Arc<Topic>>>,
    wake_dispatcher: Notify,
    closed: AtomicBool,
}

/// One resource type's change log and the watches parked on it.
struct Topic {
    state: Mutex<TopicState>,
}

#[derive(Default)]
struct TopicState {
    /// Sequence number of `log[0]`; the next change gets `first + log.len()`.
    first: u64,
    log: VecDeque<Arc<Change>>,
    /// Open subscribers (the log is kept only while there are some).
    subscribers: usize,
    /// Wakers of the subscribers that found nothing to read, by a ticket taken when they
    /// parked (the dispatcher wakes them in that order).
    parked: BTreeMap<u64, Waker>,
    next_ticket: u64,
    /// In the dispatcher's `ready` list (or deferred by it).
    queued: bool,
    /// When the dispatcher last started waking this type's watches.
    last_round: Option<Instant>,
    closed: bool,
}

impl TopicState {
    /// The parked watches to wake now, or when their round may start (see
    /// [`ROUND_SPACING`]).
    fn start_round(&mut self, now: Instant) -> Result<Vec<Waker>, Instant> {
        if self.parked.len() >= SPACED_FANOUT
            && let Some(due) = self.last_round.map(|last| last + ROUND_SPACING)
            && due > now
        {
            return Err(due);
        }
        self.queued = false;
        self.last_round = Some(now);
        Ok(std::mem::take(&mut self.parked).into_values().collect())
    }
}

impl Topic {
    fn new(closed: bool) -> Self {
        Self {
            state: Mutex::new(TopicState {
                closed,
                ..TopicState::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TopicState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Feed {
    /// An empty feed; nothing is woken until [`Feed::dispatch`] runs.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn topic(&self, group: &str, plural: &str) -> Arc<Topic> {
        let mut topics = lock(&self.topics);
        if let Some(t) = topics.get(&(group.to_string(), plural.to_string())) {
            return t.clone();
        }
        let t = Arc::new(Topic::new(self.closed.load(Ordering::Acquire)));
        topics.insert((group.to_string(), plural.to_string()), t.clone());
        t
    }

    /// Appends a change to its type's log. Watches of the type read it when the
    /// dispatcher wakes them (or at their next read); nothing is woken here.
    ///
    /// The store calls this under its lock, in resourceVersion order.
    pub(crate) fn publish(&self, change: Arc<Change>) {
        let topic = self.topic(&change.group, &change.plural);
        let hand_over = {
            let mut st = topic.lock();
            if st.subscribers == 0 {
                return;
            }
            st.log.push_back(change);
            if st.log.len() > LOG_CAPACITY {
                st.log.pop_front();
                st.first += 1;
            }
            !st.parked.is_empty() && !std::mem::replace(&mut st.queued, true)
        };
        if hand_over {
            lock(&self.ready).push(topic);
            self.wake_dispatcher.notify_one();
        }
    }

    /// A subscriber to a type's changes published from now on.
    ///
    /// The store calls this under its lock, so that a watch's replayed history and its
    /// subscription meet exactly (nothing missed, nothing repeated).
    pub(crate) fn subscribe(&self, group: &str, plural: &str) -> Subscriber {
        let topic = self.topic(group, plural);
        let next = {
            let mut st = topic.lock();
            st.subscribers += 1;
            st.first + st.log.len() as u64
        };
        Subscriber {
            topic,
            next,
            parked: None,
        }
    }

    /// Ends every watch: subscribers see [`Recv::Closed`] (the server is stopping).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let topics: Vec<Arc<Topic>> = lock(&self.topics).values().cloned().collect();
        for topic in topics {
            let parked: Vec<Waker> = {
                let mut st = topic.lock();
                st.closed = true;
                std::mem::take(&mut st.parked).into_values().collect()
            };
            parked.into_iter().for_each(Waker::wake);
        }
    }

    /// The dispatcher: wakes the parked watches of every type with new changes,
    /// [`WAKE_SLICE`] at a time, yielding to other tasks between slices, and large rounds
    /// no more often than [`ROUND_SPACING`]. Runs until the task is aborted.
    pub(crate) async fn dispatch(self: Arc<Self>) {
        let mut deferred: Vec<(Instant, Arc<Topic>)> = Vec::new();
        loop {
            match deferred.iter().map(|(due, _)| *due).min() {
                Some(due) => tokio::select! {
                    _ = self.wake_dispatcher.notified() => {}
                    _ = tokio::time::sleep_until(due) => {}
                },
                None => self.wake_dispatcher.notified().await,
            }
            let now = Instant::now();
            let mut ready = std::mem::take(&mut *lock(&self.ready));
            deferred.retain(|(due, topic)| {
                let keep = *due > now;
                if !keep {
                    ready.push(topic.clone());
                }
                keep
            });
            for topic in ready {
                let round = topic.lock().start_round(now);
                match round {
                    Ok(parked) => {
                        for slice in parked.chunks(WAKE_SLICE) {
                            slice.iter().for_each(Waker::wake_by_ref);
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(due) => deferred.push((due, topic)),
                }
            }
        }
    }
}

/// What [`Subscriber::poll_recv`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recv {
    /// Changes were appended to the caller's buffer.
    Changes,
    /// More than [`LOG_CAPACITY`] changes were published since this subscriber last read:
    /// some are gone (the watch must end with `410 Expired`).
    Lagged,
    /// The server is stopping.
    Closed,
}

/// One watch's position in its type's change log.
pub(crate) struct Subscriber {
    topic: Arc<Topic>,
    /// Sequence number of the next change to read.
    next: u64,
    /// The ticket this subscriber last parked with (stale once the dispatcher woke it).
    parked: Option<u64>,
}

impl Subscriber {
    /// Appends up to `max` unread changes to `out`, in order. With none to read, parks the
    /// caller (its waker is called once a change arrives, by the dispatcher) and returns
    /// `Pending`.
    pub(crate) fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut Vec<Arc<Change>>,
        max: usize,
    ) -> Poll<Recv> {
        let mut st = self.topic.lock();
        if st.closed {
            return Poll::Ready(Recv::Closed);
        }
        if self.next < st.first {
            return Poll::Ready(Recv::Lagged);
        }
        let from = (self.next - st.first) as usize;
        if from < st.log.len() {
            let to = st.log.len().min(from.saturating_add(max.max(1)));
            out.extend(st.log.range(from..to).cloned());
            self.next += (to - from) as u64;
            return Poll::Ready(Recv::Changes);
        }
        match self.parked.and_then(|t| st.parked.get_mut(&t)) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => w.clone_from(cx.waker()),
            None => {
                let ticket = st.next_ticket;
                st.next_ticket += 1;
                st.parked.insert(ticket, cx.waker().clone());
                self.parked = Some(ticket);
            }
        }
        Poll::Pending
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let mut st = self.topic.lock();
        if let Some(ticket) = self.parked {
            st.parked.remove(&ticket);
        }
        st.subscribers -= 1;
        if st.subscribers == 0 {
            st.first += st.log.len() as u64;
            st.log.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use serde_json::json;

    use super::*;

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Count {
        fn get(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn change(rv: u64, plural: &str) -> Arc<Change> {
        Arc::new(Change {
            rv,
            group: String::new(),
            plural: plural.into(),
            kind: "ADDED",
            object: json!({"metadata": {"name": format!("o{rv}")}}),
            prev: None,
            line: Default::default(),
        })
    }

    fn recv(sub: &mut Subscriber, waker: &Arc<Count>, max: usize) -> (Poll<Recv>, Vec<u64>) {
        let waker = Waker::from(waker.clone());
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        let r = sub.poll_recv(&mut cx, &mut out, max);
        (r, out.iter().map(|c| c.rv).collect())
    }

    /// Runs the dispatcher until it has nothing left to do.
    async fn settle(feed: &Arc<Feed>) {
        let task = tokio::spawn(feed.clone().dispatch());
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        task.abort();
    }

    #[tokio::test]
    async fn parked_subscribers_are_woken_once_per_dispatch_and_read_everything_in_order() {
        let feed = Arc::new(Feed::new());
        let mut a = feed.subscribe("", "configmaps");
        let mut b = feed.subscribe("", "configmaps");
        let (wa, wb) = (Arc::new(Count::default()), Arc::new(Count::default()));
        assert_eq!(recv(&mut a, &wa, 10).0, Poll::Pending);
        assert_eq!(recv(&mut b, &wb, 10).0, Poll::Pending);
        for rv in 2..=4 {
            feed.publish(change(rv, "configmaps"));
        }
        assert_eq!((wa.get(), wb.get()), (0, 0), "a write wakes nobody itself");
        settle(&feed).await;
        assert_eq!((wa.get(), wb.get()), (1, 1), "one wake for three changes");
        assert_eq!(
            recv(&mut a, &wa, 10),
            (Poll::Ready(Recv::Changes), vec![2, 3, 4])
        );
        assert_eq!(
            recv(&mut b, &wb, 2),
            (Poll::Ready(Recv::Changes), vec![2, 3])
        );
        assert_eq!(recv(&mut b, &wb, 2), (Poll::Ready(Recv::Changes), vec![4]));
        assert_eq!(recv(&mut a, &wa, 10).0, Poll::Pending);
        feed.publish(change(5, "configmaps"));
        settle(&feed).await;
        assert_eq!(wa.get(), 2, "a re-parked subscriber is woken again");
        assert_eq!(wb.get(), 1, "a subscriber that has not parked again is not");
        assert_eq!(recv(&mut b, &wb, 10), (Poll::Ready(Recv::Changes), vec![5]));
    }

    /// A waker that records its name in a shared log when woken.
    struct Named(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl Wake for Named {
        fn wake(self: Arc<Self>) {
            lock(&self.1).push(self.0);
        }
    }

    #[tokio::test]
    async fn subscribers_are_woken_in_the_order_they_parked_and_dropped_ones_not_at_all() {
        let feed = Arc::new(Feed::new());
        let woken = Arc::new(Mutex::new(Vec::new()));
        let mut subs: Vec<(&'static str, Subscriber)> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|name| (name, feed.subscribe("", "configmaps")))
            .collect();
        for i in [2, 0, 3, 1] {
            let (name, sub) = &mut subs[i];
            let waker = Waker::from(Arc::new(Named(name, woken.clone())));
            let mut cx = Context::from_waker(&waker);
            assert_eq!(sub.poll_recv(&mut cx, &mut Vec::new(), 1), Poll::Pending);
        }
        drop(subs.remove(3));
        feed.publish(change(2, "configmaps"));
        settle(&feed).await;
        assert_eq!(*lock(&woken), vec!["c", "a", "b"]);
    }

    #[tokio::test]
    async fn large_rounds_are_spaced_and_small_ones_are_not() {
        let feed = Arc::new(Feed::new());
        let dispatcher = tokio::spawn(feed.clone().dispatch());
        let subs = |plural: &str, n: usize| -> Vec<(Subscriber, Arc<Count>)> {
            (0..n)
                .map(|_| (feed.subscribe("", plural), Arc::new(Count::default())))
                .collect()
        };
        let (mut many, mut few) = (subs("leases", SPACED_FANOUT), subs("secrets", 3));
        let woken = |subs: &[(Subscriber, Arc<Count>)]| -> Vec<usize> {
            subs.iter().map(|(_, w)| w.get()).collect()
        };
        let mut first_round = Instant::now();
        for (rv, round) in [(2, 1), (3, 2)] {
            for (sub, w) in many.iter_mut().chain(few.iter_mut()) {
                while recv(sub, w, 10).0 != Poll::Pending {}
            }
            if round == 1 {
                first_round = Instant::now();
            }
            feed.publish(change(rv, "leases"));
            feed.publish(change(rv, "secrets"));
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            assert_eq!(woken(&few), vec![round; 3], "small rounds start at once");
            if round == 1 || first_round.elapsed() < ROUND_SPACING {
                assert_eq!(woken(&many), vec![1; SPACED_FANOUT]);
            }
        }
        tokio::time::sleep(ROUND_SPACING * 2).await;
        assert_eq!(
            woken(&many),
            vec![2; SPACED_FANOUT],
            "the second large round starts once spaced"
        );
        dispatcher.abort();
    }

    #[tokio::test]
    async fn only_the_changed_type_is_woken() {
        let feed = Arc::new(Feed::new());
        let mut cms = feed.subscribe("", "configmaps");
        let mut secrets = feed.subscribe("", "secrets");
        let (wc, ws) = (Arc::new(Count::default()), Arc::new(Count::default()));
        assert_eq!(recv(&mut cms, &wc, 10).0, Poll::Pending);
        assert_eq!(recv(&mut secrets, &ws, 10).0, Poll::Pending);
        feed.publish(change(2, "secrets"));
        settle(&feed).await;
        assert_eq!((wc.get(), ws.get()), (0, 1));
        assert_eq!(recv(&mut cms, &wc, 10).0, Poll::Pending);
        assert_eq!(
            recv(&mut secrets, &ws, 10),
            (Poll::Ready(Recv::Changes), vec![2])
        );
    }

    #[tokio::test]
    async fn a_subscriber_starts_at_its_subscription_and_lags_past_the_capacity() {
        let feed = Arc::new(Feed::new());
        let w = Arc::new(Count::default());
        feed.publish(change(2, "configmaps"));
        let mut early = feed.subscribe("", "configmaps");
        feed.publish(change(3, "configmaps"));
        let mut late = feed.subscribe("", "configmaps");
        feed.publish(change(4, "configmaps"));
        assert_eq!(
            recv(&mut early, &w, 10),
            (Poll::Ready(Recv::Changes), vec![3, 4])
        );
        assert_eq!(
            recv(&mut late, &w, 10),
            (Poll::Ready(Recv::Changes), vec![4])
        );
        for rv in 5..5 + LOG_CAPACITY as u64 {
            feed.publish(change(rv, "configmaps"));
        }
        assert_eq!(
            recv(&mut late, &w, 1),
            (Poll::Ready(Recv::Changes), vec![5])
        );
        feed.publish(change(5 + LOG_CAPACITY as u64, "configmaps"));
        assert_eq!(recv(&mut early, &w, 10).0, Poll::Ready(Recv::Lagged));
        drop((early, late));
        let mut after = feed.subscribe("", "configmaps");
        assert_eq!(
            recv(&mut after, &w, 10).0,
            Poll::Pending,
            "nothing kept for nobody"
        );
    }

    #[tokio::test]
    async fn close_ends_parked_and_later_subscribers() {
        let feed = Arc::new(Feed::new());
        let mut sub = feed.subscribe("", "configmaps");
        let w = Arc::new(Count::default());
        assert_eq!(recv(&mut sub, &w, 10).0, Poll::Pending);
        feed.close();
        assert_eq!(w.get(), 1);
        assert_eq!(recv(&mut sub, &w, 10).0, Poll::Ready(Recv::Closed));
        let mut new_type = feed.subscribe("", "secrets");
        assert_eq!(recv(&mut new_type, &w, 10).0, Poll::Ready(Recv::Closed));
    }
}
