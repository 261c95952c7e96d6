//! The event stream (`/api/events`): the feed of each shown kind (one watch
//! per kind, shared by every stream: `feeds.rs`), feeding a hub that keeps
//! each kind's count and each controller's reconcile rate, and writes
//! server-sent events.
//!
//! Events, each a JSON object:
//!
//! - `controller`: a controller's state, counters, rate and last error;
//! - `count`: how many resources a kind holds;
//! - `resource`: one resource was created, updated or destroyed (then the
//!   kind's `count`, when it changed);
//! - `graph`: a controller's inputs or outputs changed: fetch the graph again;
//! - `ready`: every watch has sent the current state;
//! - `failure`: a watch failed; the stream goes on without it.
//!
//! A kind whose type becomes one the page does not show (a definition of
//! it changes to sensitive) is left out from then on, as in a stream opened
//! then: its `count` goes to 0 and nothing more of it is sent (`feeds.rs`
//! checks each batch of its watch against the definitions).
//!
//! Everything a stream holds (its hub, its place in the feeds, and a feed
//! no other stream holds) ends when the client closes the stream, or when
//! the server shuts down.
//!
//! The hub waits for its client only briefly: when the client's buffer
//! stays full for a second (a client that stopped reading, or reads slower
//! than the state changes), the hub and its readers of the feeds end, and
//! the stream ends after what the buffer holds; the page's `EventSource`
//! reconnects and starts over. A burst that a reading client drains in time
//! ends nothing. The same holds for a stream that falls too far behind a
//! feed. Waiting instead would hold up the feeds every other stream shares,
//! and, through a gRPC state, the unread watch data would fill the
//! connection's flow-control window, which every other stream and request
//! of the page shares.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::sse::Event as SseEvent;
use cosi::resource::{DynamicResource, Kind};
use cosi::runtime::{ControllerStatus, GraphInput, GraphOutput};
use futures_util::Stream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard, WaitForCancellationFutureOwned};

use crate::Ui;
use crate::feeds::{Feed, Item, Reader};
use crate::model::{Change, ControllerView, Count};

/// How many feed messages may wait for the hub; a stream's reader of a feed
/// waits when it is full (and falls behind the feed).
const WATCH_BUFFER: usize = 1024;
/// How many events may wait for the client.
const CLIENT_BUFFER: usize = 1024;
/// How long the hub waits for room in a full client buffer before it ends
/// the stream: long enough for a client that reads to take a burst, short
/// enough that a client that stopped holds its watches up only briefly.
const SLOW_CLIENT: Duration = Duration::from_secs(1);
/// The window reconciles per second are measured over.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// The event stream of one client.
pub(crate) struct EventStream {
    events: mpsc::Receiver<SseEvent>,
    /// Ready once the server stops: the stream ends then, before what its
    /// buffer still holds.
    stopping: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Cancels the stream's tasks when the client goes.
    _cancel: DropGuard,
    _open: OpenGuard,
}

impl Stream for EventStream {
    type Item = Result<SseEvent, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.stopping.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        self.events.poll_recv(cx).map(|event| event.map(Ok))
    }
}

/// Counts one open stream or watch for as long as it lives.
pub(crate) struct OpenGuard {
    ui: Ui,
    watch: bool,
}

impl OpenGuard {
    pub(crate) fn new(ui: &Ui, watch: bool) -> Self {
        let counter = if watch { &ui.open.watches } else { &ui.open.streams };
        counter.fetch_add(1, Ordering::AcqRel);
        OpenGuard { ui: ui.clone(), watch }
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        let counter = if self.watch { &self.ui.open.watches } else { &self.ui.open.streams };
        counter.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a kind's feed tells the hub.
struct Watched(Kind, Item);

/// Joins the feeds of `kinds` (`feeds.rs`), but for those this connection
/// may not read, and opens the stream of their events.
pub(crate) async fn open(ui: &Ui, kinds: Vec<(String, String)>) -> cosi::Result<EventStream> {
    let cancel = ui.shutdown.child_token();
    let (watched_tx, watched_rx) = mpsc::channel(WATCH_BUFFER);
    let mut feeds = Vec::with_capacity(kinds.len());
    let mut refused = Vec::new();
    for (namespace, r#type) in kinds {
        let kind = Kind::new(&namespace, &r#type);
        match ui.feeds.feed(ui, &kind).await {
            Ok(feed) => feeds.push((kind, feed)),
            // A type this connection may not read (sensitive, for a reader):
            // the stream leaves it out rather than fail.
            Err(error) if error.is_access_denied() => refused.push(r#type),
            Err(error) => return Err(error),
        }
    }
    if !refused.is_empty() {
        tracing::debug!(types = ?refused, "the event stream leaves out types this connection may not read");
    }
    let pending: HashSet<Kind> = feeds.iter().map(|(kind, _)| kind.clone()).collect();
    for (kind, feed) in feeds {
        let cancel = cancel.clone();
        let sender = watched_tx.clone();
        let ui = ui.clone();
        tokio::spawn(async move {
            let joined = tokio::select! {
                () = cancel.cancelled() => return,
                joined = join(&ui, &kind, feed) => joined,
            };
            // The reader holds the feed open while the stream lives.
            let (start, mut reader) = joined;
            if !forward(&sender, &kind, start).await {
                return;
            }
            loop {
                let items = tokio::select! {
                    () = cancel.cancelled() => return,
                    items = reader.next() => items,
                };
                let Some(items) = items else {
                    tracing::debug!(%kind, "an event stream fell behind its kind's feed: it ends, for it to start over");
                    cancel.cancel();
                    return;
                };
                if !forward(&sender, &kind, items).await {
                    return;
                }
            }
        });
    }
    drop(watched_tx);
    let (events_tx, events_rx) = mpsc::channel(CLIENT_BUFFER);
    let hub = Hub {
        status_namespace: ui.config.status_namespace.clone(),
        counts: HashMap::new(),
        pending,
        controllers: BTreeMap::new(),
        events: events_tx,
    };
    let tick = ui.config.tick;
    let hub_cancel = cancel.clone();
    tokio::spawn(hub.run(watched_rx, tick, hub_cancel));
    Ok(EventStream {
        events: events_rx,
        stopping: Box::pin(ui.shutdown.clone().cancelled_owned()),
        _cancel: cancel.drop_guard(),
        _open: OpenGuard::new(ui, false),
    })
}

/// Joins `feed`; when it failed after this stream found it, joins a fresh
/// one instead, once.
async fn join(ui: &Ui, kind: &Kind, feed: Arc<Feed>) -> (Vec<Item>, Reader) {
    let joined = feed.join().await;
    if joined.0.iter().any(|item| matches!(item, Item::Failed(_)))
        && let Ok(fresh) = ui.feeds.feed(ui, kind).await
    {
        return fresh.join().await;
    }
    joined
}

/// Hands a feed's items to the hub; `false` once the hub is gone, or the
/// feed failed or was hidden.
async fn forward(hub: &mpsc::Sender<Watched>, kind: &Kind, items: impl IntoIterator<Item = Item>) -> bool {
    for item in items {
        let ended = matches!(item, Item::Failed(_) | Item::Hidden);
        if hub.send(Watched(kind.clone(), item)).await.is_err() || ended {
            return false;
        }
    }
    true
}

/// One controller as the hub last saw it.
struct Seen {
    status: ControllerStatus,
    /// `(when, reconciles)`, oldest first, over the last [`RATE_WINDOW`].
    samples: VecDeque<(Instant, u64)>,
    rate: f64,
}

struct Hub {
    status_namespace: String,
    counts: HashMap<Kind, HashSet<String>>,
    /// The kinds whose bootstrap has not ended yet.
    pending: HashSet<Kind>,
    controllers: BTreeMap<String, Seen>,
    events: mpsc::Sender<SseEvent>,
}

impl Hub {
    async fn run(mut self, mut watched: mpsc::Receiver<Watched>, tick: Duration, cancel: CancellationToken) {
        let mut ticks = tokio::time::interval(tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let sent = tokio::select! {
                () = cancel.cancelled() => break,
                () = self.events.closed() => break,
                message = watched.recv() => match message {
                    Some(message) => self.handle(message).await,
                    None => break,
                },
                _ = ticks.tick() => self.tick().await,
            };
            if !sent {
                break;
            }
        }
        // The watches end with the hub, whatever ended it.
        cancel.cancel();
    }

    /// Handles one feed message; `false` once the client is gone or too slow.
    async fn handle(&mut self, Watched(kind, item): Watched) -> bool {
        let (change, resource) = match item {
            Item::Failed(error) => {
                let failure = serde_json::json!({"namespace": kind.namespace(), "type": kind.r#type(), "error": error});
                return self.send("failure", &failure).await && self.bootstrapped(&kind).await;
            }
            Item::Bootstrapped => return self.bootstrapped(&kind).await,
            // The kind counts as nothing from now on, as it would in a stream opened now.
            Item::Hidden => {
                self.counts.remove(&kind);
                return match self.pending.contains(&kind) {
                    true => self.bootstrapped(&kind).await,
                    false => self.count(&kind).await,
                };
            }
            Item::Resource(change, resource) => (change, resource),
        };
        let resource = &resource;
        let ids = self.counts.entry(kind.clone()).or_default();
        let counted = match change {
            "destroyed" => ids.remove(resource.id()),
            _ => ids.insert(resource.id().to_owned()),
        };
        let live = !self.pending.contains(&kind);
        if kind.namespace() == self.status_namespace
            && kind.r#type() == <ControllerStatus as cosi::resource::Resource>::TYPE
            && !self.controller(resource, change == "destroyed", live).await
        {
            return false;
        }
        if !live {
            return true;
        }
        let version = resource.metadata().version().to_string();
        let change = Change {
            namespace: kind.namespace().to_owned(),
            r#type: kind.r#type().to_owned(),
            id: resource.id().to_owned(),
            version,
            change,
        };
        self.send("resource", &change).await && (!counted || self.count(&kind).await)
    }

    /// A kind's bootstrap ended: its count goes out; once every kind's has, `ready`.
    async fn bootstrapped(&mut self, kind: &Kind) -> bool {
        if !self.pending.remove(kind) {
            return true;
        }
        if !self.count(kind).await {
            return false;
        }
        if self.pending.is_empty() {
            let names: Vec<String> = self.controllers.keys().cloned().collect();
            for name in names {
                if !self.send_controller(&name).await {
                    return false;
                }
            }
            return self.send("ready", &serde_json::json!({})).await;
        }
        true
    }

    async fn count(&mut self, kind: &Kind) -> bool {
        let count = Count {
            namespace: kind.namespace().to_owned(),
            r#type: kind.r#type().to_owned(),
            count: self.counts.get(kind).map_or(0, HashSet::len),
        };
        self.send("count", &count).await
    }

    /// A controller status changed: its rate, and whether its edges changed.
    async fn controller(&mut self, resource: &DynamicResource, destroyed: bool, live: bool) -> bool {
        if destroyed {
            self.controllers.remove(resource.id());
            return !live || self.send("graph", &serde_json::json!({})).await;
        }
        let Some((name, status)) = crate::model::status(resource.clone()) else { return true };
        let now = Instant::now();
        let edges = |status: &ControllerStatus| -> (Vec<GraphInput>, Vec<GraphOutput>) {
            (status.inputs.clone(), status.outputs.clone())
        };
        let graph_changed = match self.controllers.get_mut(&name) {
            Some(seen) => {
                let changed = edges(&seen.status) != edges(&status);
                seen.samples.push_back((now, status.reconciles));
                seen.status = status;
                seen.rate = rate(&mut seen.samples, now);
                changed
            }
            None => {
                let samples = VecDeque::from([(now, status.reconciles)]);
                self.controllers.insert(name.clone(), Seen { status, samples, rate: 0.0 });
                true
            }
        };
        if !live {
            return true;
        }
        if graph_changed && !self.send("graph", &serde_json::json!({})).await {
            return false;
        }
        self.send_controller(&name).await
    }

    async fn send_controller(&mut self, name: &str) -> bool {
        let Some(seen) = self.controllers.get(name) else { return true };
        let view = ControllerView::new(name, &seen.status, seen.rate);
        self.send("controller", &view).await
    }

    /// Recomputes the rates; sends the controllers whose rate changed.
    async fn tick(&mut self) -> bool {
        if !self.pending.is_empty() {
            return true;
        }
        let now = Instant::now();
        let mut changed = Vec::new();
        for (name, seen) in &mut self.controllers {
            let rate = rate(&mut seen.samples, now);
            if (rate - seen.rate).abs() > f64::EPSILON {
                seen.rate = rate;
                changed.push(name.clone());
            }
        }
        for name in changed {
            if !self.send_controller(&name).await {
                return false;
            }
        }
        true
    }

    /// Queues one event for the client; `false` once the client is gone,
    /// or when its buffer stays full for [`SLOW_CLIENT`]: then its stream ends.
    async fn send(&self, name: &str, data: &impl serde::Serialize) -> bool {
        let event = SseEvent::default().event(name).json_data(data).unwrap_or_else(|_| SseEvent::default());
        match self.events.send_timeout(event, SLOW_CLIENT).await {
            Ok(()) => true,
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                tracing::debug!("an event stream's client reads too slowly: its stream ends, for it to start over");
                false
            }
            Err(mpsc::error::SendTimeoutError::Closed(_)) => false,
        }
    }
}

/// Reconciles per second over the last [`RATE_WINDOW`], from `samples`,
/// which it prunes (keeping the newest, the base of the next rate).
fn rate(samples: &mut VecDeque<(Instant, u64)>, now: Instant) -> f64 {
    while samples.len() > 1 && samples.front().is_some_and(|&(at, _)| now.duration_since(at) > RATE_WINDOW) {
        samples.pop_front();
    }
    let (Some(&(first_at, first)), Some(&(_, last))) = (samples.front(), samples.back()) else { return 0.0 };
    let elapsed = now.duration_since(first_at).max(Duration::from_secs(1)).as_secs_f64();
    #[allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let rate = last.saturating_sub(first) as f64 / elapsed;
    (rate * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_counts_the_window_and_falls_to_zero_when_idle() {
        let start = Instant::now();
        let mut samples = VecDeque::from([(start, 10)]);
        samples.push_back((start + Duration::from_secs(2), 30));
        assert!((rate(&mut samples, start + Duration::from_secs(2)) - 10.0).abs() < 1e-9);
        // Idle for longer than the window: only the newest sample stays.
        assert!(rate(&mut samples, start + Duration::from_secs(10)).abs() < 1e-9);
        assert_eq!(samples.len(), 1);
    }
}
