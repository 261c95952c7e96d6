//! The state broker: the one place resources are stored and every change is streamed from.
//!
//! [`State`] is the dynamic, object-safe interface every backend implements
//! ([`MemoryState`], the [`NamespacedState`] router, and the remote and durable
//! backends of other crates); its methods end in `_dynamic`. [`StateExt`] is
//! the typed face on top, with the plain names: `get::<T>`, `list::<T>`,
//! `modify::<T>`, `watch_kind::<T>`.

mod error;
mod event;
mod ext;
mod memory;
mod namespaced;
mod observe;
mod options;
mod primitives;
mod registry;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

use crate::resource::{DynamicResource, Kind, Phase, Pointer};

pub use error::{Error, Result, ResultExt};
pub use event::{Bookmark, Event, EventType, TypedWatch, Watch, WatchProgress};
pub(crate) use ext::modify;
pub use ext::{StateExt, WatchCondition};
pub use memory::{BackingStore, MemoryOptions, MemoryState, StoreWrite};
pub use namespaced::NamespacedState;
pub use observe::{Observation, Observer};
pub use options::{
    CreateOptions, DestroyOptions, ListOptions, OwnerOptions, TeardownOptions, UpdateOptions, WatchKindOptions,
    WatchOptions,
};
pub use primitives::Primitives;
pub(crate) use registry::META_DESCRIPTION;
pub use registry::{META_NAMESPACE, META_OWNER, Namespace, Registry};

/// An in-memory state with the default history settings, ready to share.
pub fn memory() -> Arc<dyn State> {
    Arc::new(MemoryState::default())
}

/// The state broker interface, usable as `Arc<dyn State>`: the erased
/// operations every backend implements.
///
/// Programs mostly use the typed face, [`StateExt`]: `state.get::<T>(id)` is
/// `state.get_dynamic(&pointer)` read as a `T`. Every method here ends in
/// `_dynamic` so that the plain names are left to the typed calls.
///
/// The rules every implementation keeps (the conformance suite in
/// `cosi::testing` checks them):
///
/// - `create_dynamic` stores version 1; `update_dynamic` requires the stored
///   version and stores the next one; both return the stored resource.
/// - Writes check, in order: existence, owner (exact match, `None` only matches
///   unowned resources), version, expected phase.
/// - The owner is set at create: an update whose metadata names another owner
///   than the stored one is an [`Error::InvalidArgument`] and changes nothing
///   ([`UpdateOptions::check_owner`]).
/// - `destroy_dynamic` fails while finalizers remain.
/// - Watches deliver events in order; a watcher that falls behind the history
///   gets one [`Event::Errored`] and the watch ends.
///
/// Reads return the stored resources themselves, shared: nothing is copied.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// // Programs hold an `Arc<dyn State>`; the typed methods come from `StateExt`.
/// let state: Arc<dyn State> = cosi::state::memory();
/// state.create(Typed::new("default", HostnameSpec::default()), CreateOptions::default()).await?;
///
/// // The dynamic methods work without the spec type: what transports and generic tools use.
/// let stored = state.get_dynamic(&HostnameSpec::pointer("default")).await?;
/// assert_eq!(stored.metadata().r#type(), "HostnameSpecs.net.example.org");
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait State: Send + Sync + 'static {
    /// The resource at `pointer`.
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource>;

    /// The resource at `pointer` when the backend can answer at once, without
    /// waiting for anything; `None` when it cannot (the caller then calls
    /// [`get_dynamic`](State::get_dynamic)).
    ///
    /// In-process states answer here, so a typed [`get`](StateExt::get)
    /// costs a lookup and no boxed future; remote states keep the default.
    /// When it answers, the answer is the one `get_dynamic` would give.
    fn get_now_dynamic(&self, pointer: &Pointer) -> Option<Result<DynamicResource>> {
        let _ = pointer;
        None
    }

    /// The answer of [`list_dynamic`](State::list_dynamic) when the backend
    /// can give it at once, as [`get_now_dynamic`](State::get_now_dynamic)
    /// does for a get; `None` when it cannot.
    fn list_now_dynamic(&self, kind: &Kind, options: &ListOptions) -> Option<Result<Vec<DynamicResource>>> {
        let _ = (kind, options);
        None
    }

    /// The resources of `kind` that match `options`, sorted by ID.
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>>;

    /// Stores a new resource at version 1.
    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource>;

    /// Replaces a resource; `resource` must carry the stored version.
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource>;

    /// [`create_dynamic`](State::create_dynamic) done at once when the backend
    /// can write without waiting (an in-memory state without a backing
    /// store), else the resource handed back ([`Immediate::Deferred`]).
    ///
    /// The typed [`create`](StateExt::create) tries this first, so a create
    /// in memory costs no boxed future; and an in-memory state stores the
    /// resource's allocation as it is when nobody else holds it (no copy, no
    /// second allocation).
    fn create_now_dynamic(&self, resource: DynamicResource, options: &CreateOptions) -> Immediate<DynamicResource> {
        let _ = options;
        Immediate::Deferred(resource)
    }

    /// [`update_dynamic`](State::update_dynamic) done at once when the backend
    /// can write without waiting, else the resource handed back; the typed
    /// [`update`](StateExt::update) tries this first.
    fn update_now_dynamic(&self, resource: DynamicResource, options: &UpdateOptions) -> Immediate<DynamicResource> {
        let _ = options;
        Immediate::Deferred(resource)
    }

    /// Removes a resource that has no finalizers left.
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()>;

    /// Watches one resource.
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch>;

    /// Watches every resource of a kind.
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch>;

    /// Calls `observer` with every change of `kind` from now on, inside each
    /// write and in the order of the kind's history, until the returned
    /// [`Observation`] is dropped; `None` when the state cannot (a remote
    /// state), so the caller watches the kind instead.
    ///
    /// An observer is a watch without a task, a buffer or a copy of the
    /// event, which never falls behind: what the runtime routes its
    /// controllers' inputs through when it can. An observation keeps the
    /// kind's collection alive as a watch does. See [`Observer`] for what an
    /// observer may do.
    fn observe_kind_dynamic(&self, kind: &Kind, observer: Arc<dyn Observer>) -> Option<Result<Observation>> {
        let _ = (kind, observer);
        None
    }

    /// Moves a resource to the tearing-down phase; returns whether it has no
    /// finalizers left, that is whether it can be destroyed now.
    ///
    /// Tearing down a resource that is already tearing down writes nothing.
    async fn teardown_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<bool> {
        ext::teardown(self, pointer, options).await
    }

    /// Tears a resource down, waits until its finalizers are gone, then destroys it.
    ///
    /// Succeeds when someone else destroys it meanwhile.
    async fn teardown_and_destroy_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<()> {
        ext::teardown_and_destroy(self, pointer, options).await
    }

    /// Adds finalizers, whoever owns the resource and whatever its phase.
    ///
    /// Writes nothing when all are present already.
    async fn add_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<DynamicResource> {
        ext::edit_finalizers(self, pointer, finalizers, true).await
    }

    /// Removes finalizers, whoever owns the resource and whatever its phase.
    ///
    /// Writes nothing when none is present.
    async fn remove_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<DynamicResource> {
        ext::edit_finalizers(self, pointer, finalizers, false).await
    }
}

/// A write a backend did at once, or handed back to be done the usual way
/// (see [`State::create_now_dynamic`]).
#[derive(Debug)]
pub enum Immediate<T> {
    /// Done: what the `_dynamic` method would have returned.
    Done(Result<T>),
    /// Not done, because the backend cannot write without waiting: the
    /// resource, to pass to the `_dynamic` method.
    Deferred(DynamicResource),
}

/// The boxed future `#[async_trait]` makes of a trait method.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A shared state is a state. The forwarding methods hand out the inner
/// state's own boxed future rather than boxing it again, so a call through an
/// `Arc<dyn State>` allocates one future, not two. (They are written out as
/// `#[async_trait]` would generate them, which leaves methods that are not
/// `async` as they are.)
#[async_trait]
impl<S: State + ?Sized> State for Arc<S> {
    fn get_dynamic<'a, 'b, 'f>(&'a self, pointer: &'b Pointer) -> Boxed<'f, Result<DynamicResource>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        (**self).get_dynamic(pointer)
    }

    fn get_now_dynamic(&self, pointer: &Pointer) -> Option<Result<DynamicResource>> {
        (**self).get_now_dynamic(pointer)
    }

    fn list_now_dynamic(&self, kind: &Kind, options: &ListOptions) -> Option<Result<Vec<DynamicResource>>> {
        (**self).list_now_dynamic(kind, options)
    }

    fn create_now_dynamic(&self, resource: DynamicResource, options: &CreateOptions) -> Immediate<DynamicResource> {
        (**self).create_now_dynamic(resource, options)
    }

    fn update_now_dynamic(&self, resource: DynamicResource, options: &UpdateOptions) -> Immediate<DynamicResource> {
        (**self).update_now_dynamic(resource, options)
    }

    fn observe_kind_dynamic(&self, kind: &Kind, observer: Arc<dyn Observer>) -> Option<Result<Observation>> {
        (**self).observe_kind_dynamic(kind, observer)
    }

    fn list_dynamic<'a, 'b, 'c, 'f>(
        &'a self,
        kind: &'b Kind,
        options: &'c ListOptions,
    ) -> Boxed<'f, Result<Vec<DynamicResource>>>
    where
        'a: 'f,
        'b: 'f,
        'c: 'f,
        Self: 'f,
    {
        (**self).list_dynamic(kind, options)
    }

    fn create_dynamic<'a, 'f>(
        &'a self,
        resource: DynamicResource,
        options: CreateOptions,
    ) -> Boxed<'f, Result<DynamicResource>>
    where
        'a: 'f,
        Self: 'f,
    {
        (**self).create_dynamic(resource, options)
    }

    fn update_dynamic<'a, 'f>(
        &'a self,
        resource: DynamicResource,
        options: UpdateOptions,
    ) -> Boxed<'f, Result<DynamicResource>>
    where
        'a: 'f,
        Self: 'f,
    {
        (**self).update_dynamic(resource, options)
    }

    fn destroy_dynamic<'a, 'b, 'f>(&'a self, pointer: &'b Pointer, options: DestroyOptions) -> Boxed<'f, Result<()>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        (**self).destroy_dynamic(pointer, options)
    }

    fn watch_dynamic<'a, 'b, 'f>(&'a self, pointer: &'b Pointer, options: WatchOptions) -> Boxed<'f, Result<Watch>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        (**self).watch_dynamic(pointer, options)
    }

    fn watch_kind_dynamic<'a, 'b, 'f>(&'a self, kind: &'b Kind, options: WatchKindOptions) -> Boxed<'f, Result<Watch>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        (**self).watch_kind_dynamic(kind, options)
    }

    fn teardown_dynamic<'a, 'b, 'f>(&'a self, pointer: &'b Pointer, options: TeardownOptions) -> Boxed<'f, Result<bool>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        (**self).teardown_dynamic(pointer, options)
    }

    fn teardown_and_destroy_dynamic<'a, 'b, 'f>(
        &'a self,
        pointer: &'b Pointer,
        options: TeardownOptions,
    ) -> Boxed<'f, Result<()>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        (**self).teardown_and_destroy_dynamic(pointer, options)
    }

    fn add_finalizers_dynamic<'a, 'b, 'c, 'd, 'f>(
        &'a self,
        pointer: &'b Pointer,
        finalizers: &'c [&'d str],
    ) -> Boxed<'f, Result<DynamicResource>>
    where
        'a: 'f,
        'b: 'f,
        'c: 'f,
        'd: 'f,
        Self: 'f,
    {
        (**self).add_finalizers_dynamic(pointer, finalizers)
    }

    fn remove_finalizers_dynamic<'a, 'b, 'c, 'd, 'f>(
        &'a self,
        pointer: &'b Pointer,
        finalizers: &'c [&'d str],
    ) -> Boxed<'f, Result<DynamicResource>>
    where
        'a: 'f,
        'b: 'f,
        'c: 'f,
        'd: 'f,
        Self: 'f,
    {
        (**self).remove_finalizers_dynamic(pointer, finalizers)
    }
}

/// The phase an update expects to find, `None` for any.
pub(crate) fn phase_matches(expected: Option<Phase>, actual: Phase) -> bool {
    expected.is_none_or(|expected| expected == actual)
}
