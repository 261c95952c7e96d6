//! A reconcile controller's loop: reconcile when woken, restart with backoff
//! after a failure or a panic.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::controller::{ErasedReconcile, Outcome, Requeue, RequeueError};
use crate::runtime::core::{Core, Trigger};
use crate::runtime::engine::{Engine, panic_message, watch as kind_watch};
use crate::runtime::settle::InFlight;

impl Engine {
    pub(super) async fn run_reconciler(
        self: Arc<Self>,
        core: Arc<Core>,
        mut controller: Box<dyn ErasedReconcile>,
        ready: Vec<kind_watch::Ready>,
        starting: InFlight,
    ) {
        if self.cancel.run_until_cancelled(kind_watch::ready(ready)).await.is_none() {
            return;
        }
        core.wake(|| Trigger::Start);
        drop(starting);
        let mut backoff = Backoff::new(self.options.backoff);
        let mut requeue_at: Option<Instant> = None;
        loop {
            let woken = async {
                let Some(at) = requeue_at else { return core.woken().await };
                // Biased (either branch starts the next reconcile), so that a
                // seeded current-thread runtime picks the same one every run.
                tokio::select! {
                    biased;
                    trigger = core.woken() => trigger,
                    () = tokio::time::sleep_until(at) => {
                        core.begin();
                        Trigger::Requeue
                    }
                }
            };
            let Some(trigger) = self.cancel.run_until_cancelled(woken).await else { return };
            requeue_at = None;
            let span = tracing::info_span!("reconcile", controller = %core.name, %trigger);
            let started = Instant::now();
            let reconcile = AssertUnwindSafe(controller.reconcile()).catch_unwind().instrument(span);
            let Some(outcome) = self.cancel.run_until_cancelled(reconcile).await else { return };
            let busy = started.elapsed();
            let delay = match read_outcome(outcome) {
                Ok(requeue) => {
                    core.stats.record_success(busy);
                    backoff.reset();
                    if let Requeue::After(after) = requeue {
                        requeue_at = Some(Instant::now() + after);
                    }
                    core.finished();
                    continue;
                }
                Err((message, explicit)) => {
                    let delay = explicit.unwrap_or_else(|| backoff.next_delay());
                    tracing::error!(controller = %core.name, error = %message, ?delay, "reconcile failed; restarting");
                    core.stats.record_failure(busy, message, Some(delay));
                    // A controller waiting out its backoff has nothing pending:
                    // `settled` does not wait for a retry that may fail forever.
                    core.finished();
                    delay
                }
            };
            if !self.pause(delay).await {
                return;
            }
            core.wake(|| Trigger::Restart);
        }
    }
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
