//! A router that sends each namespace to a backend of its own.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::RwLock;

use crate::resource::{DynamicResource, Kind, Pointer};
use crate::state::{
    CreateOptions, DestroyOptions, Error, Immediate, InProcess, ListOptions, Observation, Observer, Result, State,
    TeardownOptions, UpdateOptions, Watch, WatchKindOptions, WatchOptions,
};

type Builder = dyn Fn(&str) -> Arc<dyn State> + Send + Sync;

/// A [`State`] that routes every call by namespace.
///
/// Namespaces given with [`with_namespace`](NamespacedState::with_namespace)
/// go to their backend; any other namespace gets one built for it on first use.
/// Talos keeps each namespace in its own in-memory state this way; a program can
/// keep some namespaces durable and the rest in memory.
///
/// ```
/// use std::sync::Arc;
/// use cosi::state::{MemoryState, NamespacedState, State};
///
/// let durable: Arc<dyn State> = Arc::new(MemoryState::default()); // a durable backend in practice
/// let state = NamespacedState::new(|_namespace| Arc::new(MemoryState::default()) as Arc<dyn State>)
///     .with_namespace("config", durable);
/// ```
pub struct NamespacedState {
    routes: RwLock<HashMap<String, Arc<dyn State>>>,
    build: Box<Builder>,
}

impl NamespacedState {
    /// A router that builds the backend of a namespace with `build` on first use.
    pub fn new(build: impl Fn(&str) -> Arc<dyn State> + Send + Sync + 'static) -> Self {
        NamespacedState { routes: RwLock::default(), build: Box::new(build) }
    }

    /// Sends `namespace` to `state`.
    #[must_use]
    pub fn with_namespace(self, namespace: impl Into<String>, state: Arc<dyn State>) -> Self {
        self.routes.write().insert(namespace.into(), state);
        self
    }

    /// The backend of `namespace`.
    pub fn route(&self, namespace: &str) -> Result<Arc<dyn State>> {
        if let Some(state) = self.routes.read().get(namespace) {
            return Ok(Arc::clone(state));
        }
        // Validate before building, so that bad input never leaves a backend behind.
        crate::resource::validate_name("namespace", namespace).map_err(Error::InvalidArgument)?;
        let mut routes = self.routes.write();
        Ok(Arc::clone(routes.entry(namespace.to_owned()).or_insert_with(|| (self.build)(namespace))))
    }
}

impl std::fmt::Debug for NamespacedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut namespaces: Vec<String> = self.routes.read().keys().cloned().collect();
        namespaces.sort();
        f.debug_struct("NamespacedState").field("namespaces", &namespaces).finish_non_exhaustive()
    }
}

#[async_trait]
impl State for NamespacedState {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource> {
        self.route(pointer.namespace())?.get_dynamic(pointer).await
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>> {
        self.route(kind.namespace())?.list_dynamic(kind, options).await
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource> {
        self.route(resource.metadata().namespace())?.create_dynamic(resource, options).await
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource> {
        self.route(resource.metadata().namespace())?.update_dynamic(resource, options).await
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()> {
        self.route(pointer.namespace())?.destroy_dynamic(pointer, options).await
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch> {
        self.route(pointer.namespace())?.watch_dynamic(pointer, options).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch> {
        self.route(kind.namespace())?.watch_kind_dynamic(kind, options).await
    }

    /// Each call goes to its route's in-process face, when the route has one.
    fn in_process(&self) -> Option<&dyn InProcess> {
        Some(self)
    }

    async fn teardown_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<bool> {
        self.route(pointer.namespace())?.teardown_dynamic(pointer, options).await
    }

    async fn teardown_and_destroy_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<()> {
        self.route(pointer.namespace())?.teardown_and_destroy_dynamic(pointer, options).await
    }

    async fn add_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<DynamicResource> {
        self.route(pointer.namespace())?.add_finalizers_dynamic(pointer, finalizers).await
    }

    async fn remove_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<DynamicResource> {
        self.route(pointer.namespace())?.remove_finalizers_dynamic(pointer, finalizers).await
    }
}

/// Routes each call to the in-process face of its namespace's backend; a
/// call whose backend has none declines, and takes the [`State`] method.
impl InProcess for NamespacedState {
    fn get_now(&self, pointer: &Pointer) -> Option<Result<DynamicResource>> {
        match self.route(pointer.namespace()) {
            Ok(state) => crate::state::get_now(&*state, pointer),
            Err(error) => Some(Err(error)),
        }
    }

    fn list_now(&self, kind: &Kind, options: &ListOptions) -> Option<Result<Vec<DynamicResource>>> {
        match self.route(kind.namespace()) {
            Ok(state) => crate::state::list_now(&*state, kind, options),
            Err(error) => Some(Err(error)),
        }
    }

    fn create_now(&self, resource: DynamicResource, options: &CreateOptions) -> Immediate<DynamicResource> {
        match self.route(resource.metadata().namespace()) {
            Ok(state) => crate::state::create_now(&*state, resource, options),
            Err(error) => Immediate::Done(Err(error)),
        }
    }

    fn update_now(&self, resource: DynamicResource, options: &UpdateOptions) -> Immediate<DynamicResource> {
        match self.route(resource.metadata().namespace()) {
            Ok(state) => crate::state::update_now(&*state, resource, options),
            Err(error) => Immediate::Done(Err(error)),
        }
    }

    fn observe_kind(&self, kind: &Kind, observer: Arc<dyn Observer>) -> Option<Result<Observation>> {
        match self.route(kind.namespace()) {
            Ok(state) => crate::state::observe_kind(&*state, kind, observer),
            Err(error) => Some(Err(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Metadata;
    use crate::state::{MemoryState, Primitives};

    fn resource(namespace: &str, id: &str) -> DynamicResource {
        DynamicResource::without_spec(Metadata::new(namespace, "Things.test.cosi.dev", id))
    }

    /// Each call of the router's in-process face goes to its route's: a route
    /// in memory answers at once, a route without one (a remote state)
    /// declines, so the caller takes the route's own method; a namespace no
    /// route may have is refused at once.
    #[tokio::test]
    async fn the_in_process_face_follows_each_route() {
        let state = NamespacedState::new(|_| Arc::new(MemoryState::default()) as Arc<dyn State>)
            .with_namespace("remote", Arc::new(Primitives(MemoryState::default())));
        let in_process = state.in_process().expect("the router has an in-process face");

        let created = match in_process.create_now(resource("local", "a"), &CreateOptions::default()) {
            Immediate::Done(created) => created.expect("create"),
            Immediate::Deferred(_) => panic!("a route in memory deferred a create"),
        };
        let got = in_process.get_now(&created.metadata().pointer().clone()).expect("an answer").expect("get");
        assert_eq!(got.metadata().version(), created.metadata().version());
        let kind = Kind::new("local", "Things.test.cosi.dev");
        assert_eq!(in_process.list_now(&kind, &ListOptions::default()).expect("an answer").expect("list").len(), 1);

        let deferred = in_process.create_now(resource("remote", "b"), &CreateOptions::default());
        let Immediate::Deferred(handed_back) = deferred else { panic!("a remote route wrote at once") };
        state.create_dynamic(handed_back, CreateOptions::default()).await.expect("create through the route");
        let remote = Kind::new("remote", "Things.test.cosi.dev");
        assert!(in_process.get_now(&remote.pointer("b")).is_none(), "a remote route answered a get at once");
        assert!(in_process.list_now(&remote, &ListOptions::default()).is_none());
        assert_eq!(state.get_dynamic(&remote.pointer("b")).await.expect("get through the route").id(), "b");

        let bad = Kind::new("not a namespace!", "Things.test.cosi.dev");
        assert!(matches!(in_process.get_now(&bad.pointer("c")), Some(Err(Error::InvalidArgument(_)))));
    }
}
