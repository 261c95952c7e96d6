//! A state that offers no observers, for testing the runtime's watch tasks in process.

use std::sync::Arc;

use async_trait::async_trait;

use crate::resource::{DynamicResource, Kind, Pointer};
use crate::state::{
    CreateOptions, DestroyOptions, ListOptions, Result, State, UpdateOptions, Watch, WatchKindOptions, WatchOptions,
};

/// `S` with its observers hidden: every primitive goes to `S`, and
/// [`observe_kind_dynamic`](State::observe_kind_dynamic) answers `None`, as a
/// remote state's does. A runtime on it feeds its controllers through watch
/// tasks, so an in-process test covers what a remote state takes (watches
/// that start over after falling behind, say).
///
/// ```
/// use cosi::state::MemoryState;
/// use cosi::testing::Unobserved;
///
/// cosi::runtime_conformance_tests!(watched, || async { Unobserved(MemoryState::default()) });
/// # fn main() {}
/// ```
#[derive(Debug, Default)]
pub struct Unobserved<S>(pub S);

#[async_trait]
impl<S: State> State for Unobserved<S> {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<Arc<DynamicResource>> {
        self.0.get_dynamic(pointer).await
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<Arc<DynamicResource>>> {
        self.0.list_dynamic(kind, options).await
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<Arc<DynamicResource>> {
        self.0.create_dynamic(resource, options).await
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<Arc<DynamicResource>> {
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
