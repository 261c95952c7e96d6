//! What the runtime keeps per registered controller, shared by its loop, the
//! event router and its host: the current inputs, the reconcile trigger, the
//! queue and the statistics. It points to nothing of the runtime's above it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::controller::{Declaration, Input};
use crate::resource::Pointer;
use crate::runtime::queue::Queue;
use crate::runtime::settle::WorkEpoch;
use crate::state::State;

/// The longest wait the runtime schedules. A longer delay (a requeue or a
/// retry of `Duration::MAX`, meaning "not again", or one computed from a
/// spec) waits this long instead: a clock plus it cannot overflow.
const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// When a wait of `delay` from now ends.
pub(crate) fn deadline(delay: Duration) -> tokio::time::Instant {
    tokio::time::Instant::now() + delay.min(LONGEST_WAIT)
}

pub(crate) struct RegisteredController {
    pub(crate) name: Arc<str>,
    pub(crate) declaration: &'static Declaration,
    pub(crate) state: Arc<dyn State>,
    pub(crate) stats: Stats,
    /// Set for queue controllers.
    pub(crate) queue: Option<Queue>,
    inputs: RwLock<Arc<[Input]>>,
    /// Held from a change of `inputs` to the end of its reroute, so that two
    /// workers changing them at once leave the routes matching the inputs.
    pub(crate) rerouting: Mutex<()>,
    /// One stored wake-up: many changes while the controller is busy make
    /// one more reconcile, never none.
    wake: Notify,
    wake_pending: AtomicBool,
    /// Whether a reconcile runs; set before the wake-up it consumes is
    /// cleared, so that work is never out of sight of `settled`.
    busy: AtomicBool,
    /// Whether a reconcile controller waits out a failure's backoff: a
    /// wake-up meanwhile is pending but not due, and `settled` does not wait
    /// for a retry that may fail forever.
    backing_off: AtomicBool,
    /// What caused the pending wake-up, for the reconcile's span.
    trigger: Mutex<Option<Trigger>>,
    epoch: Arc<WorkEpoch>,
}

/// What woke a controller: the first cause since its last reconcile.
#[derive(Clone, Debug)]
pub(crate) enum Trigger {
    /// The first reconcile.
    Start,
    /// A change of this input resource.
    Input(Pointer),
    /// Its inputs changed, or the runtime's watch of a kind started over.
    Resync,
    /// The controller asked for it, or its requeue delay passed.
    Requeue,
    /// A restart after a failure.
    Restart,
    /// A [`Waker`](crate::controller::Waker): something outside the state.
    External,
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trigger::Start => f.write_str("start"),
            Trigger::Input(pointer) => write!(f, "input {pointer}"),
            Trigger::Resync => f.write_str("resync"),
            Trigger::Requeue => f.write_str("requeue"),
            Trigger::Restart => f.write_str("restart"),
            Trigger::External => f.write_str("external"),
        }
    }
}

impl RegisteredController {
    pub(crate) fn new(
        name: Arc<str>,
        declaration: &'static Declaration,
        inputs: Vec<Input>,
        state: Arc<dyn State>,
        epoch: Arc<WorkEpoch>,
    ) -> Arc<Self> {
        let queue = declaration.concurrency.map(|_| Queue::new(Arc::clone(&epoch)));
        Arc::new(RegisteredController {
            stats: Stats::new(&name),
            name,
            declaration,
            state,
            queue,
            inputs: RwLock::new(inputs.into()),
            rerouting: Mutex::new(()),
            wake: Notify::new(),
            wake_pending: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            backing_off: AtomicBool::new(false),
            trigger: Mutex::new(None),
            epoch,
        })
    }

    pub(crate) fn inputs(&self) -> Arc<[Input]> {
        Arc::clone(&self.inputs.read())
    }

    /// Replaces the inputs; `false` when they were these already.
    pub(crate) fn set_inputs(&self, inputs: &Arc<[Input]>) -> bool {
        let mut current = self.inputs.write();
        if *current == *inputs {
            return false;
        }
        *current = Arc::clone(inputs);
        true
    }

    /// Asks for a reconcile; coalesces with any not yet started. `trigger`
    /// is only evaluated when this call is the one that wakes the controller.
    /// Returns whether it did.
    pub(crate) fn wake(&self, trigger: impl FnOnce() -> Trigger) -> bool {
        if self.wake_pending.swap(true, Ordering::SeqCst) {
            return false;
        }
        *self.trigger.lock() = Some(trigger());
        self.stats.wakeups.fetch_add(1, Ordering::Relaxed);
        self.wake.notify_one();
        self.epoch.bump();
        true
    }

    /// Waits for a wake-up and consumes it; returns its trigger. The
    /// controller counts as busy from here until [`finished`](RegisteredController::finished).
    pub(crate) async fn woken(&self) -> Trigger {
        self.wake.notified().await;
        self.busy.store(true, Ordering::SeqCst);
        let trigger = self.trigger.lock().take();
        self.wake_pending.store(false, Ordering::SeqCst);
        self.epoch.bump();
        trigger.unwrap_or(Trigger::Requeue)
    }

    /// Whether a wake-up is pending: the next reconcile may start at once.
    pub(crate) fn is_woken(&self) -> bool {
        self.wake_pending.load(Ordering::SeqCst)
    }

    /// A reconcile starts without a wake-up (its requeue delay passed).
    pub(crate) fn begin(&self) {
        self.busy.store(true, Ordering::SeqCst);
        self.epoch.bump();
    }

    /// The reconcile failed and the controller waits `delay` before it runs
    /// again; a wake-up meanwhile waits too.
    pub(crate) async fn back_off(&self, delay: Duration) {
        self.backing_off.store(true, Ordering::SeqCst);
        self.finished();
        tokio::time::sleep(delay).await;
        self.backing_off.store(false, Ordering::SeqCst);
    }

    /// The reconcile is over, its writes made.
    pub(crate) fn finished(&self) {
        self.busy.store(false, Ordering::SeqCst);
        self.epoch.bump();
    }

    /// Whether the controller has nothing to do now: no pending wake-up, no
    /// reconcile running, and (queue controllers) no item due or in progress.
    /// Work scheduled for later (a requeue delay, a retry in backoff) does not count.
    pub(crate) fn is_quiet(&self, now: tokio::time::Instant) -> bool {
        // The wake-up first: `woken` sets `busy` before it clears the wake-up,
        // so a reconcile starting between the two reads is seen in the second.
        (!self.wake_pending.load(Ordering::SeqCst) || self.backing_off.load(Ordering::SeqCst))
            && !self.busy.load(Ordering::SeqCst)
            && self.queue.as_ref().is_none_or(|queue| queue.is_idle(now))
    }

    /// One poll of the controller held its thread for `held`, more than the
    /// runtime's `long_poll`.
    pub(crate) fn long_poll(&self, held: Duration) {
        tracing::warn!(
            controller = %self.name,
            ?held,
            "a controller held its thread for {held:?} without awaiting; move CPU-heavy or blocking work to spawn_blocking"
        );
        self.stats.record_long_poll(held);
    }
}

/// The statistics of one controller, kept as atomics and mirrored to the
/// `metrics` facade.
pub(crate) struct Stats {
    pub(crate) wakeups: AtomicU64,
    pub(crate) external_wakeups: AtomicU64,
    pub(crate) reconciles: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) restarts: AtomicU64,
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) busy_nanos: AtomicU64,
    pub(crate) long_polls: AtomicU64,
    pub(crate) longest_poll_nanos: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
    /// When a failed controller (or item) is retried next; `None` while healthy.
    pub(crate) next_retry: Mutex<Option<SystemTime>>,
    /// Whether the published status is behind.
    pub(crate) dirty: AtomicBool,
    failing: AtomicBool,
    metrics: Metrics,
}

struct Metrics {
    reconciles: metrics::Counter,
    errors: metrics::Counter,
    restarts: metrics::Counter,
    busy: metrics::Histogram,
    queue_depth: metrics::Gauge,
    long_polls: metrics::Counter,
}

impl Stats {
    fn new(name: &str) -> Self {
        let label = || [("controller", name.to_owned())];
        Stats {
            wakeups: AtomicU64::new(0),
            external_wakeups: AtomicU64::new(0),
            reconciles: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            busy_nanos: AtomicU64::new(0),
            long_polls: AtomicU64::new(0),
            longest_poll_nanos: AtomicU64::new(0),
            last_error: Mutex::new(None),
            next_retry: Mutex::new(None),
            dirty: AtomicBool::new(true),
            failing: AtomicBool::new(false),
            metrics: Metrics {
                reconciles: metrics::counter!("cosi_controller_reconciles_total", &label()),
                errors: metrics::counter!("cosi_controller_errors_total", &label()),
                restarts: metrics::counter!("cosi_controller_restarts_total", &label()),
                busy: metrics::histogram!("cosi_controller_busy_seconds", &label()),
                queue_depth: metrics::gauge!("cosi_controller_queue_depth", &label()),
                long_polls: metrics::counter!("cosi_controller_long_polls_total", &label()),
            },
        }
    }

    pub(crate) fn count_read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_write(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_success(&self, busy: Duration) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        self.busy_nanos.fetch_add(u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.metrics.reconciles.increment(1);
        self.metrics.busy.record(busy.as_secs_f64());
        self.failing.store(false, Ordering::Relaxed);
        *self.next_retry.lock() = None;
        self.dirty.store(true, Ordering::Release);
    }

    pub(crate) fn record_long_poll(&self, held: Duration) {
        self.long_polls.fetch_add(1, Ordering::Relaxed);
        self.longest_poll_nanos.fetch_max(u64::try_from(held.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.metrics.long_polls.increment(1);
        self.dirty.store(true, Ordering::Release);
    }

    /// Whether the last reconcile succeeded.
    pub(crate) fn healthy(&self) -> bool {
        !self.failing.load(Ordering::Relaxed)
    }

    /// A failed reconcile; `retry` is the wait before the next try, `None`
    /// for a controller that stopped for good.
    pub(crate) fn record_failure(&self, busy: Duration, error: String, retry: Option<Duration>) {
        self.record_success(busy);
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.metrics.errors.increment(1);
        if retry.is_some() {
            self.restarts.fetch_add(1, Ordering::Relaxed);
            self.metrics.restarts.increment(1);
        }
        *self.next_retry.lock() = retry.map(|retry| SystemTime::now() + retry.min(LONGEST_WAIT));
        *self.last_error.lock() = Some(error);
        self.failing.store(true, Ordering::Relaxed);
    }

    pub(crate) fn set_queue_depth(&self, depth: usize) {
        self.metrics.queue_depth.set(depth as f64);
    }

    pub(crate) fn snapshot(&self, queue: Option<&Queue>) -> ControllerStats {
        let (queue_depth, backing_off) = queue.map_or((0, 0), |queue| (queue.len(), queue.backing_off()));
        ControllerStats {
            wakeups: self.wakeups.load(Ordering::Relaxed),
            external_wakeups: self.external_wakeups.load(Ordering::Relaxed),
            reconciles: self.reconciles.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            restarts: self.restarts.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.busy_nanos.load(Ordering::Relaxed)),
            long_polls: self.long_polls.load(Ordering::Relaxed),
            longest_poll: Duration::from_nanos(self.longest_poll_nanos.load(Ordering::Relaxed)),
            queue_depth,
            backing_off,
            last_error: self.last_error.lock().clone(),
            next_retry: *self.next_retry.lock(),
        }
    }
}

/// What the runtime counted for one controller: [`Runtime::stats`](crate::RuntimeHandle::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControllerStats {
    /// Wake-ups that led to a reconcile (coalesced ones count once).
    pub wakeups: u64,
    /// The wake-ups of those that came from a [`Waker`](crate::controller::Waker)
    /// (queue controllers: each `wake` and `wake_item`).
    pub external_wakeups: u64,
    /// Reconciles run (queue controllers: items and mappings processed).
    pub reconciles: u64,
    /// Reconciles that failed or panicked.
    pub errors: u64,
    /// Restarts after a failure (queue controllers: items retried after a failure).
    pub restarts: u64,
    /// Reads through the controller's context.
    pub reads: u64,
    /// Writes through the controller's context.
    pub writes: u64,
    /// Time spent reconciling.
    pub busy: Duration,
    /// Polls that held their thread longer than the runtime's
    /// [`long_poll`](crate::runtime::RuntimeOptions::long_poll).
    pub long_polls: u64,
    /// The longest of those, or zero.
    pub longest_poll: Duration,
    /// Items waiting (queue controllers).
    pub queue_depth: usize,
    /// Items of those waiting out a backoff after a failure (queue controllers).
    pub backing_off: usize,
    /// The last failure's message, if any.
    pub last_error: Option<String>,
    /// When the failing controller (or, for queue controllers, the last
    /// failed item) is retried next; `None` while healthy, and for a
    /// controller whose task stopped.
    pub next_retry: Option<SystemTime>,
}
