//! Watch (GET with `watch=true`): the initial events or the replay from a
//! resourceVersion, then the changes of the type as the store's feed delivers them, with
//! bookmarks, selector enter/leave, `410 Expired` and the timeout.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::request::{Query, include_object, selectors, truthy};
use super::state::AppState;
use crate::api;
use crate::feed::{Change, Recv, Subscriber};
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};
use crate::store::meta_str;
use crate::table::table;

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

struct WatchFilter {
    def: Arc<ResourceDef>,
    ns: String,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl WatchFilter {
    fn matches(&self, o: &Value) -> bool {
        (self.ns.is_empty() || meta_str(o, "namespace") == self.ns)
            && self.labels.matches(o)
            && self.fields.matches(o)
    }

    /// The event type this watch sees for a change, if any: an object that starts or stops
    /// matching the selectors is `ADDED` or `DELETED`.
    fn event(&self, c: &Change) -> Option<&'static str> {
        if c.group != self.def.group || c.plural != self.def.plural {
            return None;
        }
        let now = self.matches(&c.object);
        let before = c.prev.as_ref().map(|p| self.matches(p));
        match (c.kind, before, now) {
            ("MODIFIED", Some(false), true) => Some("ADDED"),
            ("MODIFIED", Some(true), false) => Some("DELETED"),
            (kind, _, true) => Some(kind),
            _ => None,
        }
    }
}

/// Answers a watch request of `def` in `ns` (every namespace when empty) with a streamed
/// body.
pub(crate) fn watch(
    app: &Arc<AppState>,
    def: Arc<ResourceDef>,
    ns: String,
    q: &Query,
    as_table: bool,
) -> ApiResult<Response> {
    let (labels, fields) = selectors(&def, q)?;
    let filter = WatchFilter {
        def: def.clone(),
        ns,
        labels,
        fields,
    };
    let bookmarks = truthy(q, "allowWatchBookmarks");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let include = include_object(q);
    // `sendInitialEvents=true` (streaming lists): the current state as ADDED events, then
    // a bookmark annotated `k8s.io/initial-events-end`, whatever resourceVersion was given.
    let send_initial = truthy(q, "sendInitialEvents");
    let from = q
        .get("resourceVersion")
        .filter(|r| !r.is_empty() && *r != "0" && !send_initial)
        .cloned();
    let encode = {
        let def = def.clone();
        let mut first = true;
        move |kind: &str, obj: Value| -> Bytes {
            let obj = api::as_version(&def, obj);
            if as_table && kind != "ERROR" && kind != "BOOKMARK" {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let t = table(&def, &[obj], &rv, include, first);
                first = false;
                watch_line(kind, &t)
            } else {
                watch_line(kind, &obj)
            }
        }
    };
    let (initial, sub, start_rv): (Vec<(String, Value)>, Subscriber, u64) = {
        let store = app.lock();
        match from {
            None => {
                let (_, sub) = store
                    .subscribe_from(&def.group, &def.plural, store.current_rv())
                    .map_err(|_| ApiError::internal("subscribe"))?;
                let items: Vec<(String, Value)> = store
                    .list_all(&def.group, &def.plural)
                    .filter(|o| filter.matches(o))
                    .map(|o| ("ADDED".to_string(), o.clone()))
                    .collect();
                (items, sub, store.current_rv())
            }
            Some(rv) => {
                let rv: u64 = rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {rv}"))
                })?;
                match store.subscribe_from(&def.group, &def.plural, rv) {
                    Ok((backlog, sub)) => (
                        backlog
                            .iter()
                            .filter_map(|c| {
                                filter.event(c).map(|k| (k.to_string(), c.object.clone()))
                            })
                            .collect(),
                        sub,
                        store.current_rv(),
                    ),
                    Err(too_old) => {
                        let status = ApiError::expired(format!(
                            "too old resource version: {rv} ({})",
                            too_old.oldest.saturating_sub(1)
                        ))
                        .to_status();
                        let body = watch_line("ERROR", &status);
                        return Ok(Response::builder()
                            .status(StatusCode::OK)
                            .header(http::header::CONTENT_TYPE, "application/json")
                            .body(Body::from(body))
                            .unwrap_or_else(|_| {
                                StatusCode::INTERNAL_SERVER_ERROR.into_response()
                            }));
                    }
                }
            }
        }
    };
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + app.bookmark_interval,
        app.bookmark_interval,
    );
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let api_version = def.api_version();
    let body = WatchBody {
        initial: initial.into_iter(),
        encode,
        filter,
        sub,
        changes: Vec::new(),
        initial_end_pending: send_initial,
        last_rv: start_rv,
        start_rv,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        ticker,
        bookmarks,
        as_table,
        api_version,
        done: false,
    };
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()))
}

/// Largest chunk a watch assembles from events that are ready at once (bytes).
const CHUNK: usize = 256 * 1024;

/// Most changes a watch takes from its feed per read.
const BATCH: usize = 256;

/// An open watch's response body: a stream polled by the connection itself (no task or
/// channel per watch). Each poll sends everything that is ready as one chunk: initial
/// events in chunks of up to [`CHUNK`] bytes, then every change queued since the last
/// poll (see [`crate::feed`]).
struct WatchBody<E> {
    initial: std::vec::IntoIter<(String, Value)>,
    encode: E,
    filter: WatchFilter,
    sub: Subscriber,
    /// Read buffer for changes (kept to reuse its allocation).
    changes: Vec<Arc<Change>>,
    /// `sendInitialEvents=true`: the `initial-events-end` bookmark is still to be sent.
    initial_end_pending: bool,
    last_rv: u64,
    start_rv: u64,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    ticker: tokio::time::Interval,
    bookmarks: bool,
    as_table: bool,
    api_version: String,
    done: bool,
}

impl<E: FnMut(&str, Value) -> Bytes> WatchBody<E> {
    fn bookmark(&self, initial_end: bool) -> Bytes {
        let mut bm = json!({
            "kind": self.filter.def.kind,
            "apiVersion": self.filter.def.api_version(),
            "metadata": {"resourceVersion": self.last_rv.to_string()}
        });
        if initial_end {
            bm["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        watch_line("BOOKMARK", &bm)
    }

    /// Appends the watch line for a change, if this watch sees it.
    fn push_change(&mut self, c: &Change, out: &mut Vec<Bytes>) {
        if c.rv <= self.last_rv && c.rv <= self.start_rv {
            return;
        }
        self.last_rv = self.last_rv.max(c.rv);
        if let Some(kind) = self.filter.event(c) {
            let same_version = c.object.get("apiVersion").and_then(Value::as_str)
                == Some(self.api_version.as_str());
            out.push(if kind == c.kind && !self.as_table && same_version {
                c.line()
            } else {
                (self.encode)(kind, c.object.clone())
            });
        }
    }

    /// The lines of every change that is ready, up to about [`CHUNK`] bytes; `Pending`
    /// (with the watch parked on its feed) when none of them is for this watch. `None`
    /// ends the watch (server stopping); a watch that lagged ends after an `ERROR` line.
    fn poll_changes(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<Vec<Bytes>>> {
        let mut lines = Vec::new();
        let mut size = 0;
        while size < CHUNK {
            let mut changes = std::mem::take(&mut self.changes);
            match self.sub.poll_recv(cx, &mut changes, BATCH) {
                Poll::Ready(Recv::Changes) => {
                    for c in changes.drain(..) {
                        let before = lines.len();
                        self.push_change(&c, &mut lines);
                        size += lines[before..].iter().map(Bytes::len).sum::<usize>();
                    }
                    self.changes = changes;
                }
                Poll::Ready(Recv::Lagged) => {
                    self.done = true;
                    lines.push(lagged());
                    break;
                }
                Poll::Ready(Recv::Closed) => {
                    self.done = true;
                    break;
                }
                Poll::Pending => {
                    self.changes = changes;
                    break;
                }
            }
        }
        match (lines.is_empty(), self.done) {
            (false, _) => Poll::Ready(Some(lines)),
            (true, true) => Poll::Ready(None),
            (true, false) => Poll::Pending,
        }
    }
}

impl<E: FnMut(&str, Value) -> Bytes + Unpin> futures::Stream for WatchBody<E> {
    type Item = Result<Bytes, std::convert::Infallible>;

    /// The next chunk to send, or `None` when the watch ends (timeout, server closing,
    /// history overrun after an `ERROR` event).
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if !this.initial.as_slice().is_empty() {
            let mut buf = bytes::BytesMut::new();
            while buf.len() < CHUNK
                && let Some((kind, obj)) = this.initial.next()
            {
                buf.extend_from_slice(&(this.encode)(&kind, obj));
            }
            return Poll::Ready(Some(Ok(buf.freeze())));
        }
        if std::mem::take(&mut this.initial_end_pending) {
            return Poll::Ready(Some(Ok(this.bookmark(true))));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.done = true;
            return Poll::Ready(None);
        }
        match this.poll_changes(cx) {
            Poll::Ready(Some(lines)) => {
                let chunk = if lines.len() == 1 {
                    lines.into_iter().next().unwrap_or_default()
                } else {
                    let mut buf =
                        bytes::BytesMut::with_capacity(lines.iter().map(Bytes::len).sum());
                    lines.iter().for_each(|l| buf.extend_from_slice(l));
                    buf.freeze()
                };
                return Poll::Ready(Some(Ok(chunk)));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if this.bookmarks && this.ticker.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(this.bookmark(false))));
        }
        Poll::Pending
    }
}

/// The `ERROR` event of a watch that fell behind the retained history.
fn lagged() -> Bytes {
    let status = ApiError::expired("too old resource version: watch fell behind").to_status();
    watch_line("ERROR", &status)
}
