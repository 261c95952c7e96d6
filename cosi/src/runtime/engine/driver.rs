//! Every controller's loop, run inside one task.
//!
//! A chain of controllers is a chain of wake-ups: a write wakes the next
//! controller, whose write wakes the next. With a tokio task per controller,
//! each hop goes through tokio's scheduler, and on a multi-thread runtime
//! every few hops push a task to the run queue and wake an idle worker, which
//! steals it: the chain bounces between threads and each bounce is a futex
//! call. Here every controller's loop is a future of one task, the driver: a
//! hop is a push onto the driver's queue and the next poll of the same loop,
//! on the same thread, with nothing of tokio's in between.
//!
//! The price is that controllers run one at a time, concurrently rather than
//! in parallel, as the futures of one task do: a reconcile awaits, never
//! blocks, and hands CPU-heavy work to a task or the blocking pool of its
//! own. (A queue controller's workers after the first have tasks of their
//! own, so that its `concurrency` can use threads; see `worker`.) A loop
//! that has its next turn at once steps aside first ([`yield_turn`]), and
//! the driver yields to the rest of the program after [`BUDGET`] polls.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use futures_util::task::{ArcWake, AtomicWaker, waker_ref};
use parking_lot::Mutex;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::runtime::engine::panic_message;

/// Polls of controller futures in one poll of the driver before it lets
/// other tasks of the program run.
const BUDGET: usize = 64;

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The controllers' futures and the queue of those woken.
pub(super) struct Driver {
    shared: Arc<Shared>,
    /// Whether the driver's task has been spawned.
    spawned: AtomicBool,
}

struct Shared {
    /// Woken futures, in the order they were woken.
    ready: Mutex<VecDeque<Arc<Slot>>>,
    /// Futures not finished yet.
    live: AtomicUsize,
    /// The driver's own waker, woken when a future is woken while the
    /// driver is not polling.
    waker: AtomicWaker,
    /// Whether the driver is polling now: a future woken meanwhile is
    /// polled in the same loop, without waking the driver's task.
    polling: AtomicBool,
}

/// One controller's future.
struct Slot {
    future: Mutex<Option<Task>>,
    /// Whether the slot is in the ready queue.
    queued: AtomicBool,
    shared: Weak<Shared>,
}

impl ArcWake for Slot {
    fn wake_by_ref(slot: &Arc<Self>) {
        if slot.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(shared) = slot.shared.upgrade() else { return };
        shared.ready.lock().push_back(Arc::clone(slot));
        // Paired with the driver's store before its last look at the queue:
        // either it sees this slot, or this sees it is not polling.
        if !shared.polling.load(Ordering::SeqCst) {
            shared.waker.wake();
        }
    }
}

/// Lets every other woken controller go first: the caller is polled again
/// after them. A loop whose next turn is ready at once (a controller woken
/// again while it reconciled, a queue with more items) would otherwise run on
/// inside one poll, where neither the other controllers nor the driver's
/// budget can reach it.
pub(super) fn yield_turn() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

impl Default for Driver {
    fn default() -> Self {
        Driver {
            shared: Arc::new(Shared {
                ready: Mutex::default(),
                live: AtomicUsize::new(0),
                waker: AtomicWaker::new(),
                polling: AtomicBool::new(false),
            }),
            spawned: AtomicBool::new(false),
        }
    }
}

impl Driver {
    /// Adds `future` to the driver, to be polled at once. With the first
    /// future, returns the driver's task, for the caller to spawn; it ends
    /// once `stop` is cancelled and every future has finished.
    pub(super) fn add(
        &self,
        future: impl Future<Output = ()> + Send + 'static,
        stop: &CancellationToken,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        let slot = Arc::new(Slot {
            future: Mutex::new(Some(Box::pin(future))),
            queued: AtomicBool::new(false),
            shared: Arc::downgrade(&self.shared),
        });
        self.shared.live.fetch_add(1, Ordering::SeqCst);
        ArcWake::wake_by_ref(&slot);
        if self.spawned.swap(true, Ordering::AcqRel) {
            return None;
        }
        let shared = Arc::clone(&self.shared);
        let mut stopped = Box::pin(stop.clone().cancelled_owned());
        // Unconstrained by tokio's cooperative budget, which counts per task
        // and would run out for all controllers at once: the driver keeps
        // its own (`BUDGET`).
        Some(tokio::task::unconstrained(std::future::poll_fn(move |cx| shared.poll(cx, stopped.as_mut()))))
    }
}

impl Shared {
    /// Polls woken futures until none is left or the budget is spent; ends
    /// once the runtime stopped and every future has finished.
    fn poll(&self, cx: &mut Context<'_>, stopped: Pin<&mut WaitForCancellationFutureOwned>) -> Poll<()> {
        self.waker.register(cx.waker());
        self.polling.store(true, Ordering::SeqCst);
        for _ in 0..BUDGET {
            let Some(slot) = self.next() else {
                // A live future wakes the driver when the runtime stops (it
                // stops too); with none left, the stop itself must.
                if self.live.load(Ordering::SeqCst) == 0 && stopped.poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                return Poll::Pending;
            };
            slot.queued.store(false, Ordering::SeqCst);
            let mut future = slot.future.lock();
            let Some(task) = future.as_mut() else { continue };
            let waker = waker_ref(&slot);
            let polled =
                std::panic::catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(&mut Context::from_waker(&waker))));
            let done = match polled {
                Ok(poll) => poll.is_ready(),
                // The loops catch their panics; this is the last line.
                Err(panic) => {
                    tracing::error!(panic = %panic_message(&*panic), "a controller's loop panicked");
                    true
                }
            };
            if done {
                *future = None;
                self.live.fetch_sub(1, Ordering::SeqCst);
            }
        }
        // The budget is spent: let the program's other tasks run, and come back.
        self.polling.store(false, Ordering::SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The next woken future; with none left, stops polling (so that a later
    /// wake-up wakes the driver's task) and looks once more.
    fn next(&self) -> Option<Arc<Slot>> {
        if let Some(slot) = self.ready.lock().pop_front() {
            return Some(slot);
        }
        self.polling.store(false, Ordering::SeqCst);
        let slot = self.ready.lock().pop_front()?;
        self.polling.store(true, Ordering::SeqCst);
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver ends at the stop even when every future it ran ended
    /// before: with none left to wake it, the stop does.
    #[tokio::test]
    async fn the_driver_ends_at_the_stop_after_its_futures_have_ended() {
        let driver = Driver::default();
        let stop = CancellationToken::new();
        let task = tokio::spawn(driver.add(async {}, &stop).expect("the first future hands out the driver's task"));
        // Until the driver has polled the future, which ends at once.
        while driver.shared.live.load(Ordering::SeqCst) > 0 {
            tokio::task::yield_now().await;
        }
        stop.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(15), task)
            .await
            .expect("the driver's task ends at the stop")
            .expect("the driver's task");
    }
}
