//! The feed of each kind some controller reads: an observer where the state
//! offers one, else a watch task.
//!
//! An in-process state calls the kind's observer inside each write
//! ([`State::observe_kind_dynamic`]), which routes the change there and then:
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
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::resource::Kind;
use crate::runtime::engine::routing::{Routes, route};
use crate::runtime::engine::{Engine, panic_message};
use crate::runtime::settle::Activity;
use crate::state::{Bookmark, Event, Observation, Observer, State, Watch, WatchKindOptions, WatchProgress};

/// One kind's runtime watch, as the engine and `settled` see it.
pub(super) struct KindWatch {
    /// Stops this watch's task: cancelled when no route reads the kind any
    /// more, and with the engine's token at shutdown.
    cancel: CancellationToken,
    /// Whether the watch has been established once: controllers reading the
    /// kind start when it has. It stays true while the watch reopens.
    ready: Ready,
    phase: Mutex<Phase>,
    /// How far the current watch had read when it finished routing its last batch.
    routed: AtomicU64,
    /// The state's observation of the kind, when it routes the changes
    /// itself; dropping it (with the watch) stops the routing.
    _observation: Option<Observation>,
    /// Counts an observed kind as watched while its observation lasts (a
    /// watch task holds its own).
    _alive: Option<Alive>,
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

impl KindWatch {
    /// Whether every event the state wrote so far has been routed (exact
    /// when the state reports the watch's progress; otherwise, whether the
    /// watch runs and routed what it received).
    pub(super) fn caught_up(&self) -> bool {
        match &*self.phase.lock() {
            Phase::Observed => true,
            Phase::Opening => false,
            Phase::Routing { progress: Some(progress) } => self.routed.load(Ordering::SeqCst) >= progress.written(),
            Phase::Routing { progress: None } => true,
        }
    }
}

/// Resolves once every watch behind `ready` has been established (or its
/// task has ended: the kind is no longer read, or the runtime stopped).
pub(super) async fn ready(ready: Vec<Ready>) {
    for ready in ready {
        ready.wait().await;
    }
}

/// Whether a kind's watch has been established once, or its task ended.
///
/// A flag and a `Notify` rather than tokio's `watch` channel: that one wakes
/// its waiters in an order drawn from tokio's own random generator, which a
/// seeded simulation cannot replay; a `Notify` wakes them in the order they came.
pub(super) type Ready = Arc<Established>;

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
struct Ended(Ready);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// Routes the changes of one kind as the state commits them.
struct Router {
    routes: Arc<Routes>,
    kind: Kind,
    activity: Arc<Activity>,
}

impl Observer for Router {
    fn observe(&self, event: &Event) {
        let Some(resource) = event.resource() else { return };
        // A queued item moves pending work: a `settled` check running
        // meanwhile must not count.
        if route(&self.routes, &self.kind, resource) {
            self.activity.bump();
        }
    }
}

/// Counts a kind's watch as alive until its task ends, however it ends, or
/// its observation is dropped.
struct Alive {
    engine: Weak<Engine>,
    kind: Kind,
}

impl Drop for Alive {
    fn drop(&mut self) {
        let Some(engine) = self.engine.upgrade() else { return };
        {
            let mut tasks = engine.watch_tasks.lock();
            if let Some(count) = tasks.get_mut(&self.kind) {
                *count -= 1;
                if *count == 0 {
                    tasks.remove(&self.kind);
                }
            }
        }
        engine.activity.bump();
    }
}

impl Engine {
    /// Starts the feed of `kind` unless it runs; returns whether it is established.
    pub(super) fn ensure_watch(self: &Arc<Self>, kind: &Kind) -> Ready {
        let mut watches = self.watches.lock();
        if let Some(watch) = watches.get(kind) {
            return Arc::clone(&watch.ready);
        }
        *self.watch_tasks.lock().entry(kind.clone()).or_default() += 1;
        let alive = Alive { engine: Arc::downgrade(self), kind: kind.clone() };
        let router =
            Router { routes: Arc::clone(&self.routes), kind: kind.clone(), activity: Arc::clone(&self.activity) };
        let observation = match self.state.observe_kind_dynamic(kind, Arc::new(router)) {
            Some(Ok(observation)) => Some(observation),
            Some(Err(error)) => {
                tracing::warn!(%kind, %error, "the state cannot observe the kind; watching it instead");
                None
            }
            None => None,
        };
        if let Some(observation) = observation {
            // Established at once: every change from now on is routed as it commits.
            let ready = Ready::default();
            ready.set();
            let watch = KindWatch {
                cancel: self.cancel.child_token(),
                ready: Arc::clone(&ready),
                phase: Mutex::new(Phase::Observed),
                routed: AtomicU64::new(0),
                _observation: Some(observation),
                _alive: Some(alive),
            };
            watches.insert(kind.clone(), Arc::new(watch));
            self.activity.bump();
            return ready;
        }
        let ready = Ready::default();
        let established = Arc::clone(&ready);
        let watch = Arc::new(KindWatch {
            cancel: self.cancel.child_token(),
            ready: Arc::clone(&ready),
            phase: Mutex::new(Phase::Opening),
            routed: AtomicU64::new(0),
            _observation: None,
            _alive: None,
        });
        watches.insert(kind.clone(), Arc::clone(&watch));
        let engine = Arc::clone(self);
        let kind = kind.clone();
        self.spawn(async move {
            let _alive = alive;
            let _ended = Ended(Arc::clone(&established));
            // A panic (in the state's watch, say) opens the watch again after
            // a backoff, and its readers look at everything again.
            let mut backoff = Backoff::new(engine.options.backoff);
            let mut start = Start::First;
            loop {
                let run = AssertUnwindSafe(engine.watch_kind(&kind, &established, &watch, start));
                let Err(panic) = run.catch_unwind().await else { return };
                engine.enter(&watch, Phase::Opening);
                let delay = backoff.next_delay();
                tracing::error!(%kind, panic = %panic_message(&*panic), ?delay, "runtime watch panicked; restarting it");
                start = Start::Over;
                if watch.cancel.run_until_cancelled(tokio::time::sleep(delay)).await.is_none() {
                    return;
                }
            }
        });
        ready
    }

    /// Stops the watches of kinds no route reads any more. A route added
    /// meanwhile is in `routes` before its `ensure_watch`, and this holds
    /// `routes` while it looks: its watch is either kept or started again.
    ///
    /// `watches` first, as [`ensure_watch`](Engine::ensure_watch) holds it:
    /// that calls the state, whose writers route under `routes`, so waiting
    /// for `watches` with `routes` held could close a cycle with a writer and
    /// a reroute waiting to write `routes`.
    pub(super) fn stop_unread_watches(&self) {
        let mut stopped = Vec::new();
        {
            let mut watches = self.watches.lock();
            let routes = self.routes.read();
            watches.retain(|kind, watch| {
                let read = routes.contains_key(kind);
                if !read {
                    tracing::debug!(%kind, "no controller reads the kind any more; stopping its watch");
                    watch.cancel.cancel();
                    stopped.push(Arc::clone(watch));
                }
                read
            });
        }
        // Dropped out of the locks: ending an observation takes the state's
        // lock, under which writers route (and read `routes`).
        if !stopped.is_empty() {
            drop(stopped);
            self.activity.bump();
        }
    }

    /// Ends every kind's feed: the observations at once, the watch tasks at
    /// their next poll (the engine's token is cancelled).
    pub(super) fn stop_watches(&self) {
        let watches = std::mem::take(&mut *self.watches.lock());
        drop(watches);
    }

    fn enter(&self, watch: &KindWatch, phase: Phase) {
        *watch.phase.lock() = phase;
        self.activity.bump();
    }

    /// One kind's watch until it is cancelled: opens the state's watch,
    /// routes every change, and opens it again from wherever it ended.
    async fn watch_kind(&self, kind: &Kind, established: &Established, watch: &KindWatch, mut start: Start) {
        let mut backoff = Backoff::new(self.options.backoff);
        loop {
            self.enter(watch, Phase::Opening);
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
            self.enter(watch, Phase::Routing { progress: progress.clone() });
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
                if let Some(resource) = event.resource() {
                    route(&self.routes, kind, resource);
                }
            }
            // Everything read so far is routed: the wake-ups and queue items
            // it made are in place before `settled` can see the watch caught up.
            if let Some(progress) = &progress {
                watch.routed.store(progress.read(), Ordering::SeqCst);
            }
            self.activity.bump();
        }
        End::Closed(bookmark)
    }
}
