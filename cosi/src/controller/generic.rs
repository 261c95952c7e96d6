//! Reusable controllers, as COSI has them: [`Transform`] (each resource of
//! one type becomes a resource of another), its queue-based variant
//! [`QueueTransform`], and [`Merge`] (layered specs merged into one).
//!
//! They are generic over their resource types, so `#[controller]` cannot
//! declare them; they implement the traits by hand and use
//! [`Ctx::dynamic`], whose checks run at run time.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use crate::controller::{
    BoxError, Controller, Ctx, Declaration, Declared, Input, InputDecl, InputKind, IntoOutcome, Outcome, OutputDecl,
    OutputKind, QueueController, ReducedMetadata, Register, Registration,
};
use crate::resource::{Phase, Pointer, Resource, Typed};
use crate::state::{Error, ListOptions};

type MapFn<In> = dyn Fn(&Typed<In>) -> Option<String> + Send + Sync;
type TransformFn<In, Out> = dyn Fn(&Typed<In>, &mut Typed<Out>) -> Result<(), BoxError> + Send + Sync;

/// Each resource of type `In` becomes the resource of type `Out` that `map`
/// names (an ID in `Out`'s namespace; `None` skips the input), its spec
/// written by `transform`. Outputs whose input is gone are torn down and
/// destroyed; with [`input_finalizers`](Transform::input_finalizers), inputs
/// carry the controller's finalizer until their output is gone.
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
    input_finalizers: bool,
}

impl<In: Resource, Out: Resource + Default> Transform<In, Out> {
    /// A transform named `name`.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        map: impl Fn(&Typed<In>) -> Option<String> + Send + Sync + 'static,
        transform: impl Fn(&Typed<In>, &mut Typed<Out>) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        Transform { name: name.into(), map: Box::new(map), transform: Box::new(transform), input_finalizers: false }
    }

    /// Puts the controller's finalizer on every running input, removed once
    /// the input tears down and its output is gone.
    pub fn input_finalizers(mut self) -> Self {
        self.input_finalizers = true;
        self
    }
}

impl<In: Resource, Out: Resource + Default> Declared for Transform<In, Out> {
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
        self.run(ctx).await.into_outcome()
    }
}

impl<In: Resource, Out: Resource + Default> Register for Transform<In, Out> {
    fn registration(self) -> Registration {
        Registration::controller(self)
    }
}

impl<In: Resource, Out: Resource + Default> Transform<In, Out> {
    async fn run(&self, ctx: &Ctx<Self>) -> Result<(), BoxError> {
        let ctx = ctx.dynamic();
        let finalizer = ctx.name().to_owned();
        let mut releasing = Vec::new();
        let mut errors = Vec::new();
        for input in ctx.list_in::<In>(In::NAMESPACE, &ListOptions::default()).await? {
            let Some(id) = (self.map)(&input) else { continue };
            let output = Out::pointer(&id);
            match input.metadata().phase() {
                Phase::Running => {
                    if self.input_finalizers && !input.metadata().finalizers().has(&finalizer) {
                        ctx.add_finalizers::<In>(input.metadata().pointer().clone(), &[&finalizer]).await?;
                    }
                    let written = ctx
                        .try_modify::<Out, TransformError>(output, |out| {
                            (self.transform)(&input, out).map_err(TransformError::Transform)
                        })
                        .await;
                    match written {
                        Ok(_) => (),
                        // The output of an earlier input with this ID is still tearing down: wait for it.
                        Err(TransformError::State(error)) if error.is_phase_conflict() => (),
                        Err(error) => errors.push(format!("transforming {}: {error}", input.metadata().pointer())),
                    }
                }
                Phase::TearingDown if input.metadata().finalizers().has(&finalizer) => {
                    releasing.push((input.metadata().pointer().clone(), output));
                }
                Phase::TearingDown => (),
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

/// A transform's error: the state's, or the transform function's.
#[derive(Debug, thiserror::Error)]
enum TransformError {
    #[error(transparent)]
    State(#[from] Error),
    #[error("{0}")]
    Transform(BoxError),
}

/// [`Transform`] as a queue controller: one input at a time, up to
/// `concurrency` at once, each with its own backoff. Inputs always carry the
/// controller's finalizer, and an output's ID is its input's.
pub struct QueueTransform<In, Out, const CONCURRENCY: usize = 1> {
    name: Cow<'static, str>,
    transform: Box<TransformFn<In, Out>>,
    _types: PhantomData<fn() -> (In, Out)>,
}

impl<In: Resource, Out: Resource + Default, const CONCURRENCY: usize> QueueTransform<In, Out, CONCURRENCY> {
    /// A queue transform named `name`.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        transform: impl Fn(&Typed<In>, &mut Typed<Out>) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        QueueTransform { name: name.into(), transform: Box::new(transform), _types: PhantomData }
    }
}

impl<In: Resource, Out: Resource + Default, const CONCURRENCY: usize> Declared
    for QueueTransform<In, Out, CONCURRENCY>
{
    const DECLARATION: Declaration = Declaration {
        name: "QueueTransform",
        inputs: &[InputDecl::of::<In>(InputKind::Primary), InputDecl::of::<Out>(InputKind::MappedDestroyReady)],
        outputs: &[OutputDecl::of::<Out>(OutputKind::Exclusive)],
        concurrency: Some(CONCURRENCY),
    };
}

impl<In: Resource, Out: Resource + Default, const CONCURRENCY: usize> QueueController
    for QueueTransform<In, Out, CONCURRENCY>
{
    fn name(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Outcome {
        self.run(ctx, item).await.into_outcome()
    }

    async fn map(&self, _ctx: &Ctx<Self>, input: &ReducedMetadata) -> Result<Vec<Pointer>, BoxError> {
        Ok(vec![In::pointer(input.pointer.id())])
    }
}

impl<In: Resource, Out: Resource + Default, const CONCURRENCY: usize> Register
    for QueueTransform<In, Out, CONCURRENCY>
{
    fn registration(self) -> Registration {
        Registration::queue(self)
    }
}

impl<In: Resource, Out: Resource + Default, const CONCURRENCY: usize> QueueTransform<In, Out, CONCURRENCY> {
    async fn run(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<(), BoxError> {
        let ctx = ctx.dynamic();
        let input = match ctx.get::<In>(item.clone()).await {
            Ok(input) => input,
            Err(error) if error.is_not_found() => return Ok(()),
            Err(error) => return Err(error.into()),
        };
        let finalizer = ctx.name().to_owned();
        let output = Out::pointer(item.id());
        match input.metadata().phase() {
            Phase::Running => {
                if !input.metadata().finalizers().has(&finalizer) {
                    ctx.add_finalizers::<In>(item.clone(), &[&finalizer]).await?;
                }
                ctx.try_modify::<Out, TransformError>(output, |out| {
                    (self.transform)(&input, out).map_err(TransformError::Transform)
                })
                .await?;
            }
            Phase::TearingDown => match ctx.teardown::<Out>(output.clone()).await {
                Ok(true) => {
                    ctx.destroy::<Out>(output).await?;
                    ctx.remove_finalizers::<In>(item.clone(), &[&finalizer]).await?;
                }
                Ok(false) => (),
                Err(error) if error.is_not_found() => ctx.remove_finalizers::<In>(item.clone(), &[&finalizer]).await?,
                Err(error) => return Err(error.into()),
            },
        }
        Ok(())
    }
}

type LayerFn<T> = dyn Fn(&Typed<T>) -> (String, i64) + Send + Sync;
type MergeFn<T> = dyn Fn(&mut T, &T) + Send + Sync;

/// Merges layered specs: resources of type `T` in a source namespace, each
/// naming the output it contributes to and its layer (say defaults 0,
/// configuration 10, DHCP 20), become one resource per output ID in a target
/// namespace, the layers applied from the lowest to the highest with `merge`
/// (by default, the highest layer wins outright), as Talos merges network
/// specs from several sources.
///
/// A merged output whose layers are all gone is torn down, and destroyed as
/// soon as nobody holds it: the controller reads its own outputs as a
/// destroy-ready input, so a consumer that keeps one with a finalizer (a
/// strong input) releases it by removing the finalizer, and the output goes
/// at once (Talos' `GenericMergeController`: tear down, destroy when ready,
/// else wait for the destroy-ready event). A layer that comes back for an
/// output still tearing down gets a new output once the old one is gone.
///
/// Its registration ([`Register`]) gives it its real inputs: `T` in the
/// source namespace (weak) and `T` in the target namespace (destroy-ready).
/// The two namespaces must differ.
///
/// ```
/// use cosi::controller::Merge;
/// use cosi::prelude::*;
///
/// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// pub struct HostnameSpec {
///     pub hostname: String,
///     /// The layer, on the unmerged specs.
///     pub layer: i64,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// let runtime = Runtime::new(state.clone());
/// // `network-config` holds `<layer>/hostname`; `network` gets the merged `hostname`.
/// let merge = Merge::<HostnameSpec>::new("hostname-merge", "network-config", "network", |spec| {
///     let id = spec.id().split_once('/').map_or(spec.id(), |(_, id)| id);
///     (id.to_owned(), spec.layer)
/// })
/// .with_merge(|merged, layer| {
///     if !layer.hostname.is_empty() {
///         merged.hostname.clone_from(&layer.hostname);
///     }
/// });
/// runtime.register(merge)?;
/// runtime.start()?;
///
/// for (id, hostname, layer) in [("default/hostname", "localhost", 0), ("configuration/hostname", "talos", 10)] {
///     let spec = Typed::new_in("network-config", id, HostnameSpec { hostname: hostname.into(), layer });
///     state.create(spec, CreateOptions::default()).await?;
/// }
/// runtime.settled().await;
/// let merged = state.get::<HostnameSpec>("hostname").await?;
/// assert_eq!(merged.hostname, "talos");
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Merge<T> {
    name: Cow<'static, str>,
    source: String,
    target: String,
    layer: Box<LayerFn<T>>,
    merge: Box<MergeFn<T>>,
}

/// The placeholder source namespace in [`Merge`]'s declaration; each instance
/// reads its own source namespace instead, given at its registration.
pub const MERGE_SOURCE: &str = "merge-source";

impl<T: Resource + Default> Merge<T> {
    /// A merge named `name` of the layers in `source` into `target`; `layer`
    /// returns the output ID and the layer of a resource.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        source: impl Into<String>,
        target: impl Into<String>,
        layer: impl Fn(&Typed<T>) -> (String, i64) + Send + Sync + 'static,
    ) -> Self {
        Merge {
            name: name.into(),
            source: source.into(),
            target: target.into(),
            layer: Box::new(layer),
            merge: Box::new(|merged: &mut T, layer: &T| *merged = layer.clone()),
        }
    }

    /// Applies a layer over the lower ones with `merge` instead of replacing them.
    pub fn with_merge(mut self, merge: impl Fn(&mut T, &T) + Send + Sync + 'static) -> Self {
        self.merge = Box::new(merge);
        self
    }

    async fn run(&self, ctx: &Ctx<Self>) -> Result<(), BoxError> {
        let ctx = ctx.dynamic();
        let mut layers: BTreeMap<String, Vec<(i64, Typed<T>)>> = BTreeMap::new();
        for resource in ctx.list_in::<T>(&self.source, &ListOptions::default()).await? {
            if resource.metadata().phase() == Phase::TearingDown {
                continue;
            }
            let (id, layer) = (self.layer)(&resource);
            layers.entry(id).or_default().push((layer, resource));
        }
        for (id, mut specs) in layers {
            specs.sort_by_key(|(layer, _)| *layer);
            let mut merged = T::default();
            for (_, layer) in &specs {
                (self.merge)(&mut merged, layer.spec());
            }
            let output = Pointer::new(&self.target, T::TYPE, &id);
            let written = ctx
                .try_modify::<T, Error>(output, |out| {
                    *out.spec_mut() = merged.clone();
                    Ok(())
                })
                .await;
            match written {
                Ok(_) => (),
                // The previous output with this ID is still tearing down: the
                // cleanup below destroys it once it is released, and its
                // destroy wakes this controller to write the new one.
                Err(error) if error.is_phase_conflict() => (),
                Err(error) => return Err(error.into()),
            }
        }
        ctx.cleanup_outputs_in::<T>(&self.target).await?;
        Ok(())
    }
}

impl<T: Resource + Default> Declared for Merge<T> {
    const DECLARATION: Declaration = Declaration {
        name: "Merge",
        inputs: &[
            InputDecl::of::<T>(InputKind::Weak).in_namespace(MERGE_SOURCE),
            InputDecl::of::<T>(InputKind::DestroyReady),
        ],
        outputs: &[OutputDecl::of::<T>(OutputKind::Shared)],
        concurrency: None,
    };
}

impl<T: Resource + Default> Controller for Merge<T> {
    fn name(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Outcome {
        self.run(ctx).await.into_outcome()
    }
}

impl<T: Resource + Default> Register for Merge<T> {
    /// The merge with its real inputs: the layers in the source namespace,
    /// and its own outputs in the target namespace, destroy-ready.
    fn registration(self) -> Registration {
        let inputs = [
            Input::of::<T>(InputKind::Weak).in_namespace(&self.source),
            Input::of::<T>(InputKind::DestroyReady).in_namespace(&self.target),
        ];
        Registration::controller(self).with_inputs(inputs)
    }
}
