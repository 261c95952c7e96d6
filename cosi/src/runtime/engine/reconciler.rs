//! A reconcile controller's loop: reconcile when woken, restart with backoff
//! after a failure or a panic.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::controller::{ErasedReconcile, Outcome, Requeue, RequeueError};
use crate::runtime::engine::wiring::Launch;
use crate::runtime::engine::{Wiring, panic_message, pool, watch as kind_watch};
use crate::runtime::registered::{Trigger, deadline};

impl Wiring {
    pub(super) async fn run_reconciler(self: Arc<Self>, launch: Launch, controller: Box<dyn ErasedReconcile>) {
        // One wait for the stop around the whole loop: wrapping each wait of
        // each reconcile would register with the token twice a reconcile.
        let cancel = self.tasks.token().clone();
        cancel.run_until_cancelled(self.reconcile_loop(launch, controller)).await;
    }

    async fn reconcile_loop(&self, launch: Launch, mut controller: Box<dyn ErasedReconcile>) {
        let Launch { registered, established, starting } = launch;
        kind_watch::all_established(established).await;
        registered.wake(|| Trigger::Start);
        drop(starting);
        let mut backoff = Backoff::new(self.options.backoff);
        let mut requeue_at: Option<Instant> = None;
        loop {
            let trigger = match requeue_at.take() {
                None => registered.woken().await,
                // Biased: a wake-up and a passed delay are one reconcile either
                // way, and a fixed order keeps a run on simulated time replayable.
                Some(at) => tokio::select! {
                    biased;
                    trigger = registered.woken() => trigger,
                    () = tokio::time::sleep_until(at) => {
                        registered.begin();
                        Trigger::Requeue
                    }
                },
            };
            let span = tracing::info_span!("reconcile", controller = %registered.name, %trigger);
            let started = Instant::now();
            // A reconcile that panics before it returns its future restarts
            // like one that panics in it.
            let outcome = match start(&mut *controller) {
                Ok(reconcile) => AssertUnwindSafe(reconcile).catch_unwind().instrument(span).await,
                Err(panic) => Err(panic),
            };
            let busy = started.elapsed();
            let delay = match read_outcome(outcome) {
                Ok(requeue) => {
                    registered.stats.record_success(busy);
                    backoff.reset();
                    if let Requeue::After(after) = requeue {
                        requeue_at = Some(deadline(after));
                    }
                    registered.finished();
                    if registered.is_woken() {
                        pool::yield_turn().await;
                    }
                    continue;
                }
                Err((message, explicit)) => {
                    let delay = explicit.unwrap_or_else(|| backoff.next_delay());
                    tracing::error!(controller = %registered.name, error = %message, ?delay, "reconcile failed; restarting");
                    registered.stats.record_failure(busy, message, Some(delay));
                    delay
                }
            };
            registered.back_off(delay).await;
            registered.wake(|| Trigger::Restart);
        }
    }
}

/// Calls the reconcile, catching a panic before it returns its future.
fn start(controller: &mut dyn ErasedReconcile) -> std::thread::Result<BoxFuture<'_, Outcome>> {
    std::panic::catch_unwind(AssertUnwindSafe(move || {
        let controller = controller;
        controller.reconcile()
    }))
}

/// Reads a reconcile's result: a requeue, or a failure's message and the
/// delay a [`RequeueError`] asks for.
pub(super) fn read_outcome(outcome: std::thread::Result<Outcome>) -> Result<Requeue, (String, Option<Duration>)> {
    match outcome {
        Ok(Outcome::Done(requeue)) => Ok(requeue),
        Ok(Outcome::Failed(error)) => {
            let explicit = error.downcast_ref::<RequeueError>().map(RequeueError::after);
            Err((error.to_string(), explicit))
        }
        Err(panic) => Err((format!("panicked: {}", panic_message(&*panic)), None)),
    }
}
