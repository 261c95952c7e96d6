//! The feed of each kind some controller reads: an observer where the state
//! offers one, else a watch task.
//!
//! An in-process state calls the kind's observer inside each write
//! ([`InProcess::observe_kind`](crate::state::InProcess::observe_kind)), which routes the change there and then:
//! no task, no buffer, no gap, and always caught up. A remote state gets a
//! watch task instead, which goes through two phases, [`Phase::Opening`] and
//! [`Phase::Routing`], and each time it opens starts from one of three points
//! ([`Start`]): the first time from now, after an end from its last bookmark
//! (nothing missed), and after a gap (a lost bookmark, an overrun, a panic)
//! from now with every reader looking at everything again. Either stops when
//! no route reads the kind any more.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use futures_util::FutureExt;
use parking_lot::Mutex;
// Looked up for every kind a controller reads, at each check of `settled`.
use rustc_hash::FxHashMap as HashMap;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::resource::Kind;
use crate::runtime::engine::routing::Router;
use crate::runtime::engine::{Wiring, panic_message};
use crate::runtime::settle::WorkEpoch;
use crate::state::{Bookmark, Event, Observation, Observer, Watch, WatchKindOptions, WatchProgress};

/// The feeds of the kinds some controller reads, and the watch tasks of
/// kinds no longer read that have not ended yet.
pub(super) struct Feeds {
    kinds: Mutex<HashMap<Kind, Fed>>,
    /// Every change here moves pending work: it bumps the epoch.
    epoch: Arc<WorkEpoch>,
}

/// One kind's entry: its feed while some controller reads it, and how many
/// of its feeds are alive (its watch tasks until they end, or its observation).
#[derive(Default)]
struct Fed {
    watch: Option<Arc<KindWatch>>,
    alive: usize,
}

/// One kind's runtime watch, as the engine and `settled` see it.
pub(super) struct KindWatch {
    /// Stops this watch's task: cancelled when no route reads the kind any
    /// more, and with the engine's token at shutdown.
    cancel: CancellationToken,
    /// Whether the watch has been established once: controllers reading the
    /// kind start when it has. It stays true while the watch reopens.
    established: Arc<Established>,
    phase: Mutex<Phase>,
    /// How far the current watch had read when it finished routing its last batch.
    routed: AtomicU64,
    /// The state's observation of the kind, when it routes the changes
    /// itself; dropping it (with the watch) stops the routing.
    _observation: Option<Observation>,
    /// Counts an observed kind as fed while its observation lasts (a
    /// watch task holds its own).
    _alive: Option<Alive>,
    epoch: Arc<WorkEpoch>,
}

/// Where a kind's watch stands.
enum Phase {
    /// Observed: the state routes each change as it commits, so the watch
    /// is always caught up.
    Observed,
    /// Opening the state's watch (or reopening it, or making up for a gap):
    /// not caught up.
    Opening,
    /// Routing what the watch delivers; `progress` tells how far it has read,
    /// when its state can.
    Routing { progress: Option<Arc<dyn WatchProgress>> },
}

/// Where the next watch of a kind starts.
enum Start {
    /// The first watch: every reader reconciles at its start anyway.
    First,
    /// Right after the last event routed.
    Resume(Bookmark),
    /// From now, after a gap: every reader looks at all of the kind again.
    Over,
}

/// How a watch ended.
enum End {
    /// The stream closed; it resumes from its last bookmark, if it had one.
    Closed(Option<Bookmark>),
    /// It fell behind the state's history.
    Overrun(crate::state::Error),
}

impl Feeds {
    pub(super) fn new(epoch: Arc<WorkEpoch>) -> Arc<Self> {
        Arc::new(Feeds { kinds: Mutex::default(), epoch })
    }

    /// The feed of `kind`, or the one `open` makes (under the lock, so that
    /// a kind gets one), given what counts it as alive.
    fn ensure(self: &Arc<Self>, kind: &Kind, open: impl FnOnce(Alive) -> Arc<KindWatch>) -> Arc<Established> {
        let mut kinds = self.kinds.lock();
        let fed = kinds.entry(kind.clone()).or_default();
        if let Some(watch) = &fed.watch {
            return Arc::clone(&watch.established);
        }
        fed.alive += 1;
        let watch = open(Alive { feeds: Arc::downgrade(self), kind: kind.clone() });
        let established = Arc::clone(&watch.established);
        fed.watch = Some(watch);
        self.epoch.bump();
        established
    }

    /// Stops the feeds of the kinds `read` says no route reads any more.
    fn stop_unread(&self, read: impl Fn(&Kind) -> bool) {
        let mut stopped = Vec::new();
        for (kind, fed) in self.kinds.lock().iter_mut() {
            if fed.watch.is_some() && !read(kind) {
                tracing::debug!(%kind, "no controller reads the kind any more; stopping its watch");
                stopped.extend(fed.watch.take());
            }
        }
        if stopped.is_empty() {
            return;
        }
        for watch in &stopped {
            watch.cancel.cancel();
        }
        // Dropped out of the lock: ending an observation takes the state's
        // lock, under which writers route.
        drop(stopped);
        self.epoch.bump();
    }

    /// Ends every feed: the observations at once, the watch tasks at their
    /// next poll (the engine's token is cancelled).
    fn stop_all(&self) {
        let stopped: Vec<_> = self.kinds.lock().values_mut().filter_map(|fed| fed.watch.take()).collect();
        drop(stopped);
    }

    /// A feed of `kind` ended (its task, or its observation).
    fn ended(&self, kind: &Kind) {
        {
            let mut kinds = self.kinds.lock();
            if let Some(fed) = kinds.get_mut(kind) {
                fed.alive = fed.alive.saturating_sub(1);
                if fed.alive == 0 && fed.watch.is_none() {
                    kinds.remove(kind);
                }
            }
        }
        self.epoch.bump();
    }

    /// Whether every kind read is fed and caught up, and no feed of a kind
    /// no longer read is still alive.
    pub(super) fn caught_up(&self) -> bool {
        self.kinds
            .lock()
            .values()
            .all(|fed| fed.alive == 1 && fed.watch.as_ref().is_some_and(|watch| watch.caught_up()))
    }

    /// The kinds with a feed alive, sorted.
    pub(super) fn fed_kinds(&self) -> Vec<Kind> {
        let mut kinds: Vec<Kind> =
            self.kinds.lock().iter().filter(|(_, fed)| fed.alive > 0).map(|(kind, _)| kind.clone()).collect();
        kinds.sort();
        kinds
    }
}

impl KindWatch {
    fn new(cancel: CancellationToken, phase: Phase, epoch: Arc<WorkEpoch>) -> Self {
        KindWatch {
            cancel,
            established: Arc::default(),
            phase: Mutex::new(phase),
            routed: AtomicU64::new(0),
            _observation: None,
            _alive: None,
            epoch,
        }
    }

    /// Whether every event the state wrote so far has been routed (exact
    /// when the state reports the watch's progress; otherwise, whether the
    /// watch runs and routed what it received).
    fn caught_up(&self) -> bool {
        match &*self.phase.lock() {
            Phase::Observed => true,
            Phase::Opening => false,
            Phase::Routing { progress: Some(progress) } => self.routed.load(Ordering::SeqCst) >= progress.written(),
            Phase::Routing { progress: None } => true,
        }
    }

    fn enter(&self, phase: Phase) {
        *self.phase.lock() = phase;
        self.epoch.bump();
    }

    /// Everything the watch read up to `read` is routed: the wake-ups and
    /// queue items it made are in place before `settled` sees it caught up.
    fn routed_to(&self, read: u64) {
        self.routed.store(read, Ordering::SeqCst);
        self.epoch.bump();
    }
}

/// Resolves once every watch behind `established` has been established (or
/// its task has ended: the kind is no longer read, or the runtime stopped).
pub(super) async fn all_established(established: Vec<Arc<Established>>) {
    for watch in established {
        watch.wait().await;
    }
}

/// Whether a kind's watch has been established once, or its task ended.
///
/// A flag and a `Notify` rather than tokio's `watch` channel: that one wakes
/// its waiters in an order drawn from tokio's own random generator, which a
/// seeded simulation cannot replay; a `Notify` wakes them in the order they came.
#[derive(Default)]
pub(super) struct Established {
    set: AtomicBool,
    changed: Notify,
}

impl Established {
    fn set(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    async fn wait(&self) {
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if self.set.load(Ordering::SeqCst) {
                return;
            }
            changed.await;
        }
    }
}

/// Releases the waiters of a watch whose task ends, however it ends.
struct Ended(Arc<Established>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// Routes the changes of one kind as the state commits them.
struct Routing {
    router: Arc<Router>,
    kind: Kind,
}

impl Observer for Routing {
    fn observe(&self, event: &Event) {
        self.router.route_event(&self.kind, event);
    }
}

/// Counts a kind's feed as alive until its task ends, however it ends, or
/// its observation is dropped.
struct Alive {
    feeds: Weak<Feeds>,
    kind: Kind,
}

impl Drop for Alive {
    fn drop(&mut self) {
        if let Some(feeds) = self.feeds.upgrade() {
            feeds.ended(&self.kind);
        }
    }
}

impl Wiring {
    /// Starts the feed of `kind` unless it runs; returns whether it is established.
    pub(super) fn ensure_watch(self: &Arc<Self>, kind: &Kind) -> Arc<Established> {
        self.feeds.ensure(kind, |alive| self.open_feed(kind, alive))
    }

    /// The feed of `kind`: its observation where the state offers one (it
    /// routes every change as it commits), else a watch task.
    fn open_feed(self: &Arc<Self>, kind: &Kind, alive: Alive) -> Arc<KindWatch> {
        let routing = Routing { router: Arc::clone(&self.router), kind: kind.clone() };
        let observation = match crate::state::observe_kind(&*self.state, kind, Arc::new(routing)) {
            Some(Ok(observation)) => Some(observation),
            Some(Err(error)) => {
                tracing::warn!(%kind, %error, "the state cannot observe the kind; watching it instead");
                None
            }
            None => None,
        };
        if let Some(observation) = observation {
            // Established at once: every change from now on is routed as it commits.
            let mut watch = KindWatch::new(self.tasks.child(), Phase::Observed, Arc::clone(&self.epoch));
            watch.established.set();
            watch._observation = Some(observation);
            watch._alive = Some(alive);
            return Arc::new(watch);
        }
        let watch = Arc::new(KindWatch::new(self.tasks.child(), Phase::Opening, Arc::clone(&self.epoch)));
        let established = Arc::clone(&watch.established);
        let (wiring, task_watch, kind) = (Arc::clone(self), Arc::clone(&watch), kind.clone());
        self.tasks.spawn(async move {
            let _alive = alive;
            let _ended = Ended(Arc::clone(&established));
            // A panic (in the state's watch, say) opens the watch again after
            // a backoff, and its readers look at everything again.
            let mut backoff = Backoff::new(wiring.options.backoff);
            let mut start = Start::First;
            loop {
                let run = AssertUnwindSafe(wiring.watch_kind(&kind, &established, &task_watch, start));
                let Err(panic) = run.catch_unwind().await else { return };
                task_watch.enter(Phase::Opening);
                let delay = backoff.next_delay();
                tracing::error!(%kind, panic = %panic_message(&*panic), ?delay, "runtime watch panicked; restarting it");
                start = Start::Over;
                if task_watch.cancel.run_until_cancelled(tokio::time::sleep(delay)).await.is_none() {
                    return;
                }
            }
        });
        watch
    }

    /// Stops the feeds of kinds no route reads any more. A route added
    /// meanwhile is in the routes before its `ensure_watch`, which waits for
    /// the feeds' lock held here: its feed is either kept or started again.
    pub(super) fn stop_unread_watches(&self) {
        self.feeds.stop_unread(|kind| self.router.is_read(kind));
    }

    /// Ends every kind's feed: the observations at once, the watch tasks at
    /// their next poll (the engine's token is cancelled).
    pub(super) fn stop_watches(&self) {
        self.feeds.stop_all();
    }

    /// One kind's watch until it is cancelled: opens the state's watch,
    /// routes every change, and opens it again from wherever it ended.
    async fn watch_kind(&self, kind: &Kind, established: &Established, watch: &KindWatch, mut start: Start) {
        let mut backoff = Backoff::new(self.options.backoff);
        loop {
            watch.enter(Phase::Opening);
            let options = match &start {
                Start::Resume(bookmark) => WatchKindOptions::from_bookmark(bookmark.clone()),
                Start::First | Start::Over => WatchKindOptions::default().with_bootstrap_bookmark(),
            };
            let Some(opened) = watch.cancel.run_until_cancelled(self.state.watch_kind_dynamic(kind, options)).await
            else {
                return;
            };
            let mut stream = match opened {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::warn!(%kind, %error, "runtime watch failed; retrying");
                    // The bookmark may be older than the state's history: start over at once.
                    if matches!(start, Start::Resume(_)) {
                        start = Start::Over;
                        continue;
                    }
                    match watch.cancel.run_until_cancelled(tokio::time::sleep(backoff.next_delay())).await {
                        Some(()) => continue,
                        None => return,
                    }
                }
            };
            backoff.reset();
            let progress = stream.progress();
            watch.routed.store(progress.as_ref().map_or(0, |progress| progress.read()), Ordering::SeqCst);
            established.set();
            if matches!(start, Start::Over) {
                self.resync(kind, None).await;
            }
            watch.enter(Phase::Routing { progress: progress.clone() });
            let bookmark = match start {
                Start::Resume(bookmark) => Some(bookmark),
                Start::First | Start::Over => None,
            };
            let routed = self.route_all(kind, &mut stream, watch, progress, bookmark);
            let Some(end) = watch.cancel.run_until_cancelled(routed).await else { return };
            start = match end {
                End::Closed(Some(bookmark)) => Start::Resume(bookmark),
                End::Closed(None) => Start::Over,
                End::Overrun(error) => {
                    tracing::warn!(%kind, %error, "runtime watch fell behind; starting over");
                    Start::Over
                }
            };
        }
    }

    /// Routes every batch of `stream` until it ends; `bookmark` is where it started.
    async fn route_all(
        &self,
        kind: &Kind,
        stream: &mut Watch,
        watch: &KindWatch,
        progress: Option<Arc<dyn WatchProgress>>,
        mut bookmark: Option<Bookmark>,
    ) -> End {
        while let Some(batch) = stream.recv_batch().await {
            for event in &batch {
                if let Event::Errored { error } = event {
                    return End::Overrun(error.clone());
                }
                if let Some(mark) = event.bookmark() {
                    bookmark = Some(mark.clone());
                }
                self.router.route_event(kind, event);
            }
            watch.routed_to(progress.as_ref().map_or(0, |progress| progress.read()));
        }
        End::Closed(bookmark)
    }
}
