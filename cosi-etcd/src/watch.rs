//! Watches on etcd watches.
//!
//! Each [`Watch`] owns one etcd watch stream, read by a task (the pump) that
//! turns etcd events into COSI events and queues them for the reader. The pump
//! never waits for the reader: when more than `watch_buffer` events are queued,
//! the reader gets one `Errored` (`BufferOverrun`) and the watch ends. Dropping
//! the `Watch` stops the pump and cancels the etcd watch.
//!
//! Positions are etcd revisions. An event's bookmark is its revision; a watch
//! resumes after revision `r` by watching from `r + 1`. When the etcd stream
//! breaks (a dropped connection, an etcd restart) the pump reopens it from the
//! revision after the last one it saw, so no event is lost or repeated; when
//! etcd has compacted that revision meanwhile, the reader gets `Errored`
//! (`InvalidBookmark`) instead of a silent gap. The last one it saw includes
//! etcd's progress notifications, which tell an idle watch that it has every
//! event up to a later revision (etcd sends them every 10 minutes by default,
//! `--experimental-watch-progress-notify-interval`), so an idle watch resumes
//! past a compaction of what other kinds wrote meanwhile.
//!
//! Nothing fails silently or forever:
//! - Every failed attempt to reopen is logged (a warning), with a backoff
//!   from 50 ms doubling to 1 s, ±50 % at random so that the watches
//!   of an etcd that restarts do not all reopen in step. After `Options::watch_reconnect_timeout` of
//!   outage the reader gets `Errored` ([`WatchLost`], as a backend error) and
//!   the watch ends: the reader decides whether to watch again.
//! - A response the client can never receive (larger than its message
//!   limit, or fragments joining past `MAX_WATCH_RESPONSE`) is not retried,
//!   since reopening at the same revision would receive it again: the reader
//!   gets `Errored` saying so at once.
//! - A value under the kind's prefix that is not a COSI resource (a foreign
//!   key, see [`codec::decode`]) is left out of the events with a warning, as
//!   lists leave it out: a put that replaces a resource with a foreign value
//!   reads as the resource's destruction, a put that replaces a foreign value
//!   with a resource as its creation, and changes between foreign values as
//!   nothing at all.
//! - An event whose previous value etcd compacted (one at the compaction
//!   revision, which tail events and a watch reopened there read) is told
//!   apart by the key's own count of versions: a put of a key that existed
//!   is an update, whose old resource is a tombstone, and a foreign value
//!   put there destroys what the key held, without its last state.
//!
//! Tail events come from etcd's history: the pump watches from the kind's
//! first event (the kind key's `create_revision`, or the oldest revision etcd
//! kept) and keeps the last `n` events up to the kind's last change at the time
//! of the call, which it recognises by the kind key's `mod_revision`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use cosi::backoff::{Backoff, BackoffOptions};
use cosi::resource::{DynamicResource, Kind, Pointer};
use cosi::state::Bookmark;
use cosi::state::{Error, Event, Result, Watch, WatchKindOptions, WatchOptions};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::client::proto::etcdserverpb::{RangeRequest, ResponseHeader, WatchCreateRequest};
use crate::client::proto::mvccpb::{self, KeyValue, event::EventType};
use crate::client::{EtcdError, WatchStream, prefix_end};
use crate::codec::{self, Bookmarks};
use crate::state::{EtcdState, backend};

/// What a watch delivers, before it is started.
pub(crate) struct WatchSpec {
    kind: Kind,
    filter: Filter,
    start: Start,
}

enum Start {
    /// The current state (single) or nothing (kind), then changes.
    Now {
        bootstrap_contents: bool,
        bootstrap_bookmark: bool,
    },
    Tail(usize),
    Bookmark(Bookmark),
}

/// Which events a watcher sees.
enum Filter {
    Id(String),
    Kind(WatchKindOptions),
}

impl WatchSpec {
    pub(crate) fn single(pointer: &Pointer, options: WatchOptions) -> Self {
        let start = match (options.start_from, options.tail_events) {
            (Some(bookmark), _) => Start::Bookmark(bookmark),
            (None, 0) => Start::Now { bootstrap_contents: false, bootstrap_bookmark: false },
            (None, tail) => Start::Tail(tail),
        };
        WatchSpec { kind: pointer.kind(), filter: Filter::Id(pointer.id().to_owned()), start }
    }

    pub(crate) fn kind(kind: &Kind, mut options: WatchKindOptions) -> Self {
        let start = match (options.start_from.take(), options.tail_events) {
            (Some(bookmark), _) => Start::Bookmark(bookmark),
            (None, 0) => Start::Now {
                bootstrap_contents: options.bootstrap_contents,
                bootstrap_bookmark: options.bootstrap_bookmark,
            },
            (None, tail) => Start::Tail(tail),
        };
        WatchSpec { kind: kind.clone(), filter: Filter::Kind(options), start }
    }
}

/// Sets the watch up: reads what it starts from, opens the etcd watch, starts the pump.
pub(crate) async fn start(state: &EtcdState, spec: WatchSpec) -> Result<Watch> {
    let WatchSpec { kind, filter, start } = spec;
    let kind_key = state.keys.kind_prefix(&kind);
    let bookmarks = Bookmarks::new(&kind_key);
    let client = &state.client;
    let mut initial = Vec::new();
    let mut history = None;
    // The first revision after the call: events from there on are live.
    let mut live_from = None;
    let single_key = match &filter {
        Filter::Id(id) => Some(state.keys.resource(&kind.pointer(id))),
        Filter::Kind(_) => None,
    };

    let next_revision = match start {
        Start::Bookmark(bookmark) => {
            let invalid = |reason: String| Error::InvalidBookmark { kind: kind.clone(), reason };
            let revision = bookmarks.decode(&bookmark).map_err(|reason| invalid(reason.to_owned()))?;
            // A read at that revision fails when etcd has compacted it or has not reached it.
            let at = RangeRequest { key: kind_key.clone(), revision, count_only: true, ..Default::default() };
            if let Err(err) = client.range(at).await {
                return Err(match err.status() {
                    Some(status) if status.message().contains("compacted") || status.message().contains("future") => {
                        invalid(format!("etcd cannot resume from revision {revision}: {}", status.message()))
                    }
                    _ => backend(err),
                });
            }
            revision.saturating_add(1)
        }
        Start::Tail(tail) => {
            let response = client.get(kind_key.clone()).await.map_err(backend)?;
            let revision = header_revision(response.header.as_ref())?;
            live_from = Some(revision.saturating_add(1));
            match response.kvs.first() {
                Some(kind_kv) => {
                    let keep = tail.min(state.options.watch_buffer);
                    history = Some(History { until: kind_kv.mod_revision, keep, events: VecDeque::new() });
                    // The kind key is written with the kind's first event and never deleted:
                    // nothing of the kind is older than it.
                    kind_kv.create_revision
                }
                None => revision.saturating_add(1),
            }
        }
        Start::Now { bootstrap_contents, bootstrap_bookmark } => {
            let revision = match (&filter, &single_key) {
                (Filter::Id(id), Some(key)) => {
                    let response = client.get(key.clone()).await.map_err(backend)?;
                    initial.push(match response.kvs.first() {
                        Some(kv) => Event::Created { resource: decode(state, kv)?, bookmark: None },
                        None => Event::Destroyed { pointer: kind.pointer(id), resource: None, bookmark: None },
                    });
                    header_revision(response.header.as_ref())?
                }
                (Filter::Kind(options), _) if bootstrap_contents => {
                    let listing = client.list(&kind_key).await.map_err(backend)?;
                    for kv in listing.kvs.iter().filter(|kv| kv.key != kind_key) {
                        // A foreign value is left out, as lists leave it out.
                        let Some(resource) = codec::decode_or_skip(&state.keys, kv) else { continue };
                        if options.matches(&resource) {
                            initial.push(Event::Created { resource, bookmark: None });
                        }
                    }
                    listing.revision
                }
                _ => {
                    let count = RangeRequest { key: kind_key.clone(), count_only: true, ..Default::default() };
                    header_revision(client.range(count).await.map_err(backend)?.header.as_ref())?
                }
            };
            if bootstrap_contents {
                initial.push(Event::Bootstrapped { kind: kind.clone(), bookmark: Some(bookmarks.encode(revision)) });
            }
            if bootstrap_bookmark {
                initial.push(Event::Noop { kind: kind.clone(), bookmark: Some(bookmarks.encode(revision)) });
            }
            revision.saturating_add(1)
        }
    };

    // A single-resource watch without history watches its key alone; the others
    // watch the kind's range, whose kind key marks the end of the history.
    let (key, prefix) = match single_key {
        Some(key) if history.is_none() => (key, false),
        _ => (kind_key.clone(), true),
    };
    let pump = Pump {
        state: state.clone(),
        kind,
        kind_key,
        key,
        prefix,
        filter,
        bookmarks,
        history,
        next_revision,
        live_from: live_from.unwrap_or(next_revision),
        queue: Arc::new(Queue::new(state.options.watch_buffer)),
    };
    // Opened here, so a watch that cannot start fails the call rather than the stream.
    let stream = pump.open().await.map_err(backend)?;
    let queue = Arc::clone(&pump.queue);
    let task = tokio::spawn(async move { pump.run(stream).await });
    Ok(reader(queue, initial, AbortOnDrop(task)))
}

fn decode(state: &EtcdState, kv: &KeyValue) -> Result<DynamicResource> {
    codec::decode(&state.keys, &kv.key, &kv.value).map_err(Error::backend)
}

fn header_revision(header: Option<&ResponseHeader>) -> Result<i64> {
    header.map(|header| header.revision).ok_or_else(|| Error::backend(MissingHeader))
}

#[derive(Debug, thiserror::Error)]
#[error("etcd sent a response without a header")]
struct MissingHeader;

#[derive(Debug, thiserror::Error)]
#[error("etcd sent a watch event without its key")]
struct MissingKey;

#[derive(Debug, thiserror::Error)]
#[error("the etcd watch was cancelled: {0}")]
struct Cancelled(String);

/// Why a watch ended when its etcd stream broke and could not be had back:
/// the reader's last event is an `Errored` holding this as an
/// [`Error::Backend`].
#[derive(Debug, thiserror::Error)]
#[error(
    "the etcd watch of {kind} broke and could not be reopened within {}s ({attempts} attempts): {last}",
    timeout.as_secs_f32()
)]
pub struct WatchLost {
    kind: Kind,
    timeout: Duration,
    attempts: u32,
    last: String,
}

impl WatchLost {
    /// How many times the watch tried to reopen its stream.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

/// Why a watch ended when etcd sent a response it can never receive.
#[derive(Debug, thiserror::Error)]
#[error("the etcd watch of {kind} cannot go on: {source}; reopening it would receive the same response again")]
struct Unreceivable {
    kind: Kind,
    source: EtcdError,
}

/// The longest wait before reopening a broken watch.
const REOPEN_MAX_DELAY: Duration = Duration::from_secs(1);
/// The waits before reopening a broken watch: 50 ms, doubled after each
/// failed attempt up to [`REOPEN_MAX_DELAY`], ±50 %.
const REOPEN_BACKOFF: BackoffOptions =
    BackoffOptions { initial: Duration::from_millis(50), multiplier: 2.0, jitter: 0.5, max: REOPEN_MAX_DELAY };

/// The events the reader has not taken yet.
struct Queue {
    inner: Mutex<QueueInner>,
    /// Woken after every push.
    pushed: Notify,
    capacity: usize,
}

struct QueueInner {
    events: VecDeque<Event>,
    /// No event follows the queued ones.
    ended: bool,
}

impl Queue {
    fn new(capacity: usize) -> Self {
        Queue {
            inner: Mutex::new(QueueInner { events: VecDeque::new(), ended: false }),
            pushed: Notify::new(),
            capacity: capacity.max(1),
        }
    }

    /// Queues `events`; when that puts the reader more than the capacity behind,
    /// replaces them all with one `BufferOverrun` and ends. Returns whether the watch goes on.
    fn push(&self, kind: &Kind, events: Vec<Event>) -> bool {
        if events.is_empty() {
            return true;
        }
        let mut inner = self.inner.lock();
        inner.events.extend(events);
        let behind = inner.events.len();
        let going_on = behind <= self.capacity;
        if !going_on {
            inner.events.clear();
            let error = Error::BufferOverrun { kind: kind.clone(), behind: behind as u64, capacity: self.capacity };
            inner.events.push_back(Event::Errored { error });
            inner.ended = true;
        }
        drop(inner);
        self.pushed.notify_one();
        going_on
    }

    /// Queues one last `Errored` event.
    fn fail(&self, error: Error) {
        let mut inner = self.inner.lock();
        inner.events.push_back(Event::Errored { error });
        inner.ended = true;
        drop(inner);
        self.pushed.notify_one();
    }

    /// Everything queued, waiting for at least one event; `None` once ended and drained.
    async fn take(&self) -> Option<Vec<Event>> {
        loop {
            let notified = self.pushed.notified();
            {
                let mut inner = self.inner.lock();
                if !inner.events.is_empty() {
                    return Some(inner.events.drain(..).collect());
                }
                if inner.ended {
                    return None;
                }
            }
            // `notify_one` stores a permit when nobody waits, so a push between
            // the check and this await is not missed.
            notified.await;
        }
    }
}

/// Aborts the pump when the reader goes away.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn reader(queue: Arc<Queue>, initial: Vec<Event>, pump: AbortOnDrop) -> Watch {
    let state = (queue, initial, pump);
    Watch::from_batches(futures_util::stream::unfold(state, |(queue, initial, pump)| async move {
        if !initial.is_empty() {
            return Some((initial, (queue, Vec::new(), pump)));
        }
        let batch = queue.take().await?;
        Some((batch, (queue, Vec::new(), pump)))
    }))
}

/// The tail being collected: the last `keep` events up to revision `until`.
struct History {
    until: i64,
    keep: usize,
    events: VecDeque<Event>,
}

/// Reads one etcd watch into a [`Queue`], reopening it where it broke off.
struct Pump {
    state: EtcdState,
    kind: Kind,
    kind_key: Vec<u8>,
    /// The watched key, or prefix when `prefix`.
    key: Vec<u8>,
    prefix: bool,
    filter: Filter,
    bookmarks: Bookmarks,
    history: Option<History>,
    /// The first revision not seen yet: where a reopened watch starts.
    next_revision: i64,
    /// The first revision after the call: events from here on are live.
    live_from: i64,
    queue: Arc<Queue>,
}

impl Pump {
    async fn open(&self) -> Result<WatchStream, EtcdError> {
        let create = WatchCreateRequest {
            key: self.key.clone(),
            range_end: if self.prefix { prefix_end(&self.key) } else { Vec::new() },
            start_revision: self.next_revision,
            // An idle watch learns how far it is current, so that a reopened
            // one does not start from a revision compacted since its last event.
            progress_notify: true,
            prev_kv: true,
            // Responses larger than etcd's request limit come in pieces, each
            // within the client's message limit; the client joins them again.
            fragment: true,
        };
        self.state.client.watch(create).await
    }

    async fn run(mut self, mut stream: WatchStream) {
        let timeout = self.state.options.watch_reconnect_timeout;
        // When the current outage began: from a break until a stream delivers
        // a response or stays open for the whole timeout.
        let mut outage: Option<Instant> = None;
        let mut attempts = 0;
        loop {
            let opened = Instant::now();
            let mut received = false;
            let read = self.read(&mut stream, &mut received).await;
            if received || opened.elapsed() >= timeout {
                outage = None;
                attempts = 0;
            }
            let mut last = match read {
                Ok(false) => return,
                // Not a failure: the watch goes on from another revision.
                Ok(true) => match self.open().await {
                    Ok(reopened) => {
                        stream = reopened;
                        continue;
                    }
                    Err(err) => err,
                },
                Err(err) => err,
            };
            // The stream broke: reopen it after what was seen, with a backoff,
            // until etcd is back, the outage lasts too long, or the reader goes away.
            let since = *outage.get_or_insert_with(Instant::now);
            let mut backoff = Backoff::new(REOPEN_BACKOFF);
            stream = loop {
                if last.too_large() {
                    tracing::error!(kind = %self.kind, error = %last, "etcd watch response too large; ending the watch");
                    self.queue.fail(Error::backend(Unreceivable { kind: self.kind.clone(), source: last }));
                    return;
                }
                if since.elapsed() >= timeout {
                    tracing::error!(kind = %self.kind, attempts, error = %last, "etcd watch lost; ending the watch");
                    let lost = WatchLost { kind: self.kind.clone(), timeout, attempts, last: last.to_string() };
                    self.queue.fail(Error::backend(lost));
                    return;
                }
                let delay = backoff.next_delay();
                tracing::warn!(kind = %self.kind, attempts, error = %last, ?delay, "etcd watch broke; reopening it");
                tokio::time::sleep(delay.min(timeout.saturating_sub(since.elapsed()))).await;
                attempts += 1;
                // An etcd that accepts connections but never confirms the watch
                // must not hold the pump past the outage's end.
                let left = timeout.saturating_sub(since.elapsed()).max(REOPEN_MAX_DELAY);
                match tokio::time::timeout(left, self.open()).await {
                    Ok(Ok(reopened)) => break reopened,
                    Ok(Err(err)) => last = err,
                    Err(_) => last = EtcdError::response("Watch.Watch", "etcd did not confirm the watch in time"),
                }
            };
        }
    }

    /// Reads the stream until it breaks (`Err`), or ends the watch (`Ok(false)`), or
    /// has to be reopened from another revision (`Ok(true)`); sets `received`
    /// once a response arrives.
    async fn read(&mut self, stream: &mut WatchStream, received: &mut bool) -> Result<bool, EtcdError> {
        loop {
            let response = stream.message().await?;
            *received |= response.is_some();
            let Some(response) = response else {
                return Err(EtcdError::Response { call: "Watch.Watch", reason: "etcd ended the watch stream".into() });
            };
            if response.canceled {
                let compacted = response.compact_revision;
                // History that etcd compacted is simply not part of the tail, as long
                // as nothing after the call was compacted.
                if compacted > 0 && self.history.is_some() && compacted <= self.live_from {
                    if self.history.as_ref().is_some_and(|history| compacted > history.until) {
                        self.finish_history();
                        self.next_revision = self.live_from;
                    } else {
                        self.next_revision = compacted;
                    }
                    return Ok(true);
                }
                let error = if compacted > 0 {
                    Error::InvalidBookmark {
                        kind: self.kind.clone(),
                        reason: format!(
                            "etcd compacted the history up to revision {compacted} before the watch read it"
                        ),
                    }
                } else {
                    Error::backend(Cancelled(response.cancel_reason))
                };
                self.queue.fail(error);
                return Ok(false);
            }
            if response.events.is_empty() && !response.created {
                // A progress notification: every event up to its revision was sent.
                if let Some(header) = &response.header {
                    self.next_revision = self.next_revision.max(header.revision.saturating_add(1));
                }
                continue;
            }
            let mut batch = Vec::new();
            for event in &response.events {
                let Some(kv) = &event.kv else { continue };
                let revision = kv.mod_revision;
                self.next_revision = self.next_revision.max(revision.saturating_add(1));
                if kv.key == self.kind_key {
                    if self.history.as_ref().is_some_and(|history| revision >= history.until) {
                        batch.extend(self.finish_history());
                    }
                    continue;
                }
                let event = match self.convert(event) {
                    Ok(Some(event)) => event,
                    // A change between foreign values: nothing a reader could see.
                    Ok(None) => continue,
                    Err(error) => {
                        self.queue.push(&self.kind, batch);
                        self.queue.fail(error);
                        return Ok(false);
                    }
                };
                match &mut self.history {
                    Some(history) => {
                        if matches!(&self.filter, Filter::Id(id) if event.pointer().is_none_or(|pointer| pointer.id() != id))
                        {
                            continue;
                        }
                        history.events.push_back(event);
                        if history.events.len() > history.keep {
                            history.events.pop_front();
                        }
                    }
                    None => batch.extend(self.filter.apply(&event)),
                }
            }
            if !self.queue.push(&self.kind, batch) {
                return Ok(false);
            }
        }
    }

    /// Ends the history phase; returns the tail as the filter lets it through.
    fn finish_history(&mut self) -> Vec<Event> {
        let Some(history) = self.history.take() else { return Vec::new() };
        history.events.iter().filter_map(|event| self.filter.apply(event)).collect()
    }

    /// The event as the reader sees it; `None` for a change it cannot see,
    /// between values that are not resources (foreign values count as absent).
    ///
    /// etcd leaves the previous value out when it compacted its revision, as
    /// for an event at the compaction revision: whether the key existed
    /// before a put is then the key's own count of versions, and what it held
    /// is unknown. An update carries a tombstone as its old resource; a key
    /// that now holds a foreign value may have held a resource, whose removal
    /// the reader must not miss, so it is destroyed without a last state, as
    /// a deletion without its previous value is.
    fn convert(&self, event: &mvccpb::Event) -> Result<Option<Event>> {
        let decode = |kv: &KeyValue| codec::decode_or_skip(&self.state.keys, kv);
        let kv = event.kv.as_ref().ok_or_else(|| Error::backend(MissingKey))?;
        let bookmark = Some(self.bookmarks.encode(kv.mod_revision));
        Ok(match (event_type(event)?, event.prev_kv.as_ref()) {
            (EventType::Put, Some(prev)) => match (decode(kv), decode(prev)) {
                (Some(resource), None) => Some(Event::Created { resource, bookmark }),
                (Some(resource), Some(old)) => Some(Event::Updated { resource, old, bookmark }),
                (None, Some(old)) => Some(Event::destroyed(old, bookmark)),
                (None, None) => None,
            },
            (EventType::Put, None) => match (decode(kv), kv.version > 1) {
                (Some(resource), false) => Some(Event::Created { resource, bookmark }),
                (Some(resource), true) => {
                    Some(Event::Updated { resource, old: DynamicResource::tombstone(&self.pointer(kv)), bookmark })
                }
                (None, true) => Some(Event::Destroyed { pointer: self.pointer(kv), resource: None, bookmark }),
                (None, false) => None,
            },
            (EventType::Delete, Some(prev)) => decode(prev).map(|resource| Event::destroyed(resource, bookmark)),
            (EventType::Delete, None) => Some(Event::Destroyed { pointer: self.pointer(kv), resource: None, bookmark }),
        })
    }

    /// The resource at `kv`'s key: all that is known of it when etcd no
    /// longer has its value.
    fn pointer(&self, kv: &KeyValue) -> Pointer {
        let id = kv.key.strip_prefix(self.kind_key.as_slice()).unwrap_or_default();
        self.kind.pointer(String::from_utf8_lossy(id))
    }
}

/// The type of an etcd event; an unknown one is an error, never a panic.
pub(crate) fn event_type(event: &mvccpb::Event) -> Result<EventType> {
    EventType::try_from(event.r#type).map_err(|_| Error::backend(UnknownEvent(event.r#type)))
}

#[derive(Debug, thiserror::Error)]
#[error("etcd sent a watch event of unknown type {0}")]
struct UnknownEvent(i32);

impl Filter {
    /// The event as this watcher sees it, if at all (see `WatchKindOptions::filter`).
    fn apply(&self, event: &Event) -> Option<Event> {
        match self {
            Filter::Id(id) => event.pointer().is_some_and(|pointer| pointer.id() == id).then(|| event.clone()),
            Filter::Kind(options) => options.filter(event),
        }
    }
}
