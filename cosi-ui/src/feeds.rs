//! The kind watches the event streams share: one per kind, however many
//! streams show it. A page open in many tabs, or by many people, costs the
//! state (through gRPC, the connection, whose watches per client are
//! bounded) one watch per kind, not one per kind and tab.
//!
//! A feed keeps its kind's resources as they are now, and the last [`LAG`]
//! changes after its bootstrap. A stream joins a feed once the bootstrap has
//! ended, starting from the resources as they are then, as if it had opened
//! the watch itself, and then reads every change after them, in order. A
//! feed ends with the last stream holding it; one whose watch failed is
//! opened afresh by the next stream that shows its kind.
//!
//! Unless the page shows sensitive types, a feed checks its type against
//! the definitions after each batch its watch delivers (read then, so a
//! definition change made before a change of the kind is seen): once its
//! type is not to be shown, it ends, and its streams leave the kind out.
//!
//! A feed never waits for a stream. A stream that falls more than [`LAG`]
//! changes behind ends, for its client to start over, as a stream whose
//! client reads too slowly does (`events.rs`); a batch of more than
//! [`LAG`] changes is kept whole, so a stream that had read everything
//! before it reads all of it; the next change trims the feed back to [`LAG`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Weak};

use cosi::resource::{DynamicResource, Kind, Readable};
use cosi::state::{Event, Watch, WatchKindOptions};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::DropGuard;

use crate::Ui;
use crate::events::OpenGuard;

/// How many changes a stream may fall behind its feed.
pub(crate) const LAG: usize = 1024;

/// What a feed tells its streams.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    /// A resource was created, updated or destroyed (the change's name).
    Resource(&'static str, DynamicResource),
    /// Every resource the kind held when the feed opened has been told.
    Bootstrapped,
    /// The watch failed: nothing follows.
    Failed(String),
    /// The kind's type has become one the page does not show (a definition
    /// of it now says sensitive, or none says it is not): nothing follows.
    Hidden,
}

/// The open feeds, by kind.
#[derive(Default)]
pub(crate) struct Feeds {
    open: Mutex<HashMap<Kind, Weak<Feed>>>,
}

impl Feeds {
    /// The feed of `kind`: the open one, or a new one on a watch of its own.
    pub(crate) async fn feed(&self, ui: &Ui, kind: &Kind) -> cosi::Result<Arc<Feed>> {
        if let Some(feed) = live(&self.open.lock(), kind) {
            return Ok(feed);
        }
        let watch = ui.state.watch_kind_dynamic(kind, WatchKindOptions::bootstrap()).await?;
        let mut open = self.open.lock();
        // Another stream may have opened one meanwhile: then this watch ends here.
        if let Some(feed) = live(&open, kind) {
            return Ok(feed);
        }
        let feed = Feed::start(ui, kind.clone(), watch);
        open.retain(|_, feed| feed.strong_count() > 0);
        open.insert(kind.clone(), Arc::downgrade(&feed));
        Ok(feed)
    }
}

/// The feed of `kind` among `open`, unless it ended, failed or was hidden.
fn live(open: &HashMap<Kind, Weak<Feed>>, kind: &Kind) -> Option<Arc<Feed>> {
    open.get(kind).and_then(Weak::upgrade).filter(|feed| !feed.ended())
}

/// One kind's watch, its resources as they are now, and its last changes.
pub(crate) struct Feed {
    shared: Mutex<Shared>,
    /// Told after each batch of changes, and when the bootstrap ends.
    changed: Notify,
    /// Ends the watch when the last stream lets go of the feed.
    _stop: DropGuard,
}

struct Shared {
    resources: BTreeMap<String, DynamicResource>,
    bootstrapped: bool,
    failed: Option<String>,
    /// The kind's type is no longer shown: the feed holds nothing more.
    hidden: bool,
    /// The changes since the bootstrap, at most [`LAG`], oldest first.
    recent: VecDeque<Item>,
    /// The number of `recent`'s first change, counted from the bootstrap.
    first: u64,
}

impl Feed {
    fn start(ui: &Ui, kind: Kind, mut watch: Watch) -> Arc<Feed> {
        let stop = ui.shutdown.child_token();
        let shared = Shared {
            resources: BTreeMap::new(),
            bootstrapped: false,
            failed: None,
            hidden: false,
            recent: VecDeque::new(),
            first: 0,
        };
        let feed =
            Arc::new(Feed { shared: Mutex::new(shared), changed: Notify::new(), _stop: stop.clone().drop_guard() });
        let weak = Arc::downgrade(&feed);
        let open = OpenGuard::new(ui, true);
        let ui = ui.clone();
        tokio::spawn(async move {
            let _open = open;
            loop {
                let batch = tokio::select! {
                    () = stop.cancelled() => return,
                    batch = watch.recv_batch() => batch,
                };
                let mut items: Vec<Item> = match batch {
                    Some(events) => events.into_iter().filter_map(item).collect(),
                    None => vec![Item::Failed(format!("the watch of {kind} ended"))],
                };
                if let Some(end) = still_shown(&ui, &kind).await {
                    items = vec![end];
                }
                let ended = items.iter().any(|item| matches!(item, Item::Failed(_) | Item::Hidden));
                let Some(feed) = weak.upgrade() else { return };
                feed.tell(items);
                if ended {
                    return;
                }
            }
        });
        feed
    }

    /// Joins the feed once its bootstrap has ended (or its watch failed):
    /// what the stream starts from, and its place for the changes after.
    pub(crate) async fn join(self: Arc<Self>) -> (Vec<Item>, Reader) {
        let (start, next) = loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(joined) = self.now() {
                break joined;
            }
            changed.await;
        };
        (start, Reader { feed: self, next })
    }

    /// Once the bootstrap has ended (or the watch failed, or the kind was
    /// hidden): the resources as they are now, and the number of the next change.
    fn now(&self) -> Option<(Vec<Item>, u64)> {
        let shared = self.shared.lock();
        if shared.hidden {
            return Some((vec![Item::Hidden], shared.first + shared.recent.len() as u64));
        }
        if !shared.bootstrapped && shared.failed.is_none() {
            return None;
        }
        let mut start: Vec<Item> =
            shared.resources.values().map(|resource| Item::Resource("created", resource.clone())).collect();
        if shared.bootstrapped {
            start.push(Item::Bootstrapped);
        }
        if let Some(error) = &shared.failed {
            start.push(Item::Failed(error.clone()));
        }
        Some((start, shared.first + shared.recent.len() as u64))
    }

    /// Whether nothing more comes: the watch failed, or the kind was hidden.
    fn ended(&self) -> bool {
        let shared = self.shared.lock();
        shared.failed.is_some() || shared.hidden
    }

    /// Keeps `items` in the resources as they are now and, after the
    /// bootstrap, in the last changes; tells the streams.
    fn tell(&self, items: Vec<Item>) {
        let mut shared = self.shared.lock();
        // Only changes before this batch make room: a stream that had read
        // them all reads the whole batch, however large.
        let batch = shared.first + shared.recent.len() as u64;
        for item in items {
            match &item {
                Item::Resource("destroyed", resource) => {
                    shared.resources.remove(resource.id());
                }
                Item::Resource(_, resource) => match shared.resources.get_mut(resource.id()) {
                    Some(kept) => kept.clone_from(resource),
                    None => {
                        shared.resources.insert(resource.id().to_owned(), resource.clone());
                    }
                },
                Item::Bootstrapped => {
                    shared.bootstrapped = true;
                    continue;
                }
                Item::Failed(error) => shared.failed = Some(error.clone()),
                Item::Hidden => {
                    // What it held goes: no stream reads any of it any more.
                    shared.hidden = true;
                    shared.resources.clear();
                    shared.first += shared.recent.len() as u64;
                    shared.recent.clear();
                    continue;
                }
            }
            if shared.bootstrapped {
                shared.recent.push_back(item);
                // Back to the bound once the changes over it are older
                // than this batch (after a batch larger than the bound).
                while shared.recent.len() > LAG && shared.first < batch {
                    shared.recent.pop_front();
                    shared.first += 1;
                }
            }
        }
        drop(shared);
        self.changed.notify_waiters();
    }
}

/// A stream's place in a feed; it holds the feed open.
pub(crate) struct Reader {
    feed: Arc<Feed>,
    /// The number of the next change to read.
    next: u64,
}

impl Reader {
    /// The changes after those read, waiting for one; `None` once this
    /// stream has fallen more than [`LAG`] changes behind. Once the kind is
    /// hidden, only [`Item::Hidden`], even for changes not read yet.
    pub(crate) async fn next(&mut self) -> Option<Vec<Item>> {
        loop {
            let changed = self.feed.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let shared = self.feed.shared.lock();
                if shared.hidden {
                    return Some(vec![Item::Hidden]);
                }
                let from = usize::try_from(self.next.checked_sub(shared.first)?).ok()?;
                if from < shared.recent.len() {
                    let items: Vec<Item> = shared.recent.range(from..).cloned().collect();
                    self.next += items.len() as u64;
                    return Some(items);
                }
            }
            changed.await;
        }
    }
}

/// `None` while `kind` may still be shown; else what ends its feed: hidden,
/// or failed when the definitions cannot be read (the page fails closed).
///
/// Checked after each batch the watch delivers, against the definitions
/// read then: a definition change that made the type sensitive before a
/// change of the kind was written is seen, wherever the two feeds are.
async fn still_shown(ui: &Ui, kind: &Kind) -> Option<Item> {
    if ui.config.show_sensitive {
        return None;
    }
    match crate::model::definitions(ui).await {
        Ok(definitions) if definitions.readable(kind.r#type()) == Readable::Yes => None,
        Ok(_) => {
            tracing::debug!(%kind, "a definition change hides a kind the event streams showed: they leave it out now");
            Some(Item::Hidden)
        }
        Err(error) => Some(Item::Failed(format!("cannot tell whether {kind} may still be shown: {error}"))),
    }
}

/// What a feed tells of a watch's event; `None` for what it leaves out.
fn item(event: Event) -> Option<Item> {
    Some(match event {
        Event::Created { resource, .. } => Item::Resource("created", resource),
        Event::Updated { resource, .. } => Item::Resource("updated", resource),
        Event::Destroyed { pointer, resource, .. } => {
            Item::Resource("destroyed", resource.unwrap_or_else(|| DynamicResource::tombstone(&pointer)))
        }
        Event::Bootstrapped { .. } => Item::Bootstrapped,
        Event::Noop { .. } => return None,
        Event::Errored { error } => Item::Failed(error.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use cosi::resource::Metadata;
    use futures_util::FutureExt as _;

    use super::*;

    /// A feed with no watch behind it: the tests tell it changes.
    fn feed() -> Arc<Feed> {
        let shared = Shared {
            resources: BTreeMap::new(),
            bootstrapped: false,
            failed: None,
            hidden: false,
            recent: VecDeque::new(),
            first: 0,
        };
        let stop = tokio_util::sync::CancellationToken::new();
        Arc::new(Feed { shared: Mutex::new(shared), changed: Notify::new(), _stop: stop.drop_guard() })
    }

    fn created(id: &str) -> Item {
        Item::Resource("created", DynamicResource::without_spec(Metadata::new("default", "Things.test.cosi.dev", id)))
    }

    fn ids(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .map(|item| match item {
                Item::Resource(change, resource) => format!("{change} {}", resource.id()),
                Item::Bootstrapped => "bootstrapped".to_owned(),
                Item::Failed(error) => format!("failed: {error}"),
                Item::Hidden => "hidden".to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_stream_joins_after_the_bootstrap_and_reads_each_change_once() {
        let feed = feed();
        let mut joining = Box::pin(Arc::clone(&feed).join());
        feed.tell(vec![created("a")]);
        assert!(joining.as_mut().now_or_never().is_none(), "joined before the bootstrap ended");
        feed.tell(vec![created("b"), Item::Bootstrapped, created("c")]);
        let (start, mut reader) = joining.now_or_never().expect("joined once bootstrapped");
        assert_eq!(ids(&start), ["created a", "created b", "created c", "bootstrapped"]);
        assert!(reader.next().now_or_never().is_none(), "nothing new yet");
        feed.tell(vec![created("d")]);
        feed.tell(vec![Item::Failed("gone".into())]);
        let read = reader.next().now_or_never().flatten().expect("the changes after the start");
        assert_eq!(ids(&read), ["created d", "failed: gone"]);
        assert!(reader.next().now_or_never().is_none(), "each change once");
    }

    #[test]
    fn once_hidden_a_feed_gives_nothing_more_even_what_was_not_read_yet() {
        let feed = feed();
        feed.tell(vec![created("a"), Item::Bootstrapped]);
        let (_, mut behind) = Arc::clone(&feed).join().now_or_never().expect("joined");
        feed.tell(vec![created("b")]);
        feed.tell(vec![Item::Hidden]);
        assert!(feed.ended());
        let read = behind.next().now_or_never().flatten().expect("told");
        assert_eq!(ids(&read), ["hidden"], "not the change it had not read");
        let (start, mut late) = Arc::clone(&feed).join().now_or_never().expect("joined");
        assert_eq!(ids(&start), ["hidden"], "not the resources it held");
        assert_eq!(ids(&late.next().now_or_never().flatten().expect("told")), ["hidden"]);
    }

    #[test]
    fn a_stream_more_than_lag_behind_ends_and_a_large_batch_is_kept_whole() {
        let feed = feed();
        feed.tell(vec![Item::Bootstrapped]);
        let (_, mut behind) = Arc::clone(&feed).join().now_or_never().expect("joined");
        let (_, mut exactly) = Arc::clone(&feed).join().now_or_never().expect("joined");
        feed.tell(vec![created("first")]);
        let (_, mut caught_up) = Arc::clone(&feed).join().now_or_never().expect("joined");
        for n in 0..LAG - 1 {
            feed.tell(vec![created(&format!("n{n}"))]);
        }
        // `exactly` is LAG changes behind: it reads them all.
        let read = exactly.next().now_or_never().flatten().expect("LAG behind is not too far");
        assert_eq!(read.len(), LAG);
        // One batch larger than LAG: a stream that had read everything before it reads it whole.
        let batch: Vec<Item> = (0..LAG + 10).map(|n| created(&format!("big{n}"))).collect();
        let _ = caught_up.next().now_or_never().flatten().expect("the small changes");
        feed.tell(batch);
        let read = caught_up.next().now_or_never().flatten().expect("the whole batch");
        assert_eq!(read.len(), LAG + 10);
        // `behind` never read: it is too far behind now.
        assert!(matches!(behind.next().now_or_never(), Some(None)), "more than LAG behind ends");
        // The next change brings the feed back to the bound: the large batch is not kept for good.
        assert_eq!(feed.shared.lock().recent.len(), LAG + 10);
        feed.tell(vec![created("after")]);
        assert_eq!(feed.shared.lock().recent.len(), LAG, "trimmed to the bound");
        let read = caught_up.next().now_or_never().flatten().expect("the change after the batch");
        assert_eq!(ids(&read), ["created after"]);
    }
}
