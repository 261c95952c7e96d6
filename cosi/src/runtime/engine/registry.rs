//! The registered controllers and the resource types they use.

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;

use crate::controller::{Entry, check_pair};
use crate::resource::ResourceDefinition;
use crate::runtime::registered::RegisteredController;
use crate::runtime::resource_types::ResourceTypes;
use crate::runtime::{ControllerStats, Graph, GraphController, RuntimeError};

/// The controllers, in registration order, and the types. Lock order: the
/// controllers, then the types.
pub(super) struct Registry {
    controllers: RwLock<Vec<Arc<RegisteredController>>>,
    /// The resource types the controllers use, and those registered by hand.
    types: Mutex<ResourceTypes>,
}

impl Registry {
    /// An empty registry; `statuses` says whether the runtime publishes
    /// controller statuses (whose type it then knows).
    pub(super) fn new(statuses: bool) -> Self {
        Registry { controllers: RwLock::default(), types: Mutex::new(ResourceTypes::with_builtins(statuses)) }
    }

    /// Adds `registered` unless it conflicts with a registered controller or one
    /// of its types with a known type: then nothing is added.
    pub(super) fn add(&self, registered: Arc<RegisteredController>) -> Result<(), RuntimeError> {
        let mut controllers = self.controllers.write();
        let new = Entry { name: &registered.name, declaration: registered.declaration };
        for existing in controllers.iter() {
            let old = Entry { name: &existing.name, declaration: existing.declaration };
            check_pair(old, new).map_err(|conflict| RuntimeError::Conflict(conflict.to_owned()))?;
        }
        // The last check: once the types are in, the controller is too.
        self.types.lock().add(registered.declaration.definitions())?;
        controllers.push(registered);
        Ok(())
    }

    /// Adds types the program uses beyond its controllers' (see `ResourceTypes`).
    pub(super) fn add_types(&self, definitions: Vec<ResourceDefinition>) -> Result<(), RuntimeError> {
        self.types.lock().add(definitions)
    }

    /// The definitions not published yet, which are from now on taken as published.
    pub(super) fn take_unpublished(&self) -> Vec<ResourceDefinition> {
        self.types.lock().take_unpublished()
    }

    pub(super) fn controllers(&self) -> Vec<Arc<RegisteredController>> {
        self.controllers.read().clone()
    }

    /// Whether every controller is quiet at `now` (see `RegisteredController::is_quiet`).
    pub(super) fn all_quiet(&self, now: Instant) -> bool {
        self.controllers.read().iter().all(|registered| registered.is_quiet(now))
    }

    pub(super) fn graph(&self) -> Graph {
        let controllers = self.controllers.read();
        let mut graph = Graph {
            controllers: controllers
                .iter()
                .map(|registered| GraphController::new(&registered.name, registered.declaration, &registered.inputs()))
                .collect(),
        };
        graph.controllers.sort_by(|a, b| a.name.cmp(&b.name));
        graph
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.controllers.read().iter().map(|registered| registered.name.to_string()).collect()
    }

    pub(super) fn stats(&self, name: &str) -> Option<ControllerStats> {
        let controllers = self.controllers.read();
        let registered = controllers.iter().find(|registered| &*registered.name == name)?;
        Some(registered.stats.snapshot(registered.queue.as_ref()))
    }
}
