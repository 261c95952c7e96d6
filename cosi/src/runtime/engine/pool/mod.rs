//! The pool every controller's loop runs in: the controllers' futures, one
//! queue of those woken, and as many lanes polling it as the tokio runtime
//! has worker threads.
//!
//! A chain of controllers is a chain of wake-ups: a write wakes the next
//! controller, whose write wakes the next. With a tokio task per controller,
//! each hop goes through tokio's scheduler, and on a multi-thread runtime
//! every few hops push a task to the run queue and wake an idle worker,
//! which steals it: the chain bounces between threads and each bounce is a
//! futex call. Here a lane (a tokio task) polls controller futures one after
//! the other from the pool's queue, and a controller woken from inside a
//! lane is left to that lane: a hop is a push onto the queue and the next
//! poll of the same loop, on the same thread, with nothing of tokio's in
//! between.
//!
//! A lane cannot preempt a controller that holds its thread (a reconcile
//! that computes for milliseconds without awaiting), so there is more than
//! one lane, and the others carry on meanwhile:
//!
//! - a controller woken from outside every lane (a client's write, a watch
//!   task, a timer) while no lane is free to take it next wakes an idle
//!   lane;
//! - a lane that takes a controller from the queue and leaves more behind
//!   wakes an idle lane for the rest, and hands its own tokio task back to
//!   the scheduler first, so that the two run on two threads rather than
//!   one after the other on one (tokio runs a task woken from a worker
//!   thread next on that thread, in a slot no other worker steals from);
//! - a controller woken from inside a lane whose poll then holds its thread
//!   is taken by another lane, which the [`watchdog`] wakes once that poll
//!   has lasted [`watchdog::STALLED`].
//!
//! So a busy controller holds one lane and one thread, never the others,
//! and controllers with work use every worker thread. When every lane is
//! held all the same (as many busy controllers as threads), the lanes take
//! the controllers whose last poll was short before those whose last poll
//! held its thread ([`RunQueue`]): a chain of quick reconciles runs through in
//! one turn instead of waiting behind a busy controller at every hop.
//!
//! A controller is polled by one lane at a time: a wake-up while it is
//! polled queues it again when the poll ends. Each lane yields to the rest
//! of the program after [`BUDGET`] polls or a [`SLICE`] of time; a loop
//! that has its next turn at once steps aside first ([`yield_turn`]). Every
//! poll is timed, and one that holds its thread longer than the runtime's
//! `long_poll` is reported against its controller ([`RegisteredController::long_poll`]).
//!
//! On a current-thread runtime there is one lane and no watchdog:
//! controllers run one at a time on the one thread, in the order they were
//! woken, and the run is as deterministic as the program around it.

mod watchdog;

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::task::{ArcWake, AtomicWaker, waker_ref};
use parking_lot::Mutex;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::runtime::engine::panic_message;
use crate::runtime::registered::RegisteredController;

/// Polls of controller futures in one poll of a lane before it lets other
/// tasks of the program run.
const BUDGET: usize = 64;

/// How long one poll of a lane goes on polling controller futures before it
/// lets other tasks of the program run, however few polls that was. A
/// tokio worker drives its timers and I/O between the polls of its tasks
/// (every 61st): a lane that ran 64 polls of 20 ms each in one would hold
/// them back for more than a minute. (Every worker held by such polls still
/// holds them back, 61 polls long: the long-poll report names the
/// controllers.)
const SLICE: Duration = Duration::from_millis(1);

/// How long a poll holds its thread before its future counts as slow: the
/// lanes take it after the quick ones, until its next poll is short.
const SLOW: Duration = Duration::from_micros(500);

/// Quick futures a lane takes in a row, at most, while slow ones wait: a
/// slow future waits for at most this many polls of quick ones.
const QUICK_IN_A_ROW: u32 = 16;

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The controllers' futures, the queue of those woken, and the lanes.
pub(super) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    /// Woken futures.
    run_queue: Mutex<RunQueue>,
    /// Futures not finished yet.
    live: AtomicUsize,
    /// The lanes, made at the start (their number is the tokio runtime's).
    lanes: OnceLock<Box<[Lane]>>,
    /// Every future's slot, by its number, for the watchdog to name a
    /// controller whose poll holds its lane.
    slots: Mutex<Vec<Weak<Slot>>>,
    /// A poll longer than this is reported.
    long_poll: Duration,
    /// What the lanes' poll times count from.
    epoch: Instant,
    /// The watchdog's thread, when there is more than one lane.
    watchdog: OnceLock<watchdog::Handle>,
    /// Futures queued from inside a lane so far: the watchdog looks while
    /// this moves.
    inside_pushes: AtomicU64,
    /// Set once the lanes have ended (or the pool is gone): the watchdog ends.
    ended: AtomicBool,
}

/// The woken futures, in the order they were woken, in two queues: those
/// whose last poll was quick, and those whose last poll held its thread
/// ([`SLOW`]). A lane takes the quick ones first, but a slow one after
/// [`QUICK_IN_A_ROW`] quick ones, so none waits long. With one lane every
/// future is quick: which one is slow depends on the wall clock, and the
/// order of a current-thread runtime stays the order of its wake-ups.
#[derive(Default)]
struct RunQueue {
    quick: VecDeque<Arc<Slot>>,
    slow: VecDeque<Arc<Slot>>,
    quick_in_a_row: u32,
}

impl RunQueue {
    fn push_back(&mut self, slot: Arc<Slot>) {
        match slot.slow.load(Ordering::Relaxed) {
            true => self.slow.push_back(slot),
            false => self.quick.push_back(slot),
        }
    }

    /// Puts back a future just taken, to be taken first.
    fn push_front(&mut self, slot: Arc<Slot>) {
        match slot.slow.load(Ordering::Relaxed) {
            true => self.slow.push_front(slot),
            false => self.quick.push_front(slot),
        }
    }

    fn pop(&mut self) -> Option<Arc<Slot>> {
        let quick = !self.quick.is_empty() && (self.slow.is_empty() || self.quick_in_a_row < QUICK_IN_A_ROW);
        match quick {
            true => {
                self.quick_in_a_row += 1;
                self.quick.pop_front()
            }
            false => {
                self.quick_in_a_row = 0;
                self.slow.pop_front()
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.quick.is_empty() && self.slow.is_empty()
    }
}

/// One tokio task polling the queue.
struct Lane {
    state: AtomicU8,
    /// The lane's task, woken to leave `IDLE`.
    waker: AtomicWaker,
    /// When the poll in progress began, in nanoseconds since the pool's
    /// epoch (never zero); zero between polls.
    since: AtomicU64,
    /// The number of the slot being polled.
    slot: AtomicUsize,
}

/// Parked: looks at the queue again only once woken.
const IDLE: u8 = 0;
/// Woken, or polling between two futures: takes the next woken future
/// before it parks.
const ACTIVE: u8 = 1;
/// Inside a future's poll, which may be long.
const BUSY: u8 = 2;

/// One controller's future.
struct Slot {
    future: Mutex<Option<Task>>,
    state: AtomicU8,
    /// Whether its last poll held its thread ([`SLOW`]).
    slow: AtomicBool,
    /// Whose future it is: a long poll is reported against it.
    registered: Arc<RegisteredController>,
    /// Its place in [`Shared::slots`].
    number: usize,
    shared: Weak<Shared>,
}

/// Neither queued nor polled: waits for a wake-up.
const WAITING: u8 = 0;
/// In the queue.
const QUEUED: u8 = 1;
/// Being polled by a lane.
const POLLED: u8 = 2;
/// Being polled, and woken meanwhile: queued again when the poll ends.
const POLLED_WOKEN: u8 = 3;
/// Finished.
const DONE: u8 = 4;

thread_local! {
    /// The pool (its address) and lane this thread is polling a future of, if any.
    static LANE: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

impl ArcWake for Slot {
    fn wake_by_ref(slot: &Arc<Self>) {
        let mut state = slot.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                WAITING => QUEUED,
                POLLED => POLLED_WOKEN,
                _ => return,
            };
            match slot.state.compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        if state == WAITING
            && let Some(shared) = slot.shared.upgrade()
        {
            shared.run_queue.lock().push_back(Arc::clone(slot));
            // The lane polling the waker takes it after its current poll
            // (or, should that poll hold its thread, another lane does:
            // the watchdog sees to it, and looks while such wake-ups come).
            match current_lane(&shared) {
                None => shared.woken_from_outside(),
                Some(_) => shared.woken_from_inside(),
            }
        }
    }
}

/// The lane of `shared` this thread is polling a future of, if any.
fn current_lane(shared: &Arc<Shared>) -> Option<usize> {
    let me = Arc::as_ptr(shared) as usize;
    LANE.get().and_then(|(pool, lane)| (pool == me).then_some(lane))
}

/// Lets every other woken controller go first: the caller is polled again
/// after them. A loop whose next turn is ready at once (a controller woken
/// again while it reconciled, a queue with more items) would otherwise run on
/// inside one poll, where neither the other controllers nor the lane's
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

impl Pool {
    pub(super) fn new(long_poll: Duration) -> Self {
        Pool {
            shared: Arc::new(Shared {
                run_queue: Mutex::default(),
                live: AtomicUsize::new(0),
                lanes: OnceLock::new(),
                slots: Mutex::default(),
                long_poll,
                epoch: Instant::now(),
                watchdog: OnceLock::new(),
                inside_pushes: AtomicU64::new(0),
                ended: AtomicBool::new(false),
            }),
        }
    }

    /// Makes `lanes` lanes (at least one), and with more than one the
    /// watchdog's thread; returns the lanes' tasks, for the caller to spawn.
    /// Each ends once `stop` is cancelled and every future has finished.
    pub(super) fn start(
        &self,
        lanes: usize,
        stop: &CancellationToken,
    ) -> Vec<impl Future<Output = ()> + Send + 'static + use<>> {
        let lanes = lanes.max(1);
        let made = (0..lanes)
            .map(|_| Lane {
                state: AtomicU8::new(ACTIVE),
                waker: AtomicWaker::new(),
                since: AtomicU64::new(0),
                slot: AtomicUsize::new(0),
            })
            .collect();
        if self.shared.lanes.set(made).is_err() {
            return Vec::new();
        }
        if lanes > 1 {
            watchdog::start(&self.shared);
        }
        (0..lanes)
            .map(|lane| {
                let shared = Arc::clone(&self.shared);
                let mut stopped = Box::pin(stop.clone().cancelled_owned());
                // Unconstrained by tokio's cooperative budget, which counts
                // per task and would run out for all controllers at once:
                // the lane keeps its own (`BUDGET`).
                tokio::task::unconstrained(std::future::poll_fn(move |cx| shared.poll_lane(lane, cx, stopped.as_mut())))
            })
            .collect()
    }

    /// Adds `registered`'s future, to be polled at once (once the lanes run).
    pub(super) fn add(&self, registered: Arc<RegisteredController>, future: impl Future<Output = ()> + Send + 'static) {
        let mut slots = self.shared.slots.lock();
        let slot = Arc::new(Slot {
            future: Mutex::new(Some(Box::pin(future))),
            state: AtomicU8::new(WAITING),
            slow: AtomicBool::new(false),
            registered,
            number: slots.len(),
            shared: Arc::downgrade(&self.shared),
        });
        slots.push(Arc::downgrade(&slot));
        drop(slots);
        self.shared.live.fetch_add(1, Ordering::SeqCst);
        ArcWake::wake_by_ref(&slot);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.end();
    }
}

impl Shared {
    fn lanes(&self) -> &[Lane] {
        self.lanes.get().map_or(&[], |lanes| lanes)
    }

    /// Nanoseconds since the epoch, never zero.
    fn now(&self) -> u64 {
        self.nanos(Instant::now())
    }

    /// `instant` in nanoseconds since the epoch, never zero.
    fn nanos(&self, instant: Instant) -> u64 {
        u64::try_from(instant.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX).max(1)
    }

    /// A future was queued from outside every lane: wakes an idle lane
    /// unless one will take it next.
    fn woken_from_outside(&self) {
        let lanes = self.lanes();
        if lanes.iter().any(|lane| lane.state.load(Ordering::SeqCst) == ACTIVE) {
            return;
        }
        self.wake_idle(lanes, None);
    }

    /// Wakes one idle lane other than `except`; returns whether it did.
    fn wake_idle(&self, lanes: &[Lane], except: Option<usize>) -> bool {
        for (index, lane) in lanes.iter().enumerate() {
            if Some(index) == except {
                continue;
            }
            if lane.state.compare_exchange(IDLE, ACTIVE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                lane.waker.wake();
                return true;
            }
        }
        false
    }

    /// A future was queued from inside a lane, which takes it after its
    /// current poll: the watchdog looks while such wake-ups come.
    fn woken_from_inside(&self) {
        self.inside_pushes.fetch_add(1, Ordering::Relaxed);
        if let Some(watchdog) = self.watchdog.get() {
            watchdog.wake();
        }
    }

    /// The lanes have ended, or the pool is gone: so does the watchdog.
    fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        if let Some(watchdog) = self.watchdog.get() {
            watchdog.wake();
        }
    }

    /// One poll of lane `index`: polls woken futures until none is left or
    /// the budget is spent; ends once the runtime stopped and every future
    /// has finished.
    fn poll_lane(
        self: &Arc<Self>,
        index: usize,
        cx: &mut Context<'_>,
        stopped: Pin<&mut WaitForCancellationFutureOwned>,
    ) -> Poll<()> {
        let lanes = self.lanes();
        let lane = &lanes[index];
        lane.waker.register(cx.waker());
        lane.state.store(ACTIVE, Ordering::SeqCst);
        let _inside = Inside::enter(self, index);
        // One lane yields after its budget of polls only: how long they took
        // depends on the wall clock, and a current-thread runtime's order
        // stays the order of its wake-ups.
        let slice = (lanes.len() > 1).then(|| Instant::now() + SLICE);
        for _ in 0..BUDGET {
            let Some((slot, more)) = self.next(lane) else {
                // A live future wakes a lane when the runtime stops (it
                // stops too); with none left, the stop itself must.
                if self.live.load(Ordering::SeqCst) == 0 && stopped.poll(cx).is_ready() {
                    // The other lanes end too.
                    for other in lanes {
                        other.state.store(ACTIVE, Ordering::SeqCst);
                        other.waker.wake();
                    }
                    self.end();
                    return Poll::Ready(());
                }
                return Poll::Pending;
            };
            // More woken futures than this lane takes now: another lane
            // takes the rest, on another thread. This lane's task steps
            // aside first, or the lane it woke would wait behind it.
            let helped = || {
                let others = lanes.iter().enumerate().filter(|(other, _)| *other != index);
                others.into_iter().any(|(_, lane)| lane.state.load(Ordering::SeqCst) == ACTIVE)
            };
            if more && !helped() && self.wake_idle(lanes, Some(index)) {
                self.run_queue.lock().push_front(slot);
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            slot.state.store(POLLED, Ordering::SeqCst);
            lane.slot.store(slot.number, Ordering::Relaxed);
            let started = Instant::now();
            // Read as hints only (by the watchdog, and by wakers asking whether
            // a lane takes the queue next): that no wake-up is lost is the
            // handshake of `IDLE`, in `next`, which stays `SeqCst`.
            lane.since.store(self.nanos(started), Ordering::Relaxed);
            lane.state.store(BUSY, Ordering::Release);
            let ended = self.poll_slot(&slot, started);
            lane.state.store(ACTIVE, Ordering::Release);
            lane.since.store(0, Ordering::Relaxed);
            if slice.is_some_and(|slice| ended >= slice) {
                break;
            }
        }
        // The budget or the slice is spent: let the program's other tasks run, and come back.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Polls one future, timing the poll from `started`, and queues it again
    /// if it was woken meanwhile; returns when the poll ended.
    fn poll_slot(&self, slot: &Arc<Slot>, started: Instant) -> Instant {
        let mut future = slot.future.lock();
        let Some(task) = future.as_mut() else { return Instant::now() };
        let waker = waker_ref(slot);
        let polled =
            std::panic::catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(&mut Context::from_waker(&waker))));
        let ended = Instant::now();
        let held = ended - started;
        if held >= self.long_poll {
            slot.registered.long_poll(held);
        }
        // One lane takes the futures in the order they were woken (see `RunQueue`).
        slot.slow.store(held >= SLOW && self.lanes().len() > 1, Ordering::Relaxed);
        let done = match polled {
            Ok(poll) => poll.is_ready(),
            // The loops catch their panics; this is the last line.
            Err(panic) => {
                tracing::error!(controller = %slot.registered.name, panic = %panic_message(&*panic), "a controller's loop panicked");
                true
            }
        };
        if done {
            *future = None;
            drop(future);
            slot.state.store(DONE, Ordering::SeqCst);
            if self.live.fetch_sub(1, Ordering::SeqCst) == 1 {
                // The last one: the lanes look at the stop.
                for lane in self.lanes() {
                    if lane.state.swap(ACTIVE, Ordering::SeqCst) == IDLE {
                        lane.waker.wake();
                    }
                }
            }
            return ended;
        }
        drop(future);
        if slot.state.compare_exchange(POLLED, WAITING, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            // Woken while polled: to the back of the queue, for this lane
            // (or another) to take.
            slot.state.store(QUEUED, Ordering::SeqCst);
            self.run_queue.lock().push_back(Arc::clone(slot));
        }
        ended
    }

    /// The next woken future, and whether more are left; with none, parks
    /// the lane (so that a later wake-up wakes its task) and looks once more.
    fn next(&self, lane: &Lane) -> Option<(Arc<Slot>, bool)> {
        {
            let mut run_queue = self.run_queue.lock();
            if let Some(slot) = run_queue.pop() {
                return Some((slot, !run_queue.is_empty()));
            }
        }
        // Paired with the wakers' look at the lanes after their push:
        // either this sees the future, or the waker sees this lane idle.
        lane.state.store(IDLE, Ordering::SeqCst);
        let mut run_queue = self.run_queue.lock();
        let slot = run_queue.pop()?;
        // Taken back from idle, unless a waker took it first (and woke the
        // task, which is then polled once more for nothing).
        let _ = lane.state.compare_exchange(IDLE, ACTIVE, Ordering::SeqCst, Ordering::SeqCst);
        Some((slot, !run_queue.is_empty()))
    }
}

/// Marks this thread as polling in a lane, until dropped.
struct Inside(Option<(usize, usize)>);

impl Inside {
    fn enter(shared: &Arc<Shared>, lane: usize) -> Self {
        Inside(LANE.replace(Some((Arc::as_ptr(shared) as usize, lane))))
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        LANE.set(self.0);
    }
}
