//! The kind watches the event streams share: one per kind, however many
//! streams show it. A page open in many tabs, or by many people, costs the
//! state (through gRPC, the connection, whose watches per client are
//! bounded) one watch per kind, not one per kind and tab.
//!
//! A feed keeps its kind's resources as they are now, so that a stream
//! joining late starts from them, as if it had opened the watch itself, and
//! then gets every change after them, in order. A feed ends with the last
//! stream holding it; one whose watch failed is opened afresh by the next
//! stream that shows its kind.
//!
//! A feed tells its streams each batch the watch delivers as one message (a
//! kind's bootstrap from an in-memory state is one batch, however many
//! resources it holds). A stream that falls more than [`LAG`] batches behind
//! a feed ends, for its client to start over, as a stream whose client reads
//! too slowly does (`events.rs`): the feed never waits for one stream.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use cosi::resource::{DynamicResource, Kind};
use cosi::state::{Event, Watch, WatchKindOptions};
use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio_util::sync::DropGuard;

use crate::Ui;
use crate::events::OpenGuard;

/// How many batches a stream may fall behind its feed.
pub(crate) const LAG: usize = 1024;

/// One batch of a feed, as its watch delivered it.
pub(crate) type Batch = Arc<[Item]>;

/// What a feed tells its streams.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    /// A resource was created, updated or destroyed (the change's name).
    Resource(&'static str, DynamicResource),
    /// Every resource the kind held when the feed opened has been told.
    Bootstrapped,
    /// The watch failed: nothing follows.
    Failed(String),
}

/// The open feeds, by kind.
#[derive(Default)]
pub(crate) struct Feeds {
    open: Mutex<HashMap<Kind, Weak<Feed>>>,
}

impl Feeds {
    /// The feed of `kind`: the open one, or a new one on a watch of its own.
    pub(crate) async fn feed(&self, ui: &Ui, kind: &Kind) -> cosi::Result<Arc<Feed>> {
        if let Some(feed) = self.live(kind) {
            return Ok(feed);
        }
        let watch = ui.state.watch_kind_dynamic(kind, WatchKindOptions::bootstrap()).await?;
        let mut open = self.open.lock();
        // Another stream may have opened one meanwhile: then this watch ends here.
        if let Some(feed) = open.get(kind).and_then(Weak::upgrade).filter(|feed| !feed.failed()) {
            return Ok(feed);
        }
        let feed = Feed::start(ui, kind.clone(), watch);
        open.retain(|_, feed| feed.strong_count() > 0);
        open.insert(kind.clone(), Arc::downgrade(&feed));
        Ok(feed)
    }

    fn live(&self, kind: &Kind) -> Option<Arc<Feed>> {
        self.open.lock().get(kind).and_then(Weak::upgrade).filter(|feed| !feed.failed())
    }
}

/// One kind's watch, and its resources as they are now.
pub(crate) struct Feed {
    shared: Mutex<Shared>,
    /// Ends the watch when the last stream lets go of the feed.
    _stop: DropGuard,
}

struct Shared {
    resources: BTreeMap<String, DynamicResource>,
    bootstrapped: bool,
    failed: Option<String>,
    changes: broadcast::Sender<Batch>,
}

impl Feed {
    fn start(ui: &Ui, kind: Kind, mut watch: Watch) -> Arc<Feed> {
        let stop = ui.shutdown.child_token();
        let (changes, _) = broadcast::channel(LAG);
        let shared = Shared { resources: BTreeMap::new(), bootstrapped: false, failed: None, changes };
        let feed = Arc::new(Feed { shared: Mutex::new(shared), _stop: stop.clone().drop_guard() });
        let weak = Arc::downgrade(&feed);
        let open = OpenGuard::new(ui, true);
        tokio::spawn(async move {
            let _open = open;
            loop {
                let batch = tokio::select! {
                    () = stop.cancelled() => return,
                    batch = watch.recv_batch() => batch,
                };
                let Some(events) = batch else {
                    let ended = Item::Failed(format!("the watch of {kind} ended"));
                    if let Some(feed) = weak.upgrade() {
                        feed.tell(Arc::new([ended]));
                    }
                    return;
                };
                let items: Batch = events.into_iter().filter_map(item).collect();
                let failed = items.iter().any(|item| matches!(item, Item::Failed(_)));
                let Some(feed) = weak.upgrade() else { return };
                if !items.is_empty() {
                    feed.tell(items);
                }
                if failed {
                    return;
                }
            }
        });
        feed
    }

    /// What a stream joining now starts from, and the batches after it.
    pub(crate) fn join(&self) -> (Vec<Item>, broadcast::Receiver<Batch>) {
        let shared = self.shared.lock();
        let mut start: Vec<Item> =
            shared.resources.values().map(|resource| Item::Resource("created", resource.clone())).collect();
        if shared.bootstrapped {
            start.push(Item::Bootstrapped);
        }
        if let Some(error) = &shared.failed {
            start.push(Item::Failed(error.clone()));
        }
        (start, shared.changes.subscribe())
    }

    fn failed(&self) -> bool {
        self.shared.lock().failed.is_some()
    }

    /// Keeps `items` in the resources as they are now, and tells the streams.
    fn tell(&self, items: Batch) {
        let mut shared = self.shared.lock();
        for item in items.iter() {
            match item {
                Item::Resource("destroyed", resource) => {
                    shared.resources.remove(resource.id());
                }
                Item::Resource(_, resource) => match shared.resources.get_mut(resource.id()) {
                    Some(kept) => kept.clone_from(resource),
                    None => {
                        shared.resources.insert(resource.id().to_owned(), resource.clone());
                    }
                },
                Item::Bootstrapped => shared.bootstrapped = true,
                Item::Failed(error) => shared.failed = Some(error.clone()),
            }
        }
        // No stream may be listening now; the next one starts from the resources.
        let _ = shared.changes.send(items);
    }
}

/// What a feed tells of a watch's event; `None` for what it leaves out.
fn item(event: Event) -> Option<Item> {
    Some(match event {
        Event::Created { resource, .. } => Item::Resource("created", resource),
        Event::Updated { resource, .. } => Item::Resource("updated", resource),
        Event::Destroyed { resource, .. } => Item::Resource("destroyed", resource),
        Event::Bootstrapped { .. } => Item::Bootstrapped,
        Event::Noop { .. } => return None,
        Event::Errored { error } => Item::Failed(error.to_string()),
    })
}
