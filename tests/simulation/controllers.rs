//! The controllers of a simulated system: two generic ones of this test
//! (`Fold`, a reconcile controller, and `Queued`, a queue controller), each
//! instantiated per output type and given its inputs at registration, and
//! the library's own `Transform`, `QueueTransform` and `Merge`. Every one
//! computes its outputs as the model in `system.rs` does, and asks
//! [`Faults`] whether to be slow, fail or panic.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cosi::controller::{
    BoxError, Controller, Declaration, Declared, DynCtx, IntoOutcome, Merge, Outcome, OutputDecl, OutputKind,
    QueueController, QueueTransform, ReducedMetadata, Register, Registration, Requeue, Transform, Waker,
};
use cosi::prelude::*;
use cosi::state::Error;
use cosi::{RuntimeError, RuntimeHandle};
use parking_lot::Mutex;

use crate::faults::Faults;
use crate::system::{Logic, Node, Outside, System, layer_base, mix, selector_kind};
use crate::trace::Trace;
use crate::types::{Sh, SimSpec, Src, Stage, StageVisitor, every_input, same, value_of, visit_stage};

/// Registers the controller of `node`.
pub fn register(
    runtime: &RuntimeHandle,
    node: &Node,
    faults: &Arc<Faults>,
    trace: &Arc<Trace>,
    outside: &OutsideWorld,
) -> Result<(), RuntimeError> {
    let stage = node.output.namespace().strip_prefix("stage").and_then(|index| index.parse::<usize>().ok());
    let context = Context {
        node: node.clone(),
        faults: Arc::clone(faults),
        trace: Arc::clone(trace),
        outside: outside.0.get(&node.name).cloned(),
    };
    match (&node.logic, stage) {
        (Logic::Fold { .. }, None) => runtime.register(Fold::<Sh>::new(context)),
        (Logic::Queue { .. }, None) => runtime.register(Queued::<Sh>::new(context)),
        (Logic::Merge { source }, _) => {
            let layer = |resource: &Typed<Sh>| (layer_base(resource.id()).to_owned(), resource.spec().layer);
            runtime.register(Merge::<Sh>::new(node.name.clone(), source.namespace(), node.output.namespace(), layer))
        }
        (_, Some(stage)) => visit_stage(stage, Registrar { runtime, context }),
        // The generator gives transforms a stage to write, always.
        (Logic::Transform { .. } | Logic::QueueTransform { .. }, None) => {
            panic!("{}: the generator made a transform that writes no stage", node.name)
        }
    }
}

/// Registers the controller of a node whose output is a stage, given the stage's type.
struct Registrar<'a> {
    runtime: &'a RuntimeHandle,
    context: Context,
}

impl StageVisitor for Registrar<'_> {
    type Output = Result<(), RuntimeError>;

    fn visit<Out: Stage>(self) -> Self::Output {
        let Registrar { runtime, context } = self;
        match context.node.logic.clone() {
            Logic::Fold { .. } => runtime.register(Fold::<Out>::new(context)),
            Logic::Queue { .. } => runtime.register(Queued::<Out>::new(context)),
            Logic::Transform { input, finalizers } if input == Src::kind() => {
                runtime.register(transform::<Src, Out>(&context, finalizers))
            }
            Logic::Transform { finalizers, .. } => {
                runtime.register(transform::<Out::Previous, Out>(&context, finalizers))
            }
            Logic::QueueTransform { input } if input == Src::kind() => {
                runtime.register(queue_transform::<Src, Out>(&context))
            }
            Logic::QueueTransform { .. } => runtime.register(queue_transform::<Out::Previous, Out>(&context)),
            // The generator gives merges shares to write, never a stage.
            Logic::Merge { .. } => panic!("{}: the generator made a merge that writes a stage", context.node.name),
        }
    }
}

/// What every simulated controller carries.
#[derive(Clone)]
struct Context {
    node: Node,
    faults: Arc<Faults>,
    trace: Arc<Trace>,
    outside: Option<Arc<Slot>>,
}

impl Context {
    /// The controller's value from outside the state (0 when it reads
    /// none). A woken controller hands out its waker first, so that any
    /// change made after this read wakes it.
    fn outside(&self, ctx: &DynCtx) -> u64 {
        let Some(slot) = &self.outside else { return 0 };
        if self.node.outside == Outside::Woken {
            *slot.waker.lock() = Some(ctx.waker());
        }
        slot.value.load(Ordering::SeqCst)
    }

    /// When it looks at everything again, though nothing changed.
    fn requeue(&self) -> Requeue {
        match self.node.outside {
            Outside::Polled(after) => Requeue::After(after),
            Outside::None | Outside::Woken => Requeue::Never,
        }
    }
}

/// The controllers' values from outside the state, by controller name (the
/// world around a machine: a file, a device), and the wakers the woken ones
/// handed out.
pub struct OutsideWorld(BTreeMap<String, Arc<Slot>>);

#[derive(Default)]
pub struct Slot {
    value: AtomicU64,
    waker: Mutex<Option<Waker>>,
}

impl OutsideWorld {
    /// A value of 0 for every controller of `system` that reads one.
    pub fn new(system: &System) -> Self {
        let reads = system.nodes.iter().filter(|node| node.outside != Outside::None);
        OutsideWorld(reads.map(|node| (node.name.clone(), Arc::default())).collect())
    }

    /// The controllers that read a value from outside.
    pub fn controllers(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }

    pub fn values(&self) -> BTreeMap<String, u64> {
        self.0.iter().map(|(name, slot)| (name.clone(), slot.value.load(Ordering::SeqCst))).collect()
    }

    /// Changes `controller`'s value and wakes it, if it handed out a waker;
    /// whether it did.
    pub fn change(&self, controller: &str, value: u64) -> bool {
        let Some(slot) = self.0.get(controller) else { return false };
        slot.value.store(value, Ordering::SeqCst);
        let waker = slot.waker.lock().clone();
        waker.map(|waker| waker.wake()).is_some()
    }
}

fn transform<In: SimSpec, Out: SimSpec>(context: &Context, finalizers: bool) -> Transform<In, Out> {
    let Context { node, faults, .. } = context.clone();
    let (name, salt) = (node.name.clone(), node.salt);
    let transform = Transform::new(
        node.name,
        |input: &Typed<In>| Some(input.id().to_owned()),
        move |input: &Typed<In>, out: &mut Typed<Out>| {
            faults.decide(&name)?;
            let (value, layer) = mix(salt, input.spec().value());
            out.spec_mut().set(value, layer);
            Ok(())
        },
    );
    match finalizers {
        true => transform.input_finalizers(),
        false => transform,
    }
}

fn queue_transform<In: SimSpec, Out: SimSpec>(context: &Context) -> QueueTransform<In, Out> {
    let Context { node, faults, .. } = context.clone();
    let (name, salt) = (node.name.clone(), node.salt);
    QueueTransform::new(node.name, move |input: &Typed<In>, out: &mut Typed<Out>| {
        faults.decide(&name)?;
        let (value, layer) = mix(salt, input.spec().value());
        out.spec_mut().set(value, layer);
        Ok(())
    })
    .concurrency(2)
}

/// `Shares` has shared writers only; each stage one exclusive writer.
const fn output_kind<Out: Resource>() -> OutputKind {
    match same(Out::TYPE, Sh::TYPE) {
        true => OutputKind::Shared,
        false => OutputKind::Exclusive,
    }
}

fn input_of(kind: &Kind, dependency: InputKind) -> Input {
    Input { kind: kind.clone(), id: None, dependency }
}

/// A reconcile controller: see [`Logic::Fold`].
struct Fold<Out> {
    context: Context,
    _out: PhantomData<fn() -> Out>,
}

impl<Out: SimSpec> Fold<Out> {
    fn new(context: Context) -> Self {
        Fold { context, _out: PhantomData }
    }

    fn logic(&self) -> (&[Kind], &[Kind], Option<&[Kind]>) {
        match &self.context.node.logic {
            Logic::Fold { strong, weak, alternative } => (strong, weak, alternative.as_deref()),
            _ => (&[], &[], None),
        }
    }

    fn selector(&self) -> String {
        format!("sel-{}", self.context.node.name)
    }

    /// Its inputs, with the alternative weak ones or not.
    fn inputs(&self, alternative: bool) -> Vec<Input> {
        let (strong, weak, switch) = self.logic();
        let weak = match (alternative, switch) {
            (true, Some(switch)) => switch,
            _ => weak,
        };
        let mut inputs: Vec<Input> = strong.iter().map(|kind| input_of(kind, InputKind::Strong)).collect();
        inputs.extend(weak.iter().map(|kind| input_of(kind, InputKind::Weak)));
        inputs.push(input_of(&self.context.node.output, InputKind::DestroyReady));
        if switch.is_some() {
            inputs.push(input_of(&selector_kind(), InputKind::Weak).with_id(self.selector()));
        }
        inputs
    }

    async fn run(&self, ctx: &DynCtx) -> Result<Requeue, BoxError> {
        let Context { node, faults, trace, .. } = &self.context;
        trace.log(format_args!("reconcile {}", node.name));
        faults.reconcile(&node.name).await?;
        let (strong, _, switch) = self.logic();
        let alternative = match switch {
            None => false,
            Some(_) => match ctx.get_dynamic(&selector_kind().pointer(self.selector())).await {
                Ok(selector) => {
                    selector.metadata().phase() == Phase::Running
                        && value_of(&selector).is_some_and(|(value, _)| value % 2 == 1)
                }
                Err(error) if error.is_not_found() => false,
                Err(error) => return Err(error.into()),
            },
        };
        let inputs = self.inputs(alternative);
        ctx.update_inputs(inputs.iter().cloned())?;
        let outside = self.context.outside(ctx);
        let finalizer = node.name.as_str();
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        let mut release = Vec::new();
        for input in inputs.iter().filter(|input| matches!(input.dependency, InputKind::Strong | InputKind::Weak)) {
            if input.id.is_some() {
                continue; // The selector.
            }
            let holds = strong.contains(&input.kind);
            for resource in ctx.list_dynamic(&input.kind, &ListOptions::default()).await? {
                let metadata = resource.metadata();
                match metadata.phase() {
                    Phase::Running => {
                        if holds && !metadata.finalizers().has(finalizer) {
                            ctx.add_finalizers_dynamic(metadata.pointer(), &[finalizer]).await?;
                        }
                        let (value, _) = value_of(&resource).ok_or("a spec that does not decode")?;
                        let sum = sums.entry(metadata.id().to_owned()).or_default();
                        *sum = sum.wrapping_add(value);
                    }
                    Phase::TearingDown if holds && metadata.finalizers().has(finalizer) => {
                        release.push(metadata.pointer().clone());
                    }
                    Phase::TearingDown => (),
                }
            }
        }
        for (id, sum) in sums {
            let (value, layer) = mix(node.salt, sum.wrapping_add(outside));
            let output = node.output.pointer(&id);
            let written = ctx
                .try_modify::<Out, Error>(output, |out| {
                    out.spec_mut().set(value, layer);
                    Ok(())
                })
                .await;
            match written {
                Ok(_) => (),
                // The output of an earlier input with this ID is still tearing
                // down: the cleanup destroys it once it is released, and its
                // destroy wakes this controller again.
                Err(error) if error.is_phase_conflict() => (),
                Err(error) => return Err(error.into()),
            }
        }
        ctx.cleanup_outputs_dynamic(&node.output).await?;
        for pointer in release {
            ctx.remove_finalizers_dynamic(&pointer, &[finalizer]).await?;
        }
        Ok(self.context.requeue())
    }
}

impl<Out: SimSpec> Declared for Fold<Out> {
    const DECLARATION: Declaration = Declaration {
        name: "SimFold",
        inputs: &every_input::<Out>(InputKind::Weak, InputKind::Weak, InputKind::DestroyReady),
        outputs: &[OutputDecl::of::<Out>(output_kind::<Out>())],
        concurrency: None,
    };
}

impl<Out: SimSpec> Controller for Fold<Out> {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(self.context.node.name.clone())
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Outcome {
        self.run(ctx.dynamic()).await.into_outcome()
    }
}

impl<Out: SimSpec> Register for Fold<Out> {
    fn registration(self) -> Registration {
        let inputs = self.inputs(false);
        Registration::controller(self).with_inputs(inputs)
    }
}

/// A queue controller: see [`Logic::Queue`].
struct Queued<Out> {
    context: Context,
    _out: PhantomData<fn() -> Out>,
}

impl<Out: SimSpec> Queued<Out> {
    fn new(context: Context) -> Self {
        Queued { context, _out: PhantomData }
    }

    fn logic(&self) -> (Option<&Kind>, &[Kind]) {
        match &self.context.node.logic {
            Logic::Queue { primary, mapped } => (Some(primary), mapped),
            _ => (None, &[]),
        }
    }

    fn inputs(&self) -> Vec<Input> {
        let (primary, mapped) = self.logic();
        let mut inputs: Vec<Input> = primary.iter().map(|kind| input_of(kind, InputKind::Primary)).collect();
        inputs.extend(mapped.iter().map(|kind| input_of(kind, InputKind::Mapped)));
        inputs.push(input_of(&self.context.node.output, InputKind::MappedDestroyReady));
        inputs
    }

    async fn run(&self, ctx: &DynCtx, item: &Pointer) -> Result<Requeue, BoxError> {
        let Context { node, faults, trace, .. } = &self.context;
        trace.log(format_args!("reconcile {} {}", node.name, item.id()));
        faults.reconcile(&node.name).await?;
        let (_, mapped) = self.logic();
        let finalizer = node.name.as_str();
        let output = node.output.pointer(item.id());
        let primary = match ctx.get_dynamic(item).await {
            Ok(primary) => Some(primary),
            Err(error) if error.is_not_found() => None,
            Err(error) => return Err(error.into()),
        };
        let running = primary.as_ref().filter(|primary| primary.metadata().phase() == Phase::Running);
        let Some(primary) = running else {
            // Gone or going: the output goes first, then the finalizer.
            let ready = match ctx.teardown_dynamic(&output).await {
                Ok(ready) => ready,
                Err(error) if error.is_not_found() => true,
                Err(error) => return Err(error.into()),
            };
            if ready {
                match ctx.destroy_dynamic(&output).await {
                    Ok(()) => (),
                    Err(error) if error.is_not_found() => (),
                    Err(error) => return Err(error.into()),
                }
                if primary.is_some() {
                    ctx.remove_finalizers_dynamic(item, &[finalizer]).await?;
                }
            }
            return Ok(Requeue::Never);
        };
        if !primary.metadata().finalizers().has(finalizer) {
            ctx.add_finalizers_dynamic(item, &[finalizer]).await?;
        }
        let (value, _) = value_of(primary).ok_or("a spec that does not decode")?;
        let mut sum = value.wrapping_add(self.context.outside(ctx));
        for kind in mapped {
            match ctx.get_dynamic(&kind.pointer(item.id())).await {
                Ok(resource) if resource.metadata().phase() == Phase::Running => {
                    let (value, _) = value_of(&resource).ok_or("a spec that does not decode")?;
                    sum = sum.wrapping_add(value);
                }
                Ok(_) => (),
                Err(error) if error.is_not_found() => (),
                Err(error) => return Err(error.into()),
            }
        }
        let (value, layer) = mix(node.salt, sum);
        let write = || {
            ctx.try_modify::<Out, Error>(output.clone(), |out| {
                out.spec_mut().set(value, layer);
                Ok(())
            })
        };
        match write().await {
            Ok(_) => Ok(self.context.requeue()),
            // The output of an earlier primary with this ID is still tearing
            // down: destroy it once released (its destroy-ready change maps
            // back to this item), then write the new one.
            Err(error) if error.is_phase_conflict() => {
                let old = ctx.get_dynamic(&output).await?;
                if !old.metadata().finalizers().is_empty() {
                    return Ok(Requeue::Never);
                }
                ctx.destroy_dynamic(&output).await?;
                write().await?;
                Ok(self.context.requeue())
            }
            Err(error) => Err(error.into()),
        }
    }
}

impl<Out: SimSpec> Declared for Queued<Out> {
    const DECLARATION: Declaration = Declaration {
        name: "SimQueue",
        inputs: &every_input::<Out>(InputKind::Primary, InputKind::Mapped, InputKind::MappedDestroyReady),
        outputs: &[OutputDecl::of::<Out>(output_kind::<Out>())],
        concurrency: Some(2),
    };
}

impl<Out: SimSpec> QueueController for Queued<Out> {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(self.context.node.name.clone())
    }

    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Outcome {
        self.run(ctx.dynamic(), item).await.into_outcome()
    }

    async fn map(&self, _ctx: &Ctx<Self>, input: &ReducedMetadata) -> Result<Vec<Pointer>, BoxError> {
        let (primary, _) = self.logic();
        Ok(primary.map(|kind| kind.pointer(input.pointer.id())).into_iter().collect())
    }
}

impl<Out: SimSpec> Register for Queued<Out> {
    fn registration(self) -> Registration {
        let inputs = self.inputs();
        Registration::queue(self).with_inputs(inputs)
    }
}
