//! [`Cleanup`]: resources held with a finalizer until their dependents are gone.

use std::borrow::Cow;

use crate::controller::{
    BoxError, Controller, Ctx, Declaration, Declared, DynCtx, InputDecl, InputKind, IntoOutcome, Outcome, OutputDecl,
    OutputKind, Register, Registration, intern,
};
use crate::resource::{Kind, Phase, Resource, Typed};
use crate::state::ListOptions;

type SelectFn<I> = dyn Fn(&Typed<I>) -> ListOptions + Send + Sync;

/// Holds every resource of type `I` with the controller's finalizer, and
/// releases one that tears down once what depends on it is gone (COSI's
/// `cleanup.Controller`). What depends on it is given as steps, each the
/// resources of one type that a query built from the input selects:
///
/// - [`wait_for`](Cleanup::wait_for) waits until there are none (someone
///   else removes them; COSI's `HasNoOutputs`);
/// - [`remove`](Cleanup::remove) tears them down and destroys them, those
///   nobody owns or that the owners named with
///   [`extra_owners`](Cleanup::extra_owners) own (COSI's `RemoveOutputs`).
///
/// ```
/// use cosi::controller::Cleanup;
/// # use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "Machines.example.org", namespace = "default")]
/// # pub struct Machine {}
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "Disks.example.org", namespace = "default")]
/// # pub struct Disk {}
/// // A machine goes once the disks labelled with its ID are gone.
/// let cleanup = Cleanup::<Machine>::new("machine-cleanup")
///     .remove::<Disk>(|machine| ListOptions::default().label(LabelQuery::new().equal("machine", machine.id())));
/// Runtime::new(cosi::state::memory()).register(cleanup)?;
/// # Ok::<(), cosi::RuntimeError>(())
/// ```
pub struct Cleanup<I> {
    name: Cow<'static, str>,
    steps: Vec<Step<I>>,
    extra_owners: Vec<String>,
    /// What the steps read and write, for the declaration.
    inputs: Vec<InputDecl>,
    outputs: Vec<OutputDecl>,
}

/// One kind of dependent resources.
struct Step<I> {
    kind: Kind,
    select: Box<SelectFn<I>>,
    /// Removes them, rather than waiting for them to go.
    remove: bool,
}

impl<I: Resource> Cleanup<I> {
    /// A cleanup named `name`, with no steps yet: it holds and releases its
    /// inputs at once.
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Cleanup {
            name: name.into(),
            steps: Vec::new(),
            extra_owners: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Releases an input only once no resource of type `O` that `select`
    /// selects for it is left. Reads `O` as a weak input.
    #[must_use]
    pub fn wait_for<O: Resource>(mut self, select: impl Fn(&Typed<I>) -> ListOptions + Send + Sync + 'static) -> Self {
        self.steps.push(Step { kind: O::kind(), select: Box::new(select), remove: false });
        self.inputs.push(InputDecl::of::<O>(InputKind::Weak));
        self
    }

    /// Tears down and destroys the resources of type `O` that `select`
    /// selects for an input, and releases the input once they are gone.
    /// Writes `O` as a shared output, and reads it as a destroy-ready input.
    #[must_use]
    pub fn remove<O: Resource>(mut self, select: impl Fn(&Typed<I>) -> ListOptions + Send + Sync + 'static) -> Self {
        self.steps.push(Step { kind: O::kind(), select: Box::new(select), remove: true });
        self.inputs.push(InputDecl::of::<O>(InputKind::DestroyReady));
        self.outputs.push(OutputDecl::of::<O>(OutputKind::Shared));
        self
    }

    /// Lets [`remove`](Cleanup::remove) remove the resources these
    /// controllers own too, not only those nobody owns.
    #[must_use]
    pub fn extra_owners(mut self, owners: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra_owners.extend(owners.into_iter().map(Into::into));
        self
    }

    async fn run(&self, ctx: &DynCtx) -> Result<(), BoxError> {
        let finalizer = ctx.name();
        let mut errors = Vec::new();
        for input in ctx.list_in::<I>(I::NAMESPACE, &ListOptions::default()).await? {
            let metadata = input.metadata();
            let held = metadata.finalizers().has(finalizer);
            let done = match metadata.phase() {
                Phase::Running if !held => ctx.add_finalizers_dynamic(metadata.pointer(), &[finalizer]).await,
                Phase::TearingDown if held => match self.released(ctx, &input).await {
                    Ok(true) => ctx.remove_finalizers_dynamic(metadata.pointer(), &[finalizer]).await,
                    Ok(false) => Ok(()),
                    Err(error) => {
                        errors.push(format!("cleaning up after {}: {error}", metadata.pointer()));
                        Ok(())
                    }
                },
                Phase::Running | Phase::TearingDown => Ok(()),
            };
            done?;
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors.join("; ").into()),
        }
    }

    /// Runs the steps for `input`; whether its dependents are all gone.
    async fn released(&self, ctx: &DynCtx, input: &Typed<I>) -> Result<bool, BoxError> {
        let mut released = true;
        for step in &self.steps {
            let dependents = ctx.list_dynamic(&step.kind, &(step.select)(input)).await?;
            if !step.remove {
                released &= dependents.is_empty();
                continue;
            }
            for dependent in dependents {
                let metadata = dependent.metadata();
                let owner = metadata.owner();
                if owner.is_some_and(|owner| !self.extra_owners.iter().any(|extra| extra == owner)) {
                    continue;
                }
                let pointer = metadata.pointer();
                let destroyed = match ctx.teardown_as(pointer, owner).await {
                    Ok(true) => ctx.destroy_as(pointer, owner).await.map(|()| true),
                    Ok(false) => Ok(false),
                    Err(error) => Err(error),
                };
                match destroyed {
                    Ok(destroyed) => released &= destroyed,
                    Err(error) if error.is_not_found() => (),
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(released)
    }

    /// The declaration the steps make.
    fn declaration(&self) -> &'static Declaration {
        let inputs =
            std::iter::once(InputDecl::of::<I>(InputKind::Strong)).chain(self.inputs.iter().copied()).collect();
        intern(Self::DECLARATION.name, inputs, self.outputs.clone(), None)
    }
}

impl<I: Resource> Declared for Cleanup<I> {
    /// Without steps; each instance registers with the declaration its steps make.
    const DECLARATION: Declaration = Declaration {
        name: "Cleanup",
        inputs: &[InputDecl::of::<I>(InputKind::Strong)],
        outputs: &[],
        concurrency: None,
    };
}

impl<I: Resource> Controller for Cleanup<I> {
    fn name(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Outcome {
        self.run(ctx.dynamic()).await.into_outcome()
    }
}

impl<I: Resource> Register for Cleanup<I> {
    fn registration(self) -> Registration {
        let declaration = self.declaration();
        Registration::controller(self).with_declaration(declaration)
    }
}
