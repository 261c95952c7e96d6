//! A queue controller: its primary inputs listed once watched, then
//! `concurrency` workers over its queue, each item with its own backoff, each
//! a future of the pool (so they run in parallel on as many lanes).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::controller::{ErasedQueue, Outcome, Requeue};
use crate::resource::Kind;
use crate::runtime::engine::reconciler::read_outcome;
use crate::runtime::engine::wiring::Launch;
use crate::runtime::engine::{Wiring, pool, reads, watch as kind_watch};
use crate::runtime::queue::{Item, Job, Key};
use crate::runtime::registered::{RegisteredController, deadline};

/// Items a worker takes one after the other before it lets the other
/// controllers go first.
const ITEMS_PER_TURN: u32 = 32;

impl Wiring {
    pub(super) async fn run_queue(self: Arc<Self>, launch: Launch, controller: Arc<dyn ErasedQueue>) {
        let Launch { registered, established, starting } = launch;
        if self.tasks.token().run_until_cancelled(kind_watch::all_established(established)).await.is_none() {
            return;
        }
        for _ in 0..registered.declaration.concurrency.unwrap_or(1).max(1) {
            let wiring = Arc::clone(&self);
            let (worker, controller) = (Arc::clone(&registered), Arc::clone(&controller));
            self.tasks.drive(&registered, async move { wiring.run_worker(worker, controller).await });
        }
        let (wiring, hooked, hook) = (Arc::clone(&self), Arc::clone(&registered), Arc::clone(&controller));
        self.tasks.drive(&registered, async move { wiring.run_start_hook(hooked, hook).await });
        let kinds: Vec<Kind> = registered.inputs().iter().map(|input| input.kind.clone()).collect();
        for kind in kinds {
            self.resync(&kind, Some(&registered)).await;
        }
        drop(starting);
    }

    /// Runs the controller's start hook until it succeeds, again after a
    /// backoff each time it fails or panics.
    async fn run_start_hook(self: Arc<Self>, registered: Arc<RegisteredController>, controller: Arc<dyn ErasedQueue>) {
        let mut backoff = Backoff::new(self.options.backoff);
        loop {
            let started = Instant::now();
            let outcome = AssertUnwindSafe(controller.on_start()).catch_unwind();
            let Some(outcome) = self.tasks.token().run_until_cancelled(outcome).await else { return };
            let (message, explicit) = match read_outcome(outcome) {
                Ok(_) => return,
                Err(failure) => failure,
            };
            let delay = explicit.unwrap_or_else(|| backoff.next_delay());
            tracing::warn!(controller = %registered.name, error = %message, ?delay, "start hook failed; retrying");
            registered.stats.record_failure(started.elapsed(), message, Some(delay));
            if !self.tasks.pause(delay).await {
                return;
            }
        }
    }

    async fn run_worker(self: Arc<Self>, registered: Arc<RegisteredController>, controller: Arc<dyn ErasedQueue>) {
        // One wait for the stop around the whole loop, as a reconciler's.
        let cancel = self.tasks.token().clone();
        cancel.run_until_cancelled(self.work(registered, controller)).await;
    }

    async fn work(&self, registered: Arc<RegisteredController>, controller: Arc<dyn ErasedQueue>) {
        let Some(queue) = &registered.queue else { return };
        let mut items: u32 = 0;
        loop {
            // A queue that holds many items hands the next out at once: after
            // a few, the other controllers get their turn.
            items = items.wrapping_add(1);
            if items.is_multiple_of(ITEMS_PER_TURN) {
                pool::yield_turn().await;
            }
            let item = queue.next().await;
            registered.stats.set_queue_depth(queue.len());
            if !reads(&registered.inputs(), &item.key) {
                queue.forget_backoff(&item.key);
                queue.release(item, None);
                continue;
            }
            let span = tracing::info_span!(
                "reconcile",
                controller = %registered.name,
                item = %item.key.pointer,
                job = ?item.key.job,
            );
            let started = Instant::now();
            let outcome =
                AssertUnwindSafe(self.process(&registered, &*controller, &item)).catch_unwind().instrument(span).await;
            let busy = started.elapsed();
            let requeue = match read_outcome(outcome) {
                Ok(requeue) => {
                    registered.stats.record_success(busy);
                    queue.forget_backoff(&item.key);
                    match requeue {
                        Requeue::Never => None,
                        Requeue::After(after) => Some(deadline(after)),
                    }
                }
                Err((message, explicit)) => {
                    let delay = explicit.unwrap_or_else(|| queue.next_backoff(&item.key, self.options.backoff));
                    tracing::warn!(controller = %registered.name, item = %item.key.pointer, error = %message, ?delay, "item failed; retrying");
                    registered.stats.record_failure(busy, message, Some(delay));
                    Some(deadline(delay))
                }
            };
            queue.release(item, requeue);
            registered.stats.set_queue_depth(queue.len());
        }
    }

    /// Runs one queue item: a reconcile, or a mapping whose results are queued.
    async fn process(&self, registered: &RegisteredController, controller: &dyn ErasedQueue, item: &Item) -> Outcome {
        match item.key.job {
            Job::Reconcile => controller.reconcile(&item.key.pointer).await,
            Job::Map => {
                let Some(input) = &item.value else { return Outcome::Done(Requeue::Never) };
                let mapped = match controller.map(input).await {
                    Ok(mapped) => mapped,
                    Err(error) => return Outcome::Failed(error),
                };
                let Some(queue) = &registered.queue else { return Outcome::Done(Requeue::Never) };
                let inputs = registered.inputs();
                for pointer in mapped {
                    let key = Key { pointer, job: Job::Reconcile };
                    if !reads(&inputs, &key) {
                        return Outcome::Failed(
                            format!(
                                "controller `{}` mapped {} to {}, which is not of a primary input",
                                registered.name, input.pointer, key.pointer
                            )
                            .into(),
                        );
                    }
                    queue.put(key, None);
                }
                Outcome::Done(Requeue::Never)
            }
        }
    }
}
