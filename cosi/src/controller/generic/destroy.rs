//! [`Destroy`]: destroys what nobody owns once it is torn down and released.

use std::borrow::Cow;
use std::marker::PhantomData;

use crate::controller::{
    BoxError, Controller, Ctx, Declaration, Declared, DynCtx, InputDecl, InputKind, IntoOutcome, Outcome, OutputDecl,
    OutputKind, Register, Registration,
};
use crate::resource::{Phase, Resource};
use crate::state::ListOptions;

/// Destroys every resource of type `T` (in its default namespace) that
/// nobody owns, once it is tearing down and has no finalizers left (COSI's
/// `destroy.Controller`): so that a client may just tear down a resource it
/// created, and the controllers that hold it with finalizers release it
/// before it goes.
///
/// It is named `Destroy[<type>]`. Where COSI has a queue controller whose
/// reconcile skips every resource not ready to go, this is a reconcile
/// controller woken only by those: it reads its type as a destroy-ready
/// input, which our graph rules allow beside the shared output of the same
/// type (a primary input would be a controller woken by its own writes).
///
/// ```
/// use cosi::controller::Destroy;
/// # use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "Machines.example.org", namespace = "default")]
/// # pub struct Machine {}
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// let runtime = Runtime::new(state.clone());
/// runtime.register(Destroy::<Machine>::default())?;
/// runtime.start()?;
///
/// state.create(Typed::new("m1", Machine {}), CreateOptions::default()).await?;
/// state.teardown::<Machine>("m1", TeardownOptions::default()).await?;
/// runtime.settled().await;
/// assert!(state.get::<Machine>("m1").await.is_err_and(|error| error.is_not_found()));
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Destroy<T> {
    _type: PhantomData<fn() -> T>,
}

impl<T: Resource> Default for Destroy<T> {
    fn default() -> Self {
        Destroy { _type: PhantomData }
    }
}

impl<T: Resource> Destroy<T> {
    async fn run(&self, ctx: &DynCtx) -> Result<(), BoxError> {
        for resource in ctx.list_dynamic(&T::kind(), &ListOptions::default()).await? {
            let metadata = resource.metadata();
            let ready = metadata.phase() == Phase::TearingDown && metadata.finalizers().is_empty();
            if !ready || metadata.owner().is_some() {
                continue;
            }
            match ctx.destroy_as(metadata.pointer(), None).await {
                Err(error) if !error.is_not_found() => return Err(error.into()),
                Ok(()) | Err(_) => (),
            }
        }
        Ok(())
    }
}

impl<T: Resource> Declared for Destroy<T> {
    const DECLARATION: Declaration = Declaration {
        name: "Destroy",
        inputs: &[InputDecl::of::<T>(InputKind::DestroyReady)],
        outputs: &[OutputDecl::of::<T>(OutputKind::Shared)],
        concurrency: None,
    };
}

impl<T: Resource> Controller for Destroy<T> {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("Destroy[{}]", T::TYPE))
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Outcome {
        self.run(ctx.dynamic()).await.into_outcome()
    }
}

impl<T: Resource> Register for Destroy<T> {
    fn registration(self) -> Registration {
        Registration::controller(self)
    }
}
