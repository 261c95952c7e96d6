//! The OS's own background tasks: file watchers, fake DHCP clients, timers
//! and simulated service processes.
//!
//! They run beside the controller runtime's tasks, on one [`TaskTracker`], so
//! that shutdown can stop them all and wait until each has ended: nothing
//! they hold (the state, through a controller's waker) outlives the OS, and
//! the durable state is closed when shutdown returns.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Spawns and stops the OS's background tasks. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    cancel: CancellationToken,
}

/// A running task: dropping it (or [`stop`](Task::stop)) cancels it.
#[derive(Debug)]
pub struct Task {
    cancel: CancellationToken,
}

impl Tasks {
    /// Runs `future` until it ends, its [`Task`] is dropped, or the OS stops.
    pub fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) -> Task {
        let cancel = self.cancel.child_token();
        let stopped = cancel.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = stopped.cancelled() => (),
                () = future => (),
            }
        });
        Task { cancel }
    }

    /// Stops every task and waits until all have ended.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

impl Task {
    /// Stops the task (it ends at its next await).
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// Whether the task was stopped.
    pub fn is_stopped(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
