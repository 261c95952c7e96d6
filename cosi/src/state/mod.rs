//! The state broker: the one place resources are stored and every change is streamed from.
//!
//! [`State`] is the dynamic, object-safe interface every backend implements
//! ([`MemoryState`], the [`NamespacedState`] router, and the remote and durable
//! backends of other crates); its methods end in `_dynamic`. [`StateExt`] is
//! the typed face on top, with the plain names: `get::<T>`, `list::<T>`,
//! `modify::<T>`, `watch_kind::<T>`.
//!
//! A backend implements the seven primitives of [`State`] (get, list,
//! create, update, destroy, watch, watch of a kind). The rest has defaults:
//! the compound operations (teardown, finalizers) are written against the
//! primitives, and a backend overrides them only when it does them better
//! itself (the gRPC client asks its server to tear down, as Go COSI's
//! optional `Teardowner` does); and [`State::in_process`] is the one door to
//! what only a state in this process can do ([`InProcess`]: answers without
//! a future, observers). So a wrapper forwards the primitives and
//! `in_process`, and the compound operations only when what it wraps may
//! override them (the namespace router does, for its routes).

mod error;
mod event;
mod ext;
mod in_process;
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
pub use in_process::{Immediate, InProcess};
pub(crate) use in_process::{create_now, get_now, list_now, observe_kind, update_now};
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

    /// The resources of `kind` that match `options`, sorted by ID.
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>>;

    /// Stores a new resource at version 1.
    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource>;

    /// Replaces a resource; `resource` must carry the stored version.
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource>;

    /// Removes a resource that has no finalizers left.
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()>;

    /// Watches one resource.
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch>;

    /// Watches every resource of a kind.
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch>;

    /// The in-process face of this state: reads and writes without a future,
    /// and observers; `None` for a remote state (the default).
    ///
    /// The typed calls of [`StateExt`], a controller's context and the
    /// runtime's feeds try it first, so that a get from memory costs a
    /// lookup and no boxed future, and a change reaches the controllers that
    /// read it inside the write. A wrapper that only adds to a state forwards
    /// this; one that changes what the state does (injects faults, routes)
    /// answers with an [`InProcess`] of its own that does the same there.
    fn in_process(&self) -> Option<&dyn InProcess> {
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

/// The boxed future `#[async_trait]` makes of a trait method.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Writes async methods of [`State`] that call the same method of the state
/// behind `self` and hand out its future as it is: the signature
/// `#[async_trait]` gives the trait's method (one lifetime per reference
/// argument, each outliving the future), without the second box that an
/// `async fn` calling the inner one would make.
macro_rules! forward {
    ($($name:ident<$($life:lifetime),*>($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {$(
        fn $name<'this, $($life,)* 'future>(&'this self, $($arg: $ty),*) -> Boxed<'future, $out>
        where
            'this: 'future,
            $($life: 'future,)*
            Self: 'future,
        {
            (**self).$name($($arg),*)
        }
    )*};
}

/// A shared state is a state. Each async method hands out the inner state's
/// own boxed future rather than boxing it again, so a call through an
/// `Arc<dyn State>` allocates one future, not two.
impl<S: State + ?Sized> State for Arc<S> {
    forward! {
        get_dynamic<'p>(pointer: &'p Pointer) -> Result<DynamicResource>;
        list_dynamic<'k, 'o>(kind: &'k Kind, options: &'o ListOptions) -> Result<Vec<DynamicResource>>;
        create_dynamic<>(resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource>;
        update_dynamic<>(resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource>;
        destroy_dynamic<'p>(pointer: &'p Pointer, options: DestroyOptions) -> Result<()>;
        watch_dynamic<'p>(pointer: &'p Pointer, options: WatchOptions) -> Result<Watch>;
        watch_kind_dynamic<'k>(kind: &'k Kind, options: WatchKindOptions) -> Result<Watch>;
        teardown_dynamic<'p>(pointer: &'p Pointer, options: TeardownOptions) -> Result<bool>;
        teardown_and_destroy_dynamic<'p>(pointer: &'p Pointer, options: TeardownOptions) -> Result<()>;
        add_finalizers_dynamic<'p, 'l, 'n>(pointer: &'p Pointer, finalizers: &'l [&'n str]) -> Result<DynamicResource>;
        remove_finalizers_dynamic<'p, 'l, 'n>(pointer: &'p Pointer, finalizers: &'l [&'n str]) -> Result<DynamicResource>;
    }

    fn in_process(&self) -> Option<&dyn InProcess> {
        (**self).in_process()
    }
}

/// The phase an update expects to find, `None` for any.
pub(crate) fn phase_matches(expected: Option<Phase>, actual: Phase) -> bool {
    expected.is_none_or(|expected| expected == actual)
}
