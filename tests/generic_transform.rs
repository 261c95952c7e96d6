//! The generic transform (`cosi::controller::Transform`), case by case as Go
//! COSI's own test of it (`pkg/controller/generic/transform/transform_test.go`):
//! each test names the Go test it follows.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cosi::controller::{OutputKind, Transform};
use cosi::prelude::*;
use cosi::testing::runtime::eventually;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "As.transform-test.cosi.dev", namespace = "default")]
pub struct A {
    pub str: String,
    pub int: i64,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Bs.transform-test.cosi.dev", namespace = "default")]
pub struct B {
    pub out: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Suffixes.transform-test.cosi.dev", namespace = "default")]
pub struct Suffix {
    pub suffix: String,
}

/// Go's `NewABController`: `<id>` becomes `transformed-<id>`, but for
/// `skip-me`; a negative number fails the transform.
fn ab(name: &'static str) -> Transform<A, B> {
    Transform::<A, B>::new(
        name,
        |a| (a.id() != "skip-me").then(|| format!("transformed-{}", a.id())),
        |a, b| {
            if a.int < 0 {
                return Err("hate negative numbers".into());
            }
            b.out = format!("{:?}-{}", a.str, a.int);
            Ok(())
        },
    )
}

async fn create(state: &Arc<dyn State>, id: &str, str: &str, int: i64) {
    state.create(Typed::new(id, A { str: str.into(), int }), CreateOptions::default()).await.expect("create");
}

/// The outputs, as `(id, out, phase)`.
async fn outputs(state: &Arc<dyn State>) -> Vec<(String, String, Phase)> {
    let all = state.list::<B>(&ListOptions::default()).await.expect("list");
    all.iter().map(|b| (b.id().to_owned(), b.out.clone(), b.metadata().phase())).collect()
}

fn output(id: &str, out: &str, phase: Phase) -> (String, String, Phase) {
    (id.to_owned(), out.to_owned(), phase)
}

/// `TestMapWithMissing` and `TestMapWithErrors`: a skipped input has no
/// output, a failing one none until it is fixed, and the others theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_with_missing_and_errors() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(ab("ab")).expect("register");
    runtime.start().expect("start");
    for (id, str, int) in [("1", "foo", 1), ("2", "bar", -2), ("3", "baz", 3), ("skip-me", "qux", 4)] {
        create(&state, id, str, int).await;
    }
    runtime.settled().await;
    let running = Phase::Running;
    assert_eq!(
        outputs(&state).await,
        [output("transformed-1", r#""foo"-1"#, running), output("transformed-3", r#""baz"-3"#, running)]
    );
    let failure = runtime.stats("ab").expect("stats").last_error.expect("the failure");
    assert!(failure.contains("hate negative numbers"), "{failure}");

    state.modify::<A>("2", UpdateOptions::default(), |a| a.int = 2).await.expect("fix");
    // The controller retries after its backoff, which counts as settled.
    eventually("the fixed input's output", || async {
        match state.get::<B>("transformed-2").await {
            Ok(b) if b.out == r#""bar"-2"# => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    runtime.shutdown().await;
}

/// `TestDestroyOutputFinalizers`: the output of a torn-down input stays,
/// tearing down, while another controller holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_waits_for_output_finalizers() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(ab("ab")).expect("register");
    runtime.start().expect("start");
    create(&state, "3", "", 0).await;
    runtime.settled().await;
    state.add_finalizers::<B>("transformed-3", &["foo.cosi"]).await.expect("hold the output");

    state.teardown::<A>("3", TeardownOptions::default()).await.expect("teardown");
    state.destroy::<A>("3", DestroyOptions::default()).await.expect("destroy");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, [output("transformed-3", r#"""-0"#, Phase::TearingDown)]);

    state.remove_finalizers::<B>("transformed-3", &["foo.cosi"]).await.expect("release the output");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, []);
    runtime.shutdown().await;
}

/// `TestDestroyInputFinalizers`, without Go's finalizer-removal function:
/// the input stays, tearing down, until its output is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_finalizers_hold_inputs_until_their_outputs_go() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(ab("ab").input_finalizers()).expect("register");
    runtime.start().expect("start");
    create(&state, "1", "", 0).await;
    runtime.settled().await;
    assert!(state.get::<A>("1").await.expect("input").metadata().finalizers().has("ab"));
    state.add_finalizers::<B>("transformed-1", &["foo.cosi"]).await.expect("hold the output");

    assert!(!state.teardown::<A>("1", TeardownOptions::default()).await.expect("teardown"));
    runtime.settled().await;
    assert!(state.get::<A>("1").await.expect("input").metadata().finalizers().has("ab"));

    state.remove_finalizers::<B>("transformed-1", &["foo.cosi"]).await.expect("release the output");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, []);
    assert!(state.get::<A>("1").await.expect("input").metadata().finalizers().is_empty());
    runtime.shutdown().await;
}

/// `TestWithIgnoreTearingDownInputs`: the output of a tearing-down input
/// stays until the input is destroyed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_tearing_down_keeps_outputs_until_inputs_are_destroyed() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(ab("ab").ignore_tearing_down()).expect("register");
    runtime.start().expect("start");
    for (id, int) in [("1", 1), ("2", 2)] {
        create(&state, id, "foo", int).await;
    }
    runtime.settled().await;

    state.teardown::<A>("2", TeardownOptions::default()).await.expect("teardown");
    runtime.settled().await;
    assert_eq!(outputs(&state).await.len(), 2, "the output of a tearing-down input stays");

    state.destroy::<A>("2", DestroyOptions::default()).await.expect("destroy");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, [output("transformed-1", r#""foo"-1"#, Phase::Running)]);

    state.add_finalizers::<B>("transformed-1", &["foo"]).await.expect("hold the output");
    state.destroy::<A>("1", DestroyOptions::default()).await.expect("destroy");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, [output("transformed-1", r#""foo"-1"#, Phase::TearingDown)]);
    state.remove_finalizers::<B>("transformed-1", &["foo"]).await.expect("release the output");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, []);
    runtime.shutdown().await;
}

/// `TestWithOnShutdownCallback`: the callback runs once the runtime stops,
/// and may still write through the context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_shutdown_runs_once_the_runtime_stops() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    let called = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&called);
    let transform = ab("ab").on_shutdown(move |ctx| {
        Box::pin(async move {
            flag.store(true, Ordering::SeqCst);
            ctx.try_modify::<B, cosi::Error>(B::pointer("goodbye"), |b| {
                b.out = "bye".into();
                Ok(())
            })
            .await
            .expect("write on shutdown");
        })
    });
    runtime.register(transform).expect("register");
    runtime.start().expect("start");
    create(&state, "1", "foo", 1).await;
    runtime.settled().await;
    assert!(!called.load(Ordering::SeqCst), "not before the stop");
    runtime.shutdown().await;
    assert!(called.load(Ordering::SeqCst));
    assert_eq!(state.get::<B>("goodbye").await.expect("written on shutdown").out, "bye");
}

/// `TestOutputShared`: two transforms may write one type once both declare it shared.
#[test]
fn output_shared() {
    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(ab("ab").output_kind(OutputKind::Shared)).expect("register");
    runtime.register(ab("ac").output_kind(OutputKind::Shared)).expect("a second shared writer");
    let refused = runtime.register(ab("exclusive")).expect_err("an exclusive writer beside shared ones");
    assert!(refused.to_string().contains("exclusive"), "{refused}");
    let graph = runtime.graph();
    assert!(graph.controllers.iter().all(|controller| controller.outputs[0].kind == OutputKind::Shared));
}

/// `WithExtraInputs` and a transform that reads them: a change of an extra
/// input transforms again, and the graph shows what the transform reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_inputs_are_read_through_the_context() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    let transform = Transform::<A, B>::with_ctx(
        "suffixed",
        |a| Some(a.id().to_owned()),
        |ctx, a, b| {
            Box::pin(async move {
                let suffix = ctx.get::<Suffix>("default").await.map(|suffix| suffix.suffix.clone());
                b.out = format!("{}{}", a.str, suffix.unwrap_or_default());
                Ok(())
            })
        },
    )
    .input::<Suffix>(InputKind::Weak);
    runtime.register(transform).expect("register");
    let graph = runtime.graph();
    let inputs: Vec<_> = graph.controllers[0].inputs.iter().map(|input| (input.r#type.as_str(), input.kind)).collect();
    assert_eq!(
        inputs,
        [(A::TYPE, InputKind::Weak), (B::TYPE, InputKind::DestroyReady), (Suffix::TYPE, InputKind::Weak)]
    );
    runtime.start().expect("start");
    create(&state, "1", "foo", 1).await;
    runtime.settled().await;
    assert_eq!(outputs(&state).await, [output("1", "foo", Phase::Running)]);

    let suffix = Typed::new("default", Suffix { suffix: ".example".into() });
    state.create(suffix, CreateOptions::default()).await.expect("create");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, [output("1", "foo.example", Phase::Running)]);
    runtime.shutdown().await;
}

/// `WithInputListOptions`: only the inputs the query selects are
/// transformed; an input that stops matching loses its output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_selects_the_inputs() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    let selected = ListOptions::default().label(LabelQuery::new().exists("selected"));
    runtime.register(ab("ab").filter(selected)).expect("register");
    runtime.start().expect("start");
    for id in ["1", "2"] {
        let mut a = Typed::new(id, A { str: "foo".into(), int: 1 });
        if id == "1" {
            a.metadata_mut().labels_mut().set("selected", "");
        }
        state.create(a, CreateOptions::default()).await.expect("create");
    }
    runtime.settled().await;
    assert_eq!(outputs(&state).await, [output("transformed-1", r#""foo"-1"#, Phase::Running)]);

    state
        .modify::<A>("1", UpdateOptions::default(), |a| drop(a.metadata_mut().labels_mut().remove("selected")))
        .await
        .expect("unlabel");
    runtime.settled().await;
    assert_eq!(outputs(&state).await, []);
    runtime.shutdown().await;
}

/// Extra inputs are declared: one of the output type is refused at registration.
#[test]
fn an_extra_input_of_the_output_type_is_refused() {
    let runtime = Runtime::new(cosi::state::memory());
    let refused = runtime.register(ab("ab").input::<B>(InputKind::Weak)).expect_err("refused");
    assert!(refused.to_string().contains("twice"), "{refused}");
}
