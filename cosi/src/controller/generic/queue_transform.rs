//! [`QueueTransform`]: [`Transform`](crate::controller::Transform) as a queue
//! controller.

use std::borrow::Cow;

use futures_util::future::BoxFuture;

use crate::controller::generic::{TransformError, TransformFn, without_ctx, write_output};
use crate::controller::{
    BoxError, Ctx, Declaration, Declared, DynCtx, InputDecl, InputKind, IntoOutcome, Outcome, OutputDecl, OutputKind,
    QueueController, ReducedMetadata, Register, Registration, intern,
};
use crate::resource::{Kind, Phase, Pointer, Resource, Typed};

type MapFn<In> = dyn Fn(&Typed<In>) -> Option<String> + Send + Sync;
type UnmapFn = dyn Fn(&str) -> String + Send + Sync;
type MapperFn = dyn Fn(&ReducedMetadata) -> Vec<String> + Send + Sync;

/// [`Transform`](crate::controller::Transform) as a queue controller (COSI's
/// `qtransform.QController`): one input at a time, up to
/// [`concurrency`](QueueTransform::concurrency) at once, each with its own
/// backoff. Running inputs carry the controller's finalizer until their
/// output is gone.
///
/// Options, each a method:
///
/// - [`with_ctx`](QueueTransform::with_ctx) builds one whose transform also
///   gets the controller's context.
/// - [`map_ids`](QueueTransform::map_ids) maps an input's ID to its output's
///   and back (by default an output has its input's ID).
/// - [`input`](QueueTransform::input) reads another type too, as a mapped
///   input, with a mapper from its resources to the inputs they affect.
/// - [`output_kind`](QueueTransform::output_kind) shares the output type.
/// - [`ignore_teardown_until`](QueueTransform::ignore_teardown_until) and
///   [`ignore_teardown_while`](QueueTransform::ignore_teardown_while) keep
///   the output of a tearing-down input while other controllers still hold
///   the input.
///
/// ```
/// use cosi::controller::QueueTransform;
/// # use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// # pub struct HostnameStatus { pub hostname: String }
/// // `spec/<name>` becomes `status/<name>`, four at a time.
/// let controller = QueueTransform::<HostnameSpec, HostnameStatus>::new("hostname-status", |spec, status| {
///     status.hostname = spec.hostname.clone();
///     Ok(())
/// })
/// .map_ids(|spec| spec.id().strip_prefix("spec/").map(|name| format!("status/{name}")), |status| {
///     status.replacen("status/", "spec/", 1)
/// })
/// .concurrency(4);
/// Runtime::new(cosi::state::memory()).register(controller)?;
/// # Ok::<(), cosi::RuntimeError>(())
/// ```
pub struct QueueTransform<In, Out> {
    name: Cow<'static, str>,
    transform: Box<TransformFn<In, Out>>,
    map: Box<MapFn<In>>,
    unmap: Box<UnmapFn>,
    mappers: Vec<(Kind, Box<MapperFn>)>,
    inputs: Vec<InputDecl>,
    output_kind: OutputKind,
    concurrency: usize,
    /// The finalizers a tearing-down input may still have for its output to
    /// go; `None` allows any.
    teardown_until: Option<Vec<String>>,
    /// The finalizers that keep the output of a tearing-down input.
    teardown_while: Vec<String>,
}

impl<In: Resource, Out: Resource + Default> QueueTransform<In, Out> {
    /// A queue transform named `name`.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        transform: impl Fn(&Typed<In>, &mut Typed<Out>) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        Self::build(name.into(), without_ctx(transform))
    }

    /// A queue transform named `name` whose transform also gets the
    /// controller's context, as [`Transform::with_ctx`](crate::controller::Transform::with_ctx)'s.
    pub fn with_ctx(
        name: impl Into<Cow<'static, str>>,
        transform: impl for<'a> Fn(&'a DynCtx, &'a Typed<In>, &'a mut Typed<Out>) -> BoxFuture<'a, Result<(), BoxError>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self::build(name.into(), Box::new(transform))
    }

    fn build(name: Cow<'static, str>, transform: Box<TransformFn<In, Out>>) -> Self {
        QueueTransform {
            name,
            transform,
            map: Box::new(|input| Some(input.id().to_owned())),
            unmap: Box::new(str::to_owned),
            mappers: Vec::new(),
            inputs: Vec::new(),
            output_kind: OutputKind::Exclusive,
            concurrency: 1,
            teardown_until: None,
            teardown_while: Vec::new(),
        }
    }

    /// Maps an input to the ID of its output (`None` skips the input), and
    /// an output's ID back to its input's, for when the output is ready to
    /// be destroyed.
    #[must_use]
    pub fn map_ids(
        mut self,
        map: impl Fn(&Typed<In>) -> Option<String> + Send + Sync + 'static,
        unmap: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> Self {
        self.map = Box::new(map);
        self.unmap = Box::new(unmap);
        self
    }

    /// Reads resources of type `T` too, as an input of `kind` (`Mapped` or
    /// `MappedDestroyReady`): a change of one queues the inputs whose IDs
    /// `mapper` returns.
    #[must_use]
    pub fn input<T: Resource>(
        mut self,
        kind: InputKind,
        mapper: impl Fn(&ReducedMetadata) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.inputs.push(InputDecl::of::<T>(kind));
        self.mappers.push((T::kind(), Box::new(mapper)));
        self
    }

    /// Writes its outputs as `kind`: [`OutputKind::Shared`] lets other
    /// controllers write resources of `Out` too (each its own).
    #[must_use]
    pub fn output_kind(mut self, kind: OutputKind) -> Self {
        self.output_kind = kind;
        self
    }

    /// Runs up to `concurrency` inputs at once (1 by default; at least 1,
    /// which the registration checks).
    #[must_use]
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Keeps transforming a tearing-down input, as a running one, until no
    /// finalizer is left on it but this controller's and `finalizers`:
    /// then its output goes. With no finalizers named, the controller waits
    /// to be the last one holding the input.
    #[must_use]
    pub fn ignore_teardown_until(mut self, finalizers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.teardown_until.get_or_insert_with(Vec::new).extend(finalizers.into_iter().map(Into::into));
        self
    }

    /// Keeps transforming a tearing-down input, as a running one, while it
    /// still has any of `finalizers`.
    #[must_use]
    pub fn ignore_teardown_while(mut self, finalizers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.teardown_while.extend(finalizers.into_iter().map(Into::into));
        self
    }

    /// The declaration the options make.
    fn declaration(&self) -> &'static Declaration {
        let inputs = [InputDecl::of::<In>(InputKind::Primary), InputDecl::of::<Out>(InputKind::MappedDestroyReady)];
        let inputs = inputs.into_iter().chain(self.inputs.iter().copied()).collect();
        let outputs = vec![OutputDecl::of::<Out>(self.output_kind)];
        intern(Self::DECLARATION.name, inputs, outputs, Some(self.concurrency))
    }

    /// Whether a tearing-down input is still held by finalizers the options
    /// wait for, so is transformed as a running one.
    fn teardown_ignored(&self, input: &Typed<In>, own: &str) -> bool {
        input.metadata().finalizers().iter().filter(|finalizer| *finalizer != own).any(|finalizer| {
            let unexpected = self.teardown_until.as_ref().is_some_and(|until| !until.iter().any(|f| f == finalizer));
            unexpected || self.teardown_while.iter().any(|f| f == finalizer)
        })
    }

    async fn reconcile_item(&self, ctx: &DynCtx, item: &Pointer) -> Result<(), BoxError> {
        let input = match ctx.get::<In>(item.clone()).await {
            Ok(input) => input,
            Err(error) if error.is_not_found() => return Ok(()),
            Err(error) => return Err(error.into()),
        };
        let Some(id) = (self.map)(&input) else { return Ok(()) };
        let output = Out::pointer(&id);
        let finalizer = ctx.name().to_owned();
        let running = match input.metadata().phase() {
            Phase::Running => true,
            Phase::TearingDown => self.teardown_ignored(&input, &finalizer),
        };
        if !running {
            return release(ctx, item, &output, &finalizer).await;
        }
        if input.metadata().phase() == Phase::Running && !input.metadata().finalizers().has(&finalizer) {
            ctx.add_finalizers::<In>(item.clone(), &[&finalizer]).await?;
        }
        // The output of an earlier input with this ID is still tearing down:
        // destroy it once released (which queues this input again), then write anew.
        match ctx.get_dynamic(&output).await {
            Ok(stored) if stored.metadata().phase() == Phase::TearingDown => {
                if !stored.metadata().finalizers().is_empty() {
                    return Ok(());
                }
                ctx.destroy_dynamic(&output).await?;
            }
            Err(error) if !error.is_not_found() => return Err(error.into()),
            Ok(_) | Err(_) => (),
        }
        match write_output(ctx, &*self.transform, &input, output).await {
            Err(TransformError::State(error)) if error.is_phase_conflict() => Ok(()),
            written => written.map_err(Into::into),
        }
    }
}

/// Tears down the output of a tearing-down input, destroys it once nothing
/// holds it, then releases the input.
async fn release(ctx: &DynCtx, input: &Pointer, output: &Pointer, finalizer: &str) -> Result<(), BoxError> {
    match ctx.teardown_dynamic(output).await {
        Ok(true) => ctx.destroy_dynamic(output).await?,
        // Its destroy-ready event queues the input again.
        Ok(false) => return Ok(()),
        Err(error) if error.is_not_found() => (),
        Err(error) => return Err(error.into()),
    }
    Ok(ctx.remove_finalizers_dynamic(input, &[finalizer]).await?)
}

impl<In: Resource, Out: Resource + Default> Declared for QueueTransform<In, Out> {
    /// Without options; each instance registers with the declaration its options make.
    const DECLARATION: Declaration = Declaration {
        name: "QueueTransform",
        inputs: &[InputDecl::of::<In>(InputKind::Primary), InputDecl::of::<Out>(InputKind::MappedDestroyReady)],
        outputs: &[OutputDecl::of::<Out>(OutputKind::Exclusive)],
        concurrency: Some(1),
    };
}

impl<In: Resource, Out: Resource + Default> QueueController for QueueTransform<In, Out> {
    fn name(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Outcome {
        self.reconcile_item(ctx.dynamic(), item).await.into_outcome()
    }

    async fn map(&self, _ctx: &Ctx<Self>, input: &ReducedMetadata) -> Result<Vec<Pointer>, BoxError> {
        let pointer = &input.pointer;
        if pointer.r#type() == Out::TYPE && pointer.namespace() == Out::NAMESPACE {
            return Ok(vec![In::pointer((self.unmap)(pointer.id()))]);
        }
        let kind = Kind::new(pointer.namespace(), pointer.r#type());
        match self.mappers.iter().find(|(mapped, _)| *mapped == kind) {
            Some((_, mapper)) => Ok(mapper(input).iter().map(In::pointer).collect()),
            None => Err(format!("controller `{}` has no mapper for {kind}", self.name).into()),
        }
    }
}

impl<In: Resource, Out: Resource + Default> Register for QueueTransform<In, Out> {
    fn registration(self) -> Registration {
        let declaration = self.declaration();
        Registration::queue(self).with_declaration(declaration)
    }
}
