//! What the runtime writes about itself: the `meta` namespace with the
//! definition of every resource type it knows, and one `ControllerStatus`
//! per controller.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use crate::backoff::Backoff;
use crate::resource::Pointer;
use crate::runtime::GraphController;
use crate::runtime::engine::Engine;
use crate::runtime::status::{ControllerStatus, RUNTIME_OWNER};
use crate::state::{Error, META_DESCRIPTION, META_NAMESPACE, Registry, StateExt, UpdateOptions};

impl Engine {
    /// Publishes the definitions not yet published, in the background; the
    /// work counts for `settled`.
    pub(super) fn publish_definitions(self: &Arc<Self>) {
        let in_flight = self.wiring.epoch.begin();
        let engine = Arc::clone(self);
        self.wiring.tasks.spawn(async move {
            let _in_flight = in_flight;
            engine.publish().await;
        });
    }

    /// Writes the `meta` namespace and each unpublished definition, retrying
    /// while the state is unreachable; a definition the state refuses is
    /// logged and left out.
    async fn publish(&self) {
        let definitions = self.registry.take_unpublished();
        if definitions.is_empty() {
            return;
        }
        let registry = Registry::new(&*self.wiring.state);
        let mut backoff = Backoff::new(self.wiring.options.backoff);
        let mut definitions = definitions.into_iter().map(Some).collect::<Vec<_>>();
        definitions.insert(0, None);
        for definition in definitions {
            loop {
                let written = match &definition {
                    None => registry.register_namespace(META_NAMESPACE, META_DESCRIPTION).await,
                    Some(definition) => registry.register_definition(definition.clone()).await,
                };
                let error = match written {
                    Ok(()) => break,
                    Err(error) => error,
                };
                let what = definition.as_ref().map_or(META_NAMESPACE, |definition| definition.r#type.as_str());
                if !matches!(error, Error::Backend(_)) {
                    tracing::warn!(%error, what, "runtime could not publish a resource definition");
                    break;
                }
                tracing::warn!(%error, what, "runtime could not publish a resource definition; retrying");
                if !self.wiring.tasks.pause(backoff.next_delay()).await {
                    return;
                }
            }
        }
    }

    /// Writes the status of every controller whose statistics changed, at
    /// most once per interval, and once more at shutdown.
    pub(super) async fn publish_statuses(self: Arc<Self>, namespace: String) {
        loop {
            self.write_statuses(&namespace).await;
            if !self.wiring.tasks.pause(self.wiring.options.status_interval).await {
                break;
            }
        }
        self.write_statuses(&namespace).await;
    }

    async fn write_statuses(&self, namespace: &str) {
        for registered in self.registry.controllers() {
            if !registered.stats.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            let stats = registered.stats.snapshot(registered.queue.as_ref());
            let graph = GraphController::new(&registered.name, registered.declaration, &registered.inputs());
            let pointer = Pointer::new(namespace, <ControllerStatus as crate::Resource>::TYPE, &*registered.name);
            let healthy = registered.stats.healthy();
            let written = self
                .wiring
                .state
                .modify::<ControllerStatus>(&pointer, UpdateOptions::owner(RUNTIME_OWNER), |status| {
                    status.inputs.clone_from(&graph.inputs);
                    status.outputs.clone_from(&graph.outputs);
                    status.concurrency = registered.declaration.concurrency;
                    status.reconciles = stats.reconciles;
                    status.errors = stats.errors;
                    status.restarts = stats.restarts;
                    status.last_error.clone_from(&stats.last_error);
                    status.next_retry_ms = stats.next_retry.and_then(unix_millis);
                    status.healthy = healthy;
                    status.long_polls = stats.long_polls;
                    status.longest_poll_ms = (stats.long_polls > 0)
                        .then(|| u64::try_from(stats.longest_poll.as_millis()).unwrap_or(u64::MAX));
                })
                .await;
            if let Err(error) = written {
                tracing::warn!(controller = %registered.name, %error, "runtime could not publish a controller status");
                registered.stats.dirty.store(true, Ordering::Release);
            }
        }
    }
}

/// Milliseconds since the Unix epoch, for a time after it.
fn unix_millis(time: SystemTime) -> Option<u64> {
    let since = time.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}
