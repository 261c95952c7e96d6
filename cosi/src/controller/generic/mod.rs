//! Reusable controllers, as COSI has them (`pkg/controller/generic`):
//!
//! - [`Transform`]: each resource of one type becomes a resource of another.
//! - [`QueueTransform`]: the same as a queue controller, one input at a time.
//! - [`Merge`]: layered specs merged into one.
//! - [`Cleanup`]: holds resources of one type with a finalizer until what
//!   depends on them is gone.
//! - [`Destroy`]: destroys the resources of a type nobody owns once they are
//!   torn down and released.
//!
//! They are generic over their resource types, so `#[controller]` cannot
//! declare them: they implement the traits by hand and use
//! [`Ctx::dynamic`](crate::Ctx::dynamic), whose checks run at run time. Those
//! built with inputs or outputs beyond their own (a transform's extra
//! inputs, a cleanup's dependents) register with the declaration their
//! options make, so that the runtime checks and shows what they really read
//! and write.

mod cleanup;
mod destroy;
mod merge;
mod queue_transform;
mod transform;

pub use cleanup::Cleanup;
pub use destroy::Destroy;
pub use merge::{MERGE_SOURCE, Merge};
pub use queue_transform::QueueTransform;
pub use transform::Transform;

use futures_util::future::BoxFuture;

use crate::controller::{BoxError, DynCtx};
use crate::resource::{Pointer, Resource, Typed};
use crate::state::Error;

/// A transform function: writes the output of an input, with the
/// controller's context to read what else it needs.
type TransformFn<In, Out> =
    dyn for<'a> Fn(&'a DynCtx, &'a Typed<In>, &'a mut Typed<Out>) -> BoxFuture<'a, Result<(), BoxError>> + Send + Sync;

/// A transform function that needs no context, as one that does.
fn without_ctx<In: Resource, Out: Resource>(
    transform: impl Fn(&Typed<In>, &mut Typed<Out>) -> Result<(), BoxError> + Send + Sync + 'static,
) -> Box<TransformFn<In, Out>> {
    Box::new(move |_, input, output| Box::pin(std::future::ready(transform(input, output))))
}

/// A transform's error: the state's, or the transform function's.
#[derive(Debug, thiserror::Error)]
enum TransformError {
    #[error(transparent)]
    State(#[from] Error),
    #[error("{0}")]
    Transform(BoxError),
}

/// Writes the output at `output` from `input` with `transform`: runs it on the
/// output as stored (or a new one), then writes what it set (spec, labels,
/// annotations) over the stored one, retried on conflicts and skipped when
/// nothing changed. A tearing-down output is a phase conflict. The output
/// counts as written even when the transform fails, so that a failing
/// transform keeps the output it wrote before.
async fn write_output<In: Resource, Out: Resource + Default>(
    ctx: &DynCtx,
    transform: &TransformFn<In, Out>,
    input: &Typed<In>,
    output: Pointer,
) -> Result<(), TransformError> {
    ctx.touch(&output);
    let mut written = match ctx.get::<Out>(output.clone()).await {
        Ok(stored) => stored,
        Err(error) if error.is_not_found() => Typed::new_in(output.namespace(), output.id(), Out::default()),
        Err(error) => return Err(error.into()),
    };
    transform(ctx, input, &mut written).await.map_err(TransformError::Transform)?;
    let (metadata, spec) = written.into_parts();
    ctx.try_modify::<Out, TransformError>(output, |stored| {
        stored.spec_mut().clone_from(&spec);
        stored.metadata_mut().labels_mut().clone_from(metadata.labels());
        stored.metadata_mut().annotations_mut().clone_from(metadata.annotations());
        Ok(())
    })
    .await
    .map(drop)
}
