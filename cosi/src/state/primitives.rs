//! A state reduced to its primitive operations.

use async_trait::async_trait;

use crate::resource::{DynamicResource, Kind, Pointer};
use crate::state::{
    CreateOptions, DestroyOptions, ListOptions, Result, State, UpdateOptions, Watch, WatchKindOptions, WatchOptions,
};

/// `S` with only its seven primitive operations (get, list, create, update,
/// destroy, watch, watch of a kind); every other method of [`State`] takes
/// its default: the compound operations (teardown, finalizers) are written
/// against the primitives, and there is no in-process face (no immediate
/// paths and no observers), as on a remote state.
///
/// What a backend falls back to for an operation its peer cannot do itself
/// (the gRPC client's teardown against a server without the RPC), and what a
/// test runs to take the path a remote state takes in process: the runtime on
/// `Primitives(MemoryState::default())` feeds its controllers through watch
/// tasks, not observers.
///
/// ```
/// use cosi::prelude::*;
/// use cosi::state::{MemoryState, Primitives};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = Primitives(MemoryState::default());
/// let pointer = Pointer::new("default", "Things.example.org", "one");
/// // No immediate path: the caller awaits the primitive, which answers.
/// assert!(state.in_process().is_none());
/// assert!(state.get_dynamic(&pointer).await.is_err_and(|error| error.is_not_found()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Primitives<S>(pub S);

#[async_trait]
impl<S: State> State for Primitives<S> {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource> {
        self.0.get_dynamic(pointer).await
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>> {
        self.0.list_dynamic(kind, options).await
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource> {
        self.0.create_dynamic(resource, options).await
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource> {
        self.0.update_dynamic(resource, options).await
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()> {
        self.0.destroy_dynamic(pointer, options).await
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch> {
        self.0.watch_dynamic(pointer, options).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch> {
        self.0.watch_kind_dynamic(kind, options).await
    }
}
