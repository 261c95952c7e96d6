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
mod options;
mod registry;

use std::sync::Arc;

use async_trait::async_trait;

use crate::resource::{DynamicResource, Kind, Phase, Pointer};

pub use error::{Error, Result};
pub use event::{Bookmark, Event, EventType, TypedEvent, TypedWatch, Watch, WatchProgress};
pub use ext::{StateExt, WatchCondition};
pub use memory::{BackingStore, MemoryOptions, MemoryState, StoreWrite};
pub use namespaced::NamespacedState;
pub use options::{
    CreateOptions, DestroyOptions, ListOptions, TeardownOptions, UpdateOptions, WatchKindOptions, WatchOptions,
};
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
/// - `destroy_dynamic` fails while finalizers remain.
/// - Watches deliver events in order; a watcher that falls behind the history
///   gets one [`Event::Errored`] and the watch ends.
///
/// Reads return `Arc`s to the stored resources: nothing is copied.
#[async_trait]
pub trait State: Send + Sync + 'static {
    /// The resource at `pointer`.
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<Arc<DynamicResource>>;

    /// The resources of `kind` that match `options`, sorted by ID.
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<Arc<DynamicResource>>>;

    /// Stores a new resource at version 1.
    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<Arc<DynamicResource>>;

    /// Replaces a resource; `resource` must carry the stored version.
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<Arc<DynamicResource>>;

    /// Removes a resource that has no finalizers left.
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()>;

    /// Watches one resource.
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch>;

    /// Watches every resource of a kind.
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch>;

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
    async fn add_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<Arc<DynamicResource>> {
        ext::edit_finalizers(self, pointer, finalizers, true).await
    }

    /// Removes finalizers, whoever owns the resource and whatever its phase.
    ///
    /// Writes nothing when none is present.
    async fn remove_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<Arc<DynamicResource>> {
        ext::edit_finalizers(self, pointer, finalizers, false).await
    }
}

#[async_trait]
impl<S: State + ?Sized> State for Arc<S> {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<Arc<DynamicResource>> {
        (**self).get_dynamic(pointer).await
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<Arc<DynamicResource>>> {
        (**self).list_dynamic(kind, options).await
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<Arc<DynamicResource>> {
        (**self).create_dynamic(resource, options).await
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<Arc<DynamicResource>> {
        (**self).update_dynamic(resource, options).await
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()> {
        (**self).destroy_dynamic(pointer, options).await
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch> {
        (**self).watch_dynamic(pointer, options).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch> {
        (**self).watch_kind_dynamic(kind, options).await
    }

    async fn teardown_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<bool> {
        (**self).teardown_dynamic(pointer, options).await
    }

    async fn teardown_and_destroy_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<()> {
        (**self).teardown_and_destroy_dynamic(pointer, options).await
    }

    async fn add_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<Arc<DynamicResource>> {
        (**self).add_finalizers_dynamic(pointer, finalizers).await
    }

    async fn remove_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<Arc<DynamicResource>> {
        (**self).remove_finalizers_dynamic(pointer, finalizers).await
    }
}

/// The phase an update expects to find, `None` for any.
pub(crate) fn phase_matches(expected: Option<Phase>, actual: Phase) -> bool {
    expected.is_none_or(|expected| expected == actual)
}
