//! [`Merge`]: layered specs merged into one.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::controller::{
    BoxError, Controller, Ctx, Declaration, Declared, Input, InputDecl, InputKind, IntoOutcome, Outcome, OutputDecl,
    OutputKind, Register, Registration,
};
use crate::resource::{Phase, Pointer, Resource, Typed};
use crate::state::{Error, ListOptions};

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
