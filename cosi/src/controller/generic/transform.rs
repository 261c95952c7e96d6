//! [`Transform`]: each resource of one type becomes a resource of another.

use std::borrow::Cow;

use futures_util::future::BoxFuture;

use crate::controller::generic::{TransformError, TransformFn, without_ctx, write_output};
use crate::controller::{
    BoxError, Controller, Ctx, Declaration, Declared, DynCtx, InputDecl, InputKind, IntoOutcome, Outcome, OutputDecl,
    OutputKind, Register, Registration, intern,
};
use crate::resource::{Phase, Resource, Typed};
use crate::state::ListOptions;

type MapFn<In> = dyn Fn(&Typed<In>) -> Option<String> + Send + Sync;
type ShutdownFn = dyn for<'a> FnOnce(&'a DynCtx) -> BoxFuture<'a, ()> + Send + Sync;

/// Each resource of type `In` becomes the resource of type `Out` that `map`
/// names (an ID in `Out`'s namespace; `None` skips the input), its spec
/// written by `transform`. Outputs whose input is gone or tearing down are
/// torn down, and destroyed once nothing holds them (COSI's
/// `transform.Controller`).
///
/// Options, each a method:
///
/// - [`with_ctx`](Transform::with_ctx) builds one whose transform also gets
///   the controller's context, to read the extra inputs that
///   [`input`](Transform::input) declares.
/// - [`filter`](Transform::filter) transforms only the inputs a label or ID
///   query selects.
/// - [`input_finalizers`](Transform::input_finalizers) holds each input with
///   the controller's finalizer until its output is gone;
///   [`ignore_tearing_down`](Transform::ignore_tearing_down) keeps an output
///   until its input is destroyed instead. The last one called holds.
/// - [`output_kind`](Transform::output_kind) shares the output type with
///   other writers.
/// - [`on_shutdown`](Transform::on_shutdown) runs once the runtime stops.
///
/// `In` and `Out` must differ: the controller reads its own outputs only to
/// learn when one is ready to be destroyed.
///
/// ```
/// use cosi::controller::Transform;
/// # use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// # pub struct HostnameStatus { pub hostname: String }
/// let controller = Transform::<HostnameSpec, HostnameStatus>::new(
///     "hostname-status",
///     |spec| Some(spec.id().to_owned()),
///     |spec, status| {
///         status.hostname = spec.hostname.clone();
///         Ok(())
///     },
/// );
/// # let _ = controller;
/// ```
pub struct Transform<In, Out> {
    name: Cow<'static, str>,
    map: Box<MapFn<In>>,
    transform: Box<TransformFn<In, Out>>,
    filter: ListOptions,
    teardown: InputTeardown,
    inputs: Vec<InputDecl>,
    output_kind: OutputKind,
    on_shutdown: Option<Box<ShutdownFn>>,
}

/// What a transform does with an input that tears down.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InputTeardown {
    /// Tears its output down.
    Release,
    /// Tears its output down, and holds the input with a finalizer until the output is gone.
    Finalize,
    /// Transforms it as a running one: its output goes once it is destroyed.
    Ignore,
}

impl<In: Resource, Out: Resource + Default> Transform<In, Out> {
    /// A transform named `name`.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        map: impl Fn(&Typed<In>) -> Option<String> + Send + Sync + 'static,
        transform: impl Fn(&Typed<In>, &mut Typed<Out>) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        Self::build(name.into(), Box::new(map), without_ctx(transform))
    }

    /// A transform named `name` whose transform also gets the controller's
    /// context: to read the extra inputs declared with
    /// [`input`](Transform::input).
    ///
    /// ```
    /// use cosi::controller::Transform;
    /// # use cosi::prelude::*;
    /// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
    /// # pub struct HostnameSpec { pub hostname: String }
    /// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
    /// # pub struct HostnameStatus { pub hostname: String }
    /// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// # #[resource(type = "DomainSpecs.net.example.org", namespace = "network")]
    /// # pub struct DomainSpec { pub domain: String }
    /// // Each hostname, qualified by the domain of the same ID.
    /// let controller = Transform::<HostnameSpec, HostnameStatus>::with_ctx(
    ///     "hostname-status",
    ///     |spec| Some(spec.id().to_owned()),
    ///     |ctx, spec, status| {
    ///         Box::pin(async move {
    ///             let domain = ctx.get::<DomainSpec>(spec.id()).await?;
    ///             status.hostname = format!("{}.{}", spec.hostname, domain.domain);
    ///             Ok(())
    ///         })
    ///     },
    /// )
    /// .input::<DomainSpec>(InputKind::Weak);
    /// # let _ = controller;
    /// ```
    pub fn with_ctx(
        name: impl Into<Cow<'static, str>>,
        map: impl Fn(&Typed<In>) -> Option<String> + Send + Sync + 'static,
        transform: impl for<'a> Fn(&'a DynCtx, &'a Typed<In>, &'a mut Typed<Out>) -> BoxFuture<'a, Result<(), BoxError>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self::build(name.into(), Box::new(map), Box::new(transform))
    }

    fn build(name: Cow<'static, str>, map: Box<MapFn<In>>, transform: Box<TransformFn<In, Out>>) -> Self {
        Transform {
            name,
            map,
            transform,
            filter: ListOptions::default(),
            teardown: InputTeardown::Release,
            inputs: Vec::new(),
            output_kind: OutputKind::Exclusive,
            on_shutdown: None,
        }
    }

    /// Transforms only the inputs `filter` selects (by labels, by ID); the
    /// outputs of the others are torn down as if their inputs were gone.
    #[must_use]
    pub fn filter(mut self, filter: ListOptions) -> Self {
        self.filter = filter;
        self
    }

    /// Puts the controller's finalizer on every running input, removed once
    /// the input tears down and its output is gone. The input is then a
    /// strong input.
    #[must_use]
    pub fn input_finalizers(mut self) -> Self {
        self.teardown = InputTeardown::Finalize;
        self
    }

    /// Transforms a tearing-down input as a running one: its output stays
    /// until the input is destroyed.
    #[must_use]
    pub fn ignore_tearing_down(mut self) -> Self {
        self.teardown = InputTeardown::Ignore;
        self
    }

    /// Reads resources of type `T` too, as an input of `kind` (`Weak`,
    /// `Strong` or `DestroyReady`): the controller runs again when they
    /// change, and its transform may read them through its context.
    #[must_use]
    pub fn input<T: Resource>(mut self, kind: InputKind) -> Self {
        self.inputs.push(InputDecl::of::<T>(kind));
        self
    }

    /// Writes its outputs as `kind`: [`OutputKind::Shared`] lets other
    /// controllers write resources of `Out` too (each its own).
    #[must_use]
    pub fn output_kind(mut self, kind: OutputKind) -> Self {
        self.output_kind = kind;
        self
    }

    /// Runs `hook` with the controller's context once the runtime stops.
    #[must_use]
    pub fn on_shutdown(
        mut self,
        hook: impl for<'a> FnOnce(&'a DynCtx) -> BoxFuture<'a, ()> + Send + Sync + 'static,
    ) -> Self {
        self.on_shutdown = Some(Box::new(hook));
        self
    }

    /// The declaration the options make.
    fn declaration(&self) -> &'static Declaration {
        let kind = match self.teardown {
            InputTeardown::Finalize => InputKind::Strong,
            InputTeardown::Release | InputTeardown::Ignore => InputKind::Weak,
        };
        let inputs = [InputDecl::of::<In>(kind), InputDecl::of::<Out>(InputKind::DestroyReady)];
        let inputs = inputs.into_iter().chain(self.inputs.iter().copied()).collect();
        intern(Self::DECLARATION.name, inputs, vec![OutputDecl::of::<Out>(self.output_kind)], None)
    }

    async fn run(&self, ctx: &DynCtx) -> Result<(), BoxError> {
        let finalizer = ctx.name().to_owned();
        let mut releasing = Vec::new();
        let mut errors = Vec::new();
        for input in ctx.list_in::<In>(In::NAMESPACE, &self.filter).await? {
            let Some(id) = (self.map)(&input) else { continue };
            let output = Out::pointer(&id);
            let metadata = input.metadata();
            if metadata.phase() == Phase::TearingDown && self.teardown != InputTeardown::Ignore {
                if self.teardown == InputTeardown::Finalize && metadata.finalizers().has(&finalizer) {
                    releasing.push((metadata.pointer().clone(), output));
                }
                continue;
            }
            if self.teardown == InputTeardown::Finalize && !metadata.finalizers().has(&finalizer) {
                ctx.add_finalizers::<In>(metadata.pointer().clone(), &[&finalizer]).await?;
            }
            match write_output(ctx, &*self.transform, &input, output).await {
                Ok(()) => (),
                // The output of an earlier input with this ID is still tearing down: wait for it.
                Err(TransformError::State(error)) if error.is_phase_conflict() => (),
                Err(error) => errors.push(format!("transforming {}: {error}", metadata.pointer())),
            }
        }
        ctx.cleanup_outputs_in::<Out>(Out::NAMESPACE).await?;
        for (input, output) in releasing {
            match ctx.get_dynamic(&output).await {
                Err(error) if error.is_not_found() => ctx.remove_finalizers::<In>(input, &[&finalizer]).await?,
                Err(error) => return Err(error.into()),
                Ok(_) => (),
            }
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors.join("; ").into()),
        }
    }
}

impl<In: Resource, Out: Resource + Default> Declared for Transform<In, Out> {
    /// Without options; each instance registers with the declaration its options make.
    const DECLARATION: Declaration = Declaration {
        name: "Transform",
        inputs: &[InputDecl::of::<In>(InputKind::Strong), InputDecl::of::<Out>(InputKind::DestroyReady)],
        outputs: &[OutputDecl::of::<Out>(OutputKind::Exclusive)],
        concurrency: None,
    };
}

impl<In: Resource, Out: Resource + Default> Controller for Transform<In, Out> {
    fn name(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Outcome {
        self.run(ctx.dynamic()).await.into_outcome()
    }
}

impl<In: Resource, Out: Resource + Default> Register for Transform<In, Out> {
    fn registration(mut self) -> Registration {
        let declaration = self.declaration();
        let on_shutdown = self.on_shutdown.take();
        let registration = Registration::controller(self).with_declaration(declaration);
        match on_shutdown {
            Some(hook) => registration.on_shutdown(move |ctx| Box::pin(async move { hook(&ctx).await })),
            None => registration,
        }
    }
}
