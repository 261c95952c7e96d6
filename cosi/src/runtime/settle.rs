//! What [`Runtime::settled`](crate::RuntimeHandle::settled) waits on.
//!
//! The runtime has no pending work when, all at once:
//!
//! - no engine task is doing work that leads to reconciles (a controller
//!   starting, a resynchronisation, a re-queue a waker asked for, the
//!   publication of resource definitions): each holds an [`InFlight`];
//! - no reconcile controller has a pending wake-up or a reconcile running;
//! - no queue holds an item that is due, on hold or parked;
//! - every kind watch is established and has routed every event its state
//!   wrote so far: the engine notes how far its watch had read (a
//!   [`WatchProgress`](crate::state::WatchProgress)) after routing each
//!   batch, and compares that with what the state has written;
//! - no stopped kind watch (one no controller reads any more) has a task
//!   that has not ended yet.
//!
//! Work moves between these places (a write makes an event, an event a
//! wake-up, a wake-up a reconcile, a reconcile writes), and a check that
//! looks at them one after the other could see each place just after the
//! work left it and just before it arrived in the next. So every move bumps
//! an epoch: a check counts only when the epoch did not change while it ran.
//! The one move that does not bump is a write, and it is covered by the watch
//! check: a write made before the check began is counted in what the state has
//! written, and one made by a reconcile is followed by the bump of that
//! reconcile's end.
//!
//! The bump is part of each operation that moves work, in the type that
//! holds it, never a call the engine must remember: a controller's wake-up
//! and reconcile (`RegisteredController`), a queue's put, release and retain (`Queue`), a
//! feed's opening, phase, routing and end (`Feeds`, `KindWatch`), and an
//! engine task's start and end ([`InFlight`]).
//!
//! Waiting is event-driven: a waiter sleeps until the next bump, so no timer
//! decides anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The epoch of the runtime's pending work, and who waits for it to change.
#[derive(Default)]
pub(crate) struct WorkEpoch {
    epoch: AtomicU64,
    /// Engine tasks doing work that leads to reconciles.
    in_flight: AtomicUsize,
    /// `settled` calls waiting: without any, a bump skips the notification.
    waiters: AtomicUsize,
    changed: Notify,
}

impl WorkEpoch {
    /// Records that pending work moved; wakes the waiters.
    pub(crate) fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.changed.notify_waiters();
        }
    }

    /// Marks work in flight until the returned guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.bump();
        InFlight(Arc::clone(self))
    }

    pub(crate) fn in_flight(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0
    }

    /// Waits until `quiet` holds in a check no move of work overlapped, or
    /// until `stop` resolves.
    pub(crate) async fn settle(&self, quiet: impl Fn() -> bool, stop: impl std::future::Future<Output = ()>) {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(self);
        let settled = async {
            loop {
                // Registered before the check, so a bump during the check wakes us.
                let changed = self.changed.notified();
                let mut changed = std::pin::pin!(changed);
                changed.as_mut().enable();
                let before = self.epoch.load(Ordering::SeqCst);
                if quiet() && self.epoch.load(Ordering::SeqCst) == before {
                    return;
                }
                changed.await;
            }
        };
        // Biased (both branches return): the same choice every run.
        tokio::select! {
            biased;
            () = settled => (),
            () = stop => (),
        }
    }
}

/// Work in flight; dropping it bumps the epoch.
pub(crate) struct InFlight(Arc<WorkEpoch>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.bump();
    }
}

/// Unregisters a waiter, however `settle` ends.
struct Waiting<'a>(&'a WorkEpoch);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}
