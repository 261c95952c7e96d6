//! The pool's watchdog: a thread that looks at the lanes for what they
//! cannot see from inside a poll.
//!
//! - **A stalled lane.** A controller woken from inside a lane is left to
//!   that lane, which takes it once its current poll ends. When that poll
//!   holds its thread instead (a reconcile that wakes another controller and
//!   then computes), and no other lane is awake to take the queue, the
//!   watchdog wakes an idle lane once the poll has lasted [`STALLED`].
//! - **A poll that does not end.** A poll that has held its thread for
//!   [`STILL_HELD`] (or the runtime's `long_poll`, if longer) is reported
//!   while it lasts, once: the report after a poll ends never comes for a
//!   controller stuck in a loop or a blocking call.
//!
//! A stall can only follow a wake-up from inside a lane, so the watchdog
//! looks every [`TICK`] only while such wake-ups come, and rests (parks,
//! looking every [`RESTING_LOOK`]) once [`REST_AFTER`] ticks have passed
//! without one; the first one after wakes it. A thread waking every
//! millisecond costs a program whose cores are all busy a tenth of its
//! speed (the queue transform of `cosi/benches/runtime.rs`: 300 ms against
//! 265 ms on 2 cores), and most such programs (controllers computing, each
//! on its own inputs) wake nothing from inside a lane. Its thread holds the
//! pool weakly and ends with the pool's lanes, or when the pool is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::Thread;
use std::time::Duration;

use super::{ACTIVE, BUSY, IDLE, Shared};

/// How often the watchdog looks while wake-ups come from inside lanes.
const TICK: Duration = Duration::from_millis(1);

/// How long a poll holds its lane before the watchdog has another lane take
/// what waits in the queue.
pub(super) const STALLED: Duration = Duration::from_micros(500);

/// How long a poll holds its thread before it is reported while it lasts.
const STILL_HELD: Duration = Duration::from_secs(1);

/// How often the watchdog looks while it rests: a poll still held is
/// reported at most this long after it has held its thread [`STILL_HELD`].
const RESTING_LOOK: Duration = Duration::from_millis(250);

/// Ticks without a wake-up from inside a lane before the watchdog rests.
const REST_AFTER: u32 = 20;

/// The watchdog as the pool sees it: its thread, and whether it rests.
pub(super) struct Handle {
    thread: Thread,
    resting: AtomicBool,
}

impl Handle {
    /// Wakes the watchdog if it rests: a wake-up came from inside a lane, or
    /// the pool ends.
    pub(super) fn wake(&self) {
        if self.resting.load(Ordering::SeqCst) && self.resting.swap(false, Ordering::SeqCst) {
            self.thread.unpark();
        }
    }
}

/// Starts the watchdog of `shared`'s lanes. A thread that cannot be made
/// (the system's limit) leaves the pool without one, which a log line says:
/// the lanes still run, only a stalled one is not relieved.
pub(super) fn start(shared: &Arc<Shared>) {
    let pool = Arc::downgrade(shared);
    let started = std::thread::Builder::new().name("cosi-watchdog".to_owned()).spawn(move || watch(&pool));
    match started {
        Ok(thread) => {
            let _ = shared.watchdog.set(Handle { thread: thread.thread().clone(), resting: AtomicBool::new(true) });
        }
        Err(error) => tracing::error!(%error, "the runtime could not start its watchdog thread"),
    }
}

fn watch(pool: &Weak<Shared>) {
    let mut quiet = 0;
    let mut resting = true;
    let mut pushes = 0;
    // The poll each lane's last report was about (its start), so that one
    // poll is reported once.
    let mut reported: Vec<u64> = Vec::new();
    loop {
        match resting {
            true => std::thread::park_timeout(RESTING_LOOK),
            false => std::thread::sleep(TICK),
        }
        let Some(shared) = pool.upgrade() else { return };
        if shared.ended.load(Ordering::SeqCst) {
            return;
        }
        // Its handle is set just after the spawn.
        let Some(handle) = shared.watchdog.get() else { continue };
        look(&shared, &mut reported);
        let now = shared.inside_pushes.load(Ordering::SeqCst);
        (quiet, pushes) = match now == pushes {
            true => (quiet + 1, pushes),
            false => (0, now),
        };
        // Woken from its rest (the flag is down): it looks every tick again.
        resting = handle.resting.load(Ordering::SeqCst);
        if resting || quiet < REST_AFTER {
            continue;
        }
        // Rests, unless a wake-up came meanwhile: one that comes after the
        // flag is up unparks the thread, and a park after an unpark returns.
        handle.resting.store(true, Ordering::SeqCst);
        resting = shared.inside_pushes.load(Ordering::SeqCst) == pushes;
        if !resting {
            handle.resting.store(false, Ordering::SeqCst);
        }
    }
}

/// One look at the lanes: reports polls still holding their thread, and
/// wakes an idle lane for what waits behind a stalled one.
fn look(shared: &Shared, reported: &mut Vec<u64>) {
    let lanes = shared.lanes();
    reported.resize(lanes.len(), 0);
    let now = shared.now();
    let (mut awake, mut stalled, mut idle) = (false, false, false);
    for (lane, last) in lanes.iter().zip(reported.iter_mut()) {
        match lane.state.load(Ordering::SeqCst) {
            IDLE => idle = true,
            ACTIVE => awake = true,
            BUSY => {
                let since = lane.since.load(Ordering::SeqCst);
                if since == 0 {
                    continue;
                }
                let held = Duration::from_nanos(now.saturating_sub(since));
                stalled |= held >= STALLED;
                if held >= STILL_HELD.max(shared.long_poll) && *last != since {
                    *last = since;
                    report(shared, lane.slot.load(Ordering::Relaxed), held);
                }
            }
            _ => (),
        }
    }
    if stalled && !awake && idle && !shared.run_queue.lock().is_empty() {
        shared.wake_idle(lanes, None);
    }
}

/// Reports a poll of the slot numbered `slot` that has held its thread for
/// `held` and still does.
fn report(shared: &Shared, slot: usize, held: Duration) {
    let Some(slot) = shared.slots.lock().get(slot).and_then(Weak::upgrade) else { return };
    tracing::warn!(
        controller = %slot.registered.name,
        ?held,
        "a controller has held its thread for {held:?} without awaiting, and still does; \
         move CPU-heavy or blocking work to spawn_blocking"
    );
}
