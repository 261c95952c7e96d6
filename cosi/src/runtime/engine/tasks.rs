//! Every task the runtime runs: where they are spawned, how they stop, and
//! the pool the controllers run in.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::FutureExt;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tokio_util::task::TaskTracker;

use crate::runtime::engine::panic_message;
use crate::runtime::engine::pool::Pool;
use crate::runtime::registered::RegisteredController;

/// The tracker every task is spawned on, the token that stops them all, and
/// the pool of lanes.
pub(super) struct Tasks {
    /// The tokio runtime `start` ran on: every task goes there, so a
    /// controller registered later from any thread starts on it too.
    handle: OnceLock<tokio::runtime::Handle>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// Runs the controllers' loops, inside the lanes, tasks of the tracker.
    pool: Pool,
}

impl Tasks {
    pub(super) fn new(long_poll: Duration) -> Self {
        Tasks {
            handle: OnceLock::new(),
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            pool: Pool::new(long_poll),
        }
    }

    /// Takes the tokio runtime of `handle` for every task, and starts the
    /// pool's lanes there, one per worker thread.
    pub(super) fn start(&self, handle: tokio::runtime::Handle) {
        let lanes = handle.metrics().num_workers();
        if self.handle.set(handle).is_err() {
            return;
        }
        for lane in self.pool.start(lanes, &self.cancel) {
            self.spawn(lane);
        }
    }

    /// Whether the runtime started and has not stopped.
    pub(super) fn running(&self) -> bool {
        self.handle.get().is_some() && !self.cancel.is_cancelled()
    }

    /// Spawns `task` on the tracker; a panic in it is logged, never silent
    /// (the watch and controller tasks also handle theirs).
    pub(super) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let task = async move {
            if let Err(panic) = AssertUnwindSafe(task).catch_unwind().await {
                tracing::error!(panic = %panic_message(&*panic), "a runtime task panicked");
            }
        };
        match self.handle.get() {
            Some(handle) => drop(self.tracker.spawn_on(task, handle)),
            None => drop(self.tracker.spawn(task)),
        }
    }

    /// Runs `future` (`registered`'s loop, or a queue worker) in the pool.
    pub(super) fn drive(
        &self,
        registered: &Arc<RegisteredController>,
        future: impl Future<Output = ()> + Send + 'static,
    ) {
        self.pool.add(Arc::clone(registered), future);
    }

    /// A child of the stop, for a task that may also stop alone.
    pub(super) fn child(&self) -> CancellationToken {
        self.cancel.child_token()
    }

    /// The stop, as a token.
    pub(super) fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Resolves once the runtime stops.
    pub(super) fn stopped(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Sleeps for `delay`; `false` when the runtime stopped first.
    pub(super) async fn pause(&self, delay: Duration) -> bool {
        self.cancel.run_until_cancelled(tokio::time::sleep(delay)).await.is_some()
    }

    /// Stops every task without waiting: each ends at its next poll.
    pub(super) fn stop(&self) {
        self.cancel.cancel();
        self.tracker.close();
    }

    /// Waits until every task has ended.
    pub(super) async fn wait(&self) {
        self.tracker.wait().await;
    }
}
