//! The generic queue transform (`cosi::controller::QueueTransform`), case by
//! case as Go COSI's own test of it
//! (`pkg/controller/generic/qtransform/qtransform_test.go`), and the hooks of
//! queue controllers (Go's `QSettings.RunHook`/`ShutdownHook`) and the reset
//! of an item's backoff.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cosi::controller::{
    BoxError, Declaration, Declared, InputDecl, OutputDecl, OutputKind, QueueController, QueueTransform, Registration,
};
use cosi::prelude::*;
use cosi::runtime::{BackoffOptions, RuntimeOptions};
use cosi::testing::resources::{IntResource, StrResource};
use cosi::testing::runtime::eventually;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "As.qtransform-test.cosi.dev", namespace = "default")]
pub struct A {
    pub str: String,
    pub int: i64,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Bs.qtransform-test.cosi.dev", namespace = "default")]
pub struct B {
    pub out: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Auxes.qtransform-test.cosi.dev", namespace = "default")]
pub struct C {
    pub aux: i64,
}

const NAME: &str = "QTransformABCController";

/// Go's `NewABCController`: `<id>` becomes `transformed-<id>`, with the
/// auxiliary number of the `C` of the same ID, if any.
fn abc() -> QueueTransform<A, B> {
    QueueTransform::<A, B>::with_ctx(NAME, |ctx, a, b| {
        Box::pin(async move {
            b.out = format!("{:?}-{}", a.str, a.int);
            match ctx.get::<C>(a.id()).await {
                Ok(c) => b.out.push_str(&format!("-{}", c.aux)),
                Err(error) if error.is_not_found() => (),
                Err(error) => return Err(error.into()),
            }
            Ok(())
        })
    })
    .map_ids(|a| Some(format!("transformed-{}", a.id())), |b| b.trim_start_matches("transformed-").to_owned())
    .input::<C>(InputKind::Mapped, |c| vec![c.pointer.id().to_owned()])
}

async fn start(transform: QueueTransform<A, B>) -> (Arc<dyn State>, Runtime) {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(transform).expect("register");
    runtime.start().expect("start");
    for (id, str, int) in [("1", "foo", 1), ("2", "bar", 2), ("3", "baz", 3)] {
        state.create(Typed::new(id, A { str: str.into(), int }), CreateOptions::default()).await.expect("create");
    }
    runtime.settled().await;
    (state, runtime)
}

/// The outputs, as `(id, out, phase)`.
async fn outputs(state: &Arc<dyn State>) -> Vec<(String, String, Phase)> {
    let all = state.list::<B>(&ListOptions::default()).await.expect("list");
    all.iter().map(|b| (b.id().to_owned(), b.out.clone(), b.metadata().phase())).collect()
}

fn output(id: &str, out: &str) -> (String, String, Phase) {
    (id.to_owned(), out.to_owned(), Phase::Running)
}

async fn destroy(state: &Arc<dyn State>, runtime: &Runtime, id: &str) {
    state.teardown::<A>(id, TeardownOptions::default()).await.expect("teardown");
    runtime.settled().await;
}

/// `TestSimpleMap` and `TestRemappedInput`: outputs under mapped IDs, and a
/// mapped input queues the input it maps to, whose transform reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remapped_input() {
    let (state, runtime) = start(abc()).await;
    let expected = [
        output("transformed-1", r#""foo"-1"#),
        output("transformed-2", r#""bar"-2"#),
        output("transformed-3", r#""baz"-3"#),
    ];
    assert_eq!(outputs(&state).await, expected);

    for (id, aux) in [("1", 11), ("2", 22), ("4", 44)] {
        state.create(Typed::new(id, C { aux }), CreateOptions::default()).await.expect("create");
    }
    runtime.settled().await;
    let expected = [
        output("transformed-1", r#""foo"-1-11"#),
        output("transformed-2", r#""bar"-2-22"#),
        output("transformed-3", r#""baz"-3"#),
    ];
    assert_eq!(outputs(&state).await, expected);

    state.destroy::<C>("1", DestroyOptions::default()).await.expect("destroy");
    runtime.settled().await;
    assert_eq!(outputs(&state).await[0], output("transformed-1", r#""foo"-1"#));
    runtime.shutdown().await;
}

/// `TestDestroyWithIgnoreTeardownUntil`: the output of a tearing-down input
/// stays until only the named finalizers are left on the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_teardown_until() {
    let (state, runtime) = start(abc().ignore_teardown_until(["extra-finalizer"])).await;
    destroy(&state, &runtime, "1").await;
    assert!(state.get::<B>("transformed-1").await.is_err(), "no other finalizer: the output goes at once");

    let finalizers = ["extra-finalizer", "other-finalizer", "yet-another-finalizer"];
    state.add_finalizers::<A>("2", &finalizers).await.expect("add finalizers");
    destroy(&state, &runtime, "2").await;
    assert_eq!(outputs(&state).await[0], output("transformed-2", r#""bar"-2"#));

    state.remove_finalizers::<A>("2", &["other-finalizer"]).await.expect("remove");
    runtime.settled().await;
    assert_eq!(outputs(&state).await[0], output("transformed-2", r#""bar"-2"#));

    state.remove_finalizers::<A>("2", &["yet-another-finalizer"]).await.expect("remove");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, [output("transformed-3", r#""baz"-3"#)]);
    let input = state.get::<A>("2").await.expect("the input");
    assert_eq!(input.metadata().finalizers().iter().collect::<Vec<_>>(), ["extra-finalizer"]);
    runtime.shutdown().await;
}

/// `TestDestroyWithIgnoreTeardownWhile`: the output of a tearing-down input
/// stays while the input has one of the named finalizers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_teardown_while() {
    let (state, runtime) = start(abc().ignore_teardown_while(["extra-finalizer"])).await;
    state.add_finalizers::<A>("2", &["extra-finalizer", "other-finalizer"]).await.expect("add finalizers");
    destroy(&state, &runtime, "2").await;
    assert_eq!(outputs(&state).await[1], output("transformed-2", r#""bar"-2"#));

    state.remove_finalizers::<A>("2", &["extra-finalizer"]).await.expect("remove");
    runtime.settled().await;
    assert!(state.get::<B>("transformed-2").await.is_err(), "the output is gone");
    let input = state.get::<A>("2").await.expect("the input");
    assert_eq!(input.metadata().finalizers().iter().collect::<Vec<_>>(), ["other-finalizer"]);
    runtime.shutdown().await;
}

/// `TestDestroyOutputFinalizers`: the output of a torn-down input waits for
/// the finalizers others put on it, and the input for the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_waits_for_output_finalizers() {
    let (state, runtime) = start(abc()).await;
    state.add_finalizers::<B>("transformed-3", &["foo.cosi"]).await.expect("hold the output");
    destroy(&state, &runtime, "3").await;
    let held = state.get::<B>("transformed-3").await.expect("the output");
    assert_eq!(held.metadata().phase(), Phase::TearingDown);
    assert!(state.get::<A>("3").await.expect("the input").metadata().finalizers().has(NAME));

    state.remove_finalizers::<B>("transformed-3", &["foo.cosi"]).await.expect("release the output");
    runtime.settled().await;
    assert!(state.get::<B>("transformed-3").await.is_err(), "the output is gone");
    assert!(state.get::<A>("3").await.expect("the input").metadata().finalizers().is_empty());
    runtime.shutdown().await;
}

/// `TestOutputShared`, and the options in the declaration: the graph shows
/// the mapped input, the output kind and the concurrency.
#[test]
fn declaration_follows_the_options() {
    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(abc().output_kind(OutputKind::Shared).concurrency(3)).expect("register");
    let other = QueueTransform::<C, B>::new("cb", |_, _| Ok(())).output_kind(OutputKind::Shared);
    runtime.register(other).expect("a second shared writer");
    let graph = runtime.graph();
    // Inputs sorted by kind (namespace, type).
    let graphed = graph.controllers.iter().find(|controller| controller.name == NAME).expect("abc");
    let inputs: Vec<_> = graphed.inputs.iter().map(|input| (input.r#type.as_str(), input.kind)).collect();
    assert_eq!(
        inputs,
        [(A::TYPE, InputKind::Primary), (C::TYPE, InputKind::Mapped), (B::TYPE, InputKind::MappedDestroyReady)]
    );
    assert_eq!(graphed.outputs[0].kind, OutputKind::Shared);
    let refused = runtime.register(abc().concurrency(0)).expect_err("no concurrency");
    assert!(refused.to_string().contains("concurrency"), "{refused}");
}

/// A queue controller with hooks: its start hook fails once, then writes
/// `started`; its shutdown hook writes `stopped`.
struct Hooked {
    starts: Arc<AtomicUsize>,
}

impl Declared for Hooked {
    const DECLARATION: Declaration = Declaration {
        name: "hooked",
        inputs: &[InputDecl::of::<IntResource>(InputKind::Primary)],
        outputs: &[OutputDecl::of::<StrResource>(OutputKind::Exclusive)],
        concurrency: Some(1),
    };
}

impl QueueController for Hooked {
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed("hooked")
    }

    async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) -> cosi::controller::Outcome {
        cosi::controller::Outcome::Done(Requeue::Never)
    }

    async fn on_start(&self, ctx: &Ctx<Self>) -> Result<(), BoxError> {
        if self.starts.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err("not yet".into());
        }
        write(ctx, "started").await?;
        Ok(())
    }

    async fn on_shutdown(&self, ctx: &Ctx<Self>) {
        write(ctx, "stopped").await.expect("write on shutdown");
    }
}

/// A hand-written controller has no typed access: it writes through the dynamic context.
async fn write(ctx: &Ctx<Hooked>, id: &str) -> cosi::Result<()> {
    let pointer = StrResource::pointer(id);
    let written = ctx.dynamic().try_modify::<StrResource, cosi::Error>(pointer, |str| {
        str.value = "yes".into();
        Ok(())
    });
    written.await.map(drop)
}

impl Register for Hooked {
    fn registration(self) -> Registration {
        Registration::queue(self)
    }
}

/// The start hook runs at start, again after a failure; the shutdown hook
/// once the runtime stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_and_shutdown_hooks() {
    let state = cosi::state::memory();
    let mut options = RuntimeOptions::default();
    options.backoff = fast_backoff();
    let runtime = Runtime::with_options(state.clone(), options);
    let starts = Arc::new(AtomicUsize::new(0));
    runtime.register(Hooked { starts: Arc::clone(&starts) }).expect("register");
    runtime.start().expect("start");
    eventually("the start hook's write", || async { state.get::<StrResource>("started").await }).await;
    assert_eq!(starts.load(Ordering::SeqCst), 2, "one failure, one success, then no more");
    assert!(state.get::<StrResource>("stopped").await.is_err(), "not stopped yet");
    runtime.shutdown().await;
    assert_eq!(state.get::<StrResource>("stopped").await.expect("the shutdown hook's write").value, "yes");
}

/// Fails every time; resets its item's backoff first when `reset` is set.
#[controller(inputs = [Primary<IntResource>], inventory = false)]
struct Failing {
    reset: bool,
    attempts: Arc<AtomicUsize>,
}

impl Failing {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<(), BoxError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.reset {
            ctx.reset_backoff(item);
        }
        Err("always".into())
    }
}

fn fast_backoff() -> BackoffOptions {
    BackoffOptions { initial: Duration::from_millis(20), multiplier: 4.0, jitter: 0.0, max: Duration::from_secs(10) }
}

/// An item whose reconcile resets its backoff is retried after the first
/// delay each time; one that does not, after ever longer ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_backoff_retries_after_the_first_delay() {
    let state = cosi::state::memory();
    let mut options = RuntimeOptions::default();
    options.backoff = fast_backoff();
    let runtime = Runtime::with_options(state.clone(), options);
    let (reset, kept) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    runtime.register(Failing { reset: true, attempts: Arc::clone(&reset) }.named("resetting")).expect("register");
    runtime.register(Failing { reset: false, attempts: Arc::clone(&kept) }.named("backing-off")).expect("register");
    runtime.start().expect("start");
    state.create(Typed::new("1", IntResource { value: 1 }), CreateOptions::default()).await.expect("create");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (reset, kept) = (reset.load(Ordering::SeqCst), kept.load(Ordering::SeqCst));
    // Backing off: tries at 0, 20, 100 and 420 ms, then at 1700 ms.
    assert!(kept <= 5, "{kept} attempts while backing off");
    assert!(reset >= 2 * kept, "{reset} attempts with resets, {kept} without");
    runtime.shutdown().await;
}
