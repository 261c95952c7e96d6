//! Routes from resource kinds to the controllers that read them, and the one
//! dispatch of a change to what it asks of each reader: a wake-up for a
//! reconcile controller, an item for a queue controller. Live changes
//! ([`Router::route`], from a kind's observer or its watch task) and
//! resynchronisations ([`Wiring::resync`]) both go through [`action`].

use std::sync::Arc;

use parking_lot::RwLock;
// Looked up for every event.
use rustc_hash::FxHashMap as HashMap;

use crate::backoff::Backoff;
use crate::controller::{Input, InputKind, ReducedMetadata};
use crate::resource::{DynamicResource, Kind, Phase};
use crate::runtime::engine::{Wiring, watch};
use crate::runtime::queue::{Job, Key};
use crate::runtime::registered::{RegisteredController, Trigger};
use crate::state::{Event, ListOptions};

/// The controllers reading each kind. Shared with the state's observers,
/// which route each change inside the write: nothing under its lock may
/// call the state.
#[derive(Default)]
pub(super) struct Router {
    routes: RwLock<HashMap<Kind, Vec<Route>>>,
}

/// One controller reading one input kind.
struct Route {
    registered: Arc<RegisteredController>,
    input: Input,
}

/// What a change of a resource asks of one reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Wake the reconcile controller.
    Wake,
    /// Queue the resource for the queue controller, as this job.
    Queue(Job),
}

/// What a change of `resource` asks of the controller reading it as `input`;
/// `None` when the input does not cover it, or the change does not count for
/// its kind (a destroy-ready input counts only a resource tearing down with
/// no finalizers left).
fn action(input: &Input, resource: &DynamicResource) -> Option<Action> {
    let metadata = resource.metadata();
    if !input.covers(metadata.id()) {
        return None;
    }
    let destroy_ready = metadata.phase() == Phase::TearingDown && metadata.finalizers().is_empty();
    match input.dependency {
        InputKind::Weak | InputKind::Strong => Some(Action::Wake),
        InputKind::DestroyReady if destroy_ready => Some(Action::Wake),
        InputKind::Primary => Some(Action::Queue(Job::Reconcile)),
        InputKind::Mapped => Some(Action::Queue(Job::Map)),
        InputKind::MappedDestroyReady if destroy_ready => Some(Action::Queue(Job::Map)),
        InputKind::DestroyReady | InputKind::MappedDestroyReady => None,
    }
}

/// Carries out `action` on `registered` for `resource`.
fn deliver(
    registered: &RegisteredController,
    action: Action,
    resource: &DynamicResource,
    trigger: impl FnOnce() -> Trigger,
) {
    match (action, &registered.queue) {
        (Action::Wake, _) => {
            registered.wake(trigger);
        }
        (Action::Queue(job), Some(queue)) => {
            let value = (job == Job::Map).then(|| ReducedMetadata::of(resource));
            queue.put(Key { pointer: resource.metadata().pointer().clone(), job }, value);
        }
        // Queue input kinds belong to queue controllers (the declaration's rules).
        (Action::Queue(_), None) => (),
    }
}

/// Whether a queue controller with `inputs` still reads the item `key`: a
/// reconcile of a primary input's type (as a mapping may name it), or a
/// mapping of a resource its mapped inputs cover.
pub(crate) fn reads(inputs: &[Input], key: &Key) -> bool {
    inputs.iter().any(|input| match key.job {
        Job::Reconcile => input.dependency == InputKind::Primary && input.is_of_kind(&key.pointer),
        Job::Map => {
            matches!(input.dependency, InputKind::Mapped | InputKind::MappedDestroyReady) && input.reads(&key.pointer)
        }
    })
}

impl Router {
    /// Routes `registered`'s `inputs`.
    pub(super) fn add(&self, registered: &Arc<RegisteredController>, inputs: &[Input]) {
        let mut routes = self.routes.write();
        for input in inputs {
            routes
                .entry(input.kind.clone())
                .or_default()
                .push(Route { registered: Arc::clone(registered), input: input.clone() });
        }
    }

    /// Routes `registered`'s `inputs` instead of the ones it had.
    pub(super) fn replace(&self, registered: &Arc<RegisteredController>, inputs: &[Input]) {
        let mut routes = self.routes.write();
        for list in routes.values_mut() {
            list.retain(|route| !Arc::ptr_eq(&route.registered, registered));
        }
        routes.retain(|_, list| !list.is_empty());
        for input in inputs {
            routes
                .entry(input.kind.clone())
                .or_default()
                .push(Route { registered: Arc::clone(registered), input: input.clone() });
        }
    }

    /// The kinds some controller reads.
    pub(super) fn kinds(&self) -> Vec<Kind> {
        self.routes.read().keys().cloned().collect()
    }

    /// Whether some controller reads `kind`.
    pub(super) fn is_read(&self, kind: &Kind) -> bool {
        self.routes.read().contains_key(kind)
    }

    /// Delivers one change to the controllers that read its kind.
    pub(super) fn route(&self, kind: &Kind, resource: &DynamicResource) {
        let routes = self.routes.read();
        let Some(routes) = routes.get(kind) else { return };
        for route in routes {
            if let Some(action) = action(&route.input, resource) {
                deliver(&route.registered, action, resource, || Trigger::Input(resource.metadata().pointer().clone()));
            }
        }
    }

    /// Routes the resource of `event`; a destruction whose last state is
    /// unknown, as its tombstone.
    pub(super) fn route_event(&self, kind: &Kind, event: &Event) {
        match event {
            Event::Destroyed { pointer, resource: None, .. } => self.route(kind, &DynamicResource::tombstone(pointer)),
            _ => {
                if let Some(resource) = event.resource() {
                    self.route(kind, resource);
                }
            }
        }
    }

    /// The readers of `kind` (or only `only`), with the input they read it as.
    fn readers(
        &self,
        kind: &Kind,
        only: Option<&Arc<RegisteredController>>,
    ) -> Vec<(Arc<RegisteredController>, Input)> {
        let routes = self.routes.read();
        routes
            .get(kind)
            .into_iter()
            .flatten()
            .filter(|route| only.is_none_or(|registered| Arc::ptr_eq(registered, &route.registered)))
            .map(|route| (Arc::clone(&route.registered), route.input.clone()))
            .collect()
    }
}

impl Wiring {
    /// Makes the readers of `kind` (or only `only`) look at all of it again:
    /// wakes reconcile controllers, queues every resource for queue controllers.
    pub(super) async fn resync(&self, kind: &Kind, only: Option<&Arc<RegisteredController>>) {
        let (queued, woken): (Vec<_>, Vec<_>) =
            self.router.readers(kind, only).into_iter().partition(|(registered, _)| registered.queue.is_some());
        for (registered, _) in woken {
            registered.wake(|| Trigger::Resync);
        }
        if queued.is_empty() {
            return;
        }
        let mut backoff = Backoff::new(self.options.backoff);
        let resources = loop {
            match self.state.list_dynamic(kind, &ListOptions::default()).await {
                Ok(resources) => break resources,
                Err(error) => {
                    tracing::warn!(%kind, %error, "runtime could not list a kind to resynchronize; retrying");
                    if !self.tasks.pause(backoff.next_delay()).await {
                        return;
                    }
                }
            }
        };
        for resource in &resources {
            for (registered, input) in &queued {
                if let Some(action) = action(input, resource) {
                    deliver(registered, action, resource, || Trigger::Resync);
                }
            }
        }
    }

    /// Moves `registered`'s routes to `inputs` (COSI's `UpdateInputs`); watches
    /// kinds new to the runtime, and has the controller look at its new
    /// inputs once they are watched, so it sees what they hold already.
    pub(super) fn reroute(self: &Arc<Self>, registered: &Arc<RegisteredController>, inputs: &[Input]) {
        self.router.replace(registered, inputs);
        self.stop_unread_watches();
        if let Some(queue) = &registered.queue {
            // Items of kinds it no longer reads would fail their access checks forever.
            queue.retain(|key| reads(inputs, key));
        }
        if !self.tasks.running() {
            return;
        }
        let in_flight = self.epoch.begin();
        let established: Vec<_> = inputs.iter().map(|input| self.ensure_watch(&input.kind)).collect();
        let kinds: Vec<Kind> = inputs.iter().map(|input| input.kind.clone()).collect();
        let wiring = Arc::clone(self);
        let registered = Arc::clone(registered);
        self.tasks.spawn(async move {
            let _in_flight = in_flight;
            if wiring.tasks.token().run_until_cancelled(watch::all_established(established)).await.is_none() {
                return;
            }
            match registered.queue {
                Some(_) => {
                    for kind in kinds {
                        wiring.resync(&kind, Some(&registered)).await;
                    }
                }
                None => {
                    registered.wake(|| Trigger::Resync);
                }
            }
        });
    }

    /// Queues every resource of `registered`'s primary inputs again (a queue
    /// controller's [`Waker::wake`](crate::controller::Waker::wake)).
    pub(super) fn requeue_primaries(self: &Arc<Self>, registered: &Arc<RegisteredController>) {
        let in_flight = self.epoch.begin();
        let mut kinds: Vec<Kind> = registered
            .inputs()
            .iter()
            .filter(|input| input.dependency == InputKind::Primary)
            .map(|input| input.kind.clone())
            .collect();
        kinds.sort();
        kinds.dedup();
        let wiring = Arc::clone(self);
        let registered = Arc::clone(registered);
        self.tasks.spawn(async move {
            let _in_flight = in_flight;
            for kind in kinds {
                wiring.resync(&kind, Some(&registered)).await;
            }
        });
    }
}
