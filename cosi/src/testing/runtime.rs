//! The runtime conformance cases: Go COSI's `RuntimeSuite`, one function per
//! test, with its test controllers written in the `#[controller]` DSL.
//!
//! Each case builds a [`Runtime`] over the state it is given, registers its
//! controllers, drives the state and waits (polling, bounded by
//! [`EVENTUALLY`]) until the outputs are what the controllers must make of
//! the inputs. Every case shuts its runtime down at the end, so a case that
//! leaks a task hangs instead of passing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::controller;
use crate::controller::{BoxError, Ctx, Input, InputKind, ReducedMetadata, Register, Requeue, RequeueError};
use crate::resource::{LabelQuery, Phase, Pointer, Resource, Typed};
use crate::runtime::{ControllerStatus, RUNTIME_NAMESPACE, Runtime};
use crate::state::{
    CreateOptions, DestroyOptions, Error, ListOptions, Result, ResultExt, State, StateExt, UpdateOptions,
};
use crate::testing::resources::{IntResource, SentenceResource, StrResource};

/// How long a case waits for the controllers to converge.
pub const EVENTUALLY: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// The test controllers.

/// Turns integers into strings (Go's `IntToStrController`): puts its
/// finalizer on each integer, and removes it once the string is destroyed.
#[controller(
    inputs = [Strong<IntResource>, DestroyReady<StrResource>],
    outputs = [Exclusive<StrResource>],
    inventory = false,
)]
pub struct IntToStr {
    source: String,
    target: String,
    inputs_set: bool,
}

impl IntToStr {
    /// Integers in `source` to strings in `target`.
    pub fn new(source: &str, target: &str) -> Self {
        IntToStr { source: source.to_owned(), target: target.to_owned(), inputs_set: false }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<()> {
        if !self.inputs_set {
            ctx.update_inputs([
                Input::of::<IntResource>(InputKind::Strong).in_namespace(&self.source),
                Input::of::<StrResource>(InputKind::DestroyReady).in_namespace(&self.target),
            ])?;
            self.inputs_set = true;
        }
        for int in ctx.list_in::<IntResource>(&self.source, &ListOptions::default()).await? {
            let output = Pointer::new(&self.target, StrResource::TYPE, int.id());
            let value = int.value.to_string();
            follow(ctx, &int, &output, |str: &mut Typed<StrResource>| str.value.clone_from(&value)).await?;
        }
        Ok(())
    }
}

/// Turns strings into sentences (Go's `StrToSentenceController`).
#[controller(
    inputs = [Strong<StrResource>, DestroyReady<SentenceResource>],
    outputs = [Exclusive<SentenceResource>],
    inventory = false,
)]
pub struct StrToSentence {
    source: String,
    target: String,
    inputs_set: bool,
}

impl StrToSentence {
    /// Strings in `source` to sentences in `target`.
    pub fn new(source: &str, target: &str) -> Self {
        StrToSentence { source: source.to_owned(), target: target.to_owned(), inputs_set: false }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<()> {
        if !self.inputs_set {
            ctx.update_inputs([
                Input::of::<StrResource>(InputKind::Strong).in_namespace(&self.source),
                Input::of::<SentenceResource>(InputKind::DestroyReady).in_namespace(&self.target),
            ])?;
            self.inputs_set = true;
        }
        for str in ctx.list_in::<StrResource>(&self.source, &ListOptions::default()).await? {
            let output = Pointer::new(&self.target, SentenceResource::TYPE, str.id());
            let value = format!("{} sentence", str.value);
            follow(ctx, &str, &output, |sentence: &mut Typed<SentenceResource>| sentence.value.clone_from(&value))
                .await?;
        }
        Ok(())
    }
}

/// The common half of `IntToStr` and `StrToSentence`: while the input runs,
/// keep a finalizer on it and the output up to date; once it tears down,
/// tear the output down, destroy it when ready and release the input.
async fn follow<C, I, O>(
    ctx: &Ctx<C>,
    input: &Typed<I>,
    output: &Pointer,
    edit: impl FnMut(&mut Typed<O>) + Send,
) -> Result<()>
where
    I: Resource + crate::controller::Finalizes<C>,
    O: Resource + Default + crate::controller::Writes<C>,
{
    let finalizer = ctx.name().to_owned();
    match input.metadata().phase() {
        Phase::Running => {
            if !input.metadata().finalizers().has(&finalizer) {
                ctx.add_finalizers(input, &[&finalizer]).await?;
            }
            ctx.modify::<O>(output, edit).await?;
        }
        Phase::TearingDown => match ctx.teardown::<O>(output).await {
            Ok(true) => {
                ctx.destroy::<O>(output).await?;
                ctx.remove_finalizers(input, &[&finalizer]).await?;
            }
            Ok(false) => (),
            Err(error) if error.is_not_found() => ctx.remove_finalizers(input, &[&finalizer]).await?,
            Err(error) => return Err(error),
        },
    }
    Ok(())
}

/// Sums the integers of a namespace into one integer (Go's `SumController`);
/// its inputs are set at run time, and several may share the output type.
#[controller(inputs = [Weak<IntResource>(namespace = "source")], outputs = [Shared<IntResource>], inventory = false)]
pub struct Sum {
    source: String,
    target: Pointer,
    query: Option<LabelQuery>,
    inputs_set: bool,
}

impl Sum {
    /// The sum of the integers in `source`, written to `target_id` in `target`.
    pub fn new(source: &str, target: &str, target_id: &str) -> Self {
        Sum {
            source: source.to_owned(),
            target: Pointer::new(target, IntResource::TYPE, target_id),
            query: None,
            inputs_set: false,
        }
    }

    /// Only the integers that match `query`.
    pub fn filtered(mut self, query: LabelQuery) -> Self {
        self.query = Some(query);
        self
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<()> {
        if !self.inputs_set {
            ctx.update_inputs([Input::of::<IntResource>(InputKind::Weak).in_namespace(&self.source)])?;
            self.inputs_set = true;
        }
        let options = match &self.query {
            Some(query) => ListOptions::default().label(query.clone()),
            None => ListOptions::default(),
        };
        let sum: i64 = ctx.list_in::<IntResource>(&self.source, &options).await?.iter().map(|int| int.value).sum();
        ctx.modify::<IntResource>(&self.target, |int| int.value = sum).await?;
        Ok(())
    }
}

/// Writes one more integer, then fails or panics, every time (Go's
/// `FailingController`); its count survives the restarts.
#[controller(inputs = [DestroyReady<IntResource>], outputs = [Exclusive<IntResource>], inventory = false)]
pub struct Failing {
    target: String,
    panic: bool,
    count: i64,
}

impl Failing {
    /// Writes to `target`; panics instead of failing with `panic`.
    pub fn new(target: &str, panic: bool) -> Self {
        Failing { target: target.to_owned(), panic, count: 0 }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> std::result::Result<(), BoxError> {
        let count = self.count;
        ctx.modify::<IntResource>(&Pointer::new(&self.target, IntResource::TYPE, count.to_string()), |int| {
            int.value = count
        })
        .await?;
        self.count += 1;
        if self.panic {
            panic!("the failing controller panics on purpose");
        }
        Err("the failing controller fails on purpose".into())
    }
}

/// Doubles integers, and removes the doubles of integers that are gone
/// through output tracking (Go's `IntDoublerController`).
#[controller(inputs = [Strong<IntResource>(namespace = "doubler-in")], outputs = [Shared<IntResource>], inventory = false)]
pub async fn doubler(ctx: &mut Ctx) -> Result<()> {
    for int in ctx.list_in::<IntResource>("doubler-in", &ListOptions::default()).await? {
        let double = int.value * 2;
        ctx.modify::<IntResource>(&Pointer::new("doubler-out", IntResource::TYPE, int.id()), |out| out.value = double)
            .await?;
    }
    ctx.cleanup_outputs_in::<IntResource>("doubler-out").await
}

/// Uses what `modify` returns, on the create and the update path (Go's
/// `ModifyWithResultController`).
#[controller(
    inputs = [Weak<IntResource>(namespace = "mwr-in")],
    outputs = [Exclusive<StrResource>, Exclusive<SentenceResource>],
    inventory = false,
)]
pub async fn modify_reader(ctx: &mut Ctx) -> Result<()> {
    for int in ctx.list_in::<IntResource>("mwr-in", &ListOptions::default()).await? {
        let value = int.value.to_string();
        let str = ctx
            .modify::<StrResource>(&Pointer::new("mwr-out", StrResource::TYPE, int.id()), |str| {
                str.value.clone_from(&value)
            })
            .await?;
        let sentence = format!("{} v{}", str.value, str.metadata().version());
        ctx.modify::<SentenceResource>(&Pointer::new("mwr-out", SentenceResource::TYPE, int.id()), |out| {
            out.value.clone_from(&sentence)
        })
        .await?;
    }
    Ok(())
}

/// Makes a known number of reads and writes per reconcile, and fails on 42
/// (Go's `MetricsController`).
#[controller(inputs = [Weak<IntResource>(namespace = "metrics")], outputs = [Exclusive<StrResource>], inventory = false)]
pub async fn metrics_controller(ctx: &mut Ctx) -> std::result::Result<(), BoxError> {
    let value = match ctx.get::<IntResource>(&Pointer::new("metrics", IntResource::TYPE, "counter")).await {
        Ok(int) => int.value,
        Err(error) if error.is_not_found() => 0,
        Err(error) => return Err(error.into()),
    };
    let _ = ctx.list_in::<IntResource>("metrics", &ListOptions::default()).await?;
    ctx.modify::<StrResource>(&Pointer::new("metrics-out", StrResource::TYPE, "counter"), |str| {
        str.value = value.to_string()
    })
    .await?;
    ctx.destroy::<StrResource>(&Pointer::new("metrics-out", StrResource::TYPE, "nothing")).await.ignore_not_found()?;
    if value == 42 {
        return Err("the answer is not allowed".into());
    }
    Ok(())
}

/// Integers to strings one item at a time, four at once (Go's
/// `QIntToStrController`); a string ready to be destroyed maps back to its
/// integer.
#[controller(
    inputs = [Primary<IntResource>(namespace = "qints"), MappedDestroyReady<StrResource>(namespace = "qstrs")],
    outputs = [Exclusive<StrResource>],
    concurrency = 4,
    inventory = false,
)]
#[derive(Default)]
pub struct QIntToStr;

impl QIntToStr {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<()> {
        let int = match ctx.get::<IntResource>(item).await {
            Ok(int) => int,
            Err(error) if error.is_not_found() => return Ok(()),
            Err(error) => return Err(error),
        };
        let value = int.value.to_string();
        let output = Pointer::new("qstrs", StrResource::TYPE, item.id());
        follow(ctx, &int, &output, |str: &mut Typed<StrResource>| str.value.clone_from(&value)).await
    }

    async fn map(&self, _ctx: &Ctx<Self>, input: &ReducedMetadata) -> Result<Vec<Pointer>> {
        Ok(vec![Pointer::new("qints", IntResource::TYPE, input.pointer.id())])
    }
}

/// Fails, panics or requeues items by their value (Go's `QFailingController`),
/// with two primary inputs in one namespace.
#[controller(
    inputs = [Primary<StrResource>(namespace = "qfail"), Primary<IntResource>(namespace = "qfail")],
    outputs = [Exclusive<SentenceResource>],
    concurrency = 2,
    inventory = false,
)]
#[derive(Default)]
pub struct QFailing;

impl QFailing {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> std::result::Result<Requeue, BoxError> {
        let value = match item.r#type() {
            IntResource::TYPE => format!("int {}", ctx.get::<IntResource>(item).await?.value),
            _ => ctx.get::<StrResource>(item).await?.value.clone(),
        };
        match value.as_str() {
            "fail" => return Err("failing on purpose".into()),
            "panic" => panic!("panicking on purpose"),
            "requeue_no_error" => return Ok(Requeue::After(Duration::from_millis(100))),
            "requeue_with_error" => {
                return Err(RequeueError::new("requeueing on purpose", Duration::from_millis(100)).into());
            }
            _ => (),
        }
        ctx.modify::<SentenceResource>(&Pointer::new("qfail", SentenceResource::TYPE, item.id()), |sentence| {
            sentence.value.clone_from(&value)
        })
        .await?;
        Ok(Requeue::Never)
    }
}

/// Sleeps for an item's value in milliseconds, one item at a time, and stops
/// early when the item tears down (Go's `QIntToStrSleepingController`).
#[controller(
    inputs = [Primary<IntResource>(namespace = "qsleep")],
    outputs = [Exclusive<StrResource>],
    concurrency = 1,
    inventory = false,
)]
#[derive(Default)]
pub struct QSleeping;

impl QSleeping {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<()> {
        let int = match ctx.get::<IntResource>(item).await {
            Ok(int) => int,
            Err(error) if error.is_not_found() => return Ok(()),
            Err(error) => return Err(error),
        };
        let output = Pointer::new("qsleep", StrResource::TYPE, item.id());
        if int.metadata().phase() == Phase::TearingDown {
            return Ok(());
        }
        ctx.modify::<StrResource>(&output, |str| str.value = "started".to_owned()).await?;
        let torn_down = ctx.until_teardown(&int).await?;
        let sleep = tokio::time::sleep(Duration::from_millis(u64::try_from(int.value).unwrap_or(0)));
        let result = tokio::select! {
            () = sleep => "done",
            () = torn_down => "interrupted",
        };
        ctx.modify::<StrResource>(&output, |str| str.value = result.to_owned()).await?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The cases.

/// A runtime without controllers starts and stops.
pub async fn no_controllers(state: Arc<dyn State>) {
    let runtime = Runtime::new(state);
    runtime.start().expect("start");
    assert!(runtime.graph().controllers.is_empty());
    runtime.shutdown().await;
}

/// Integers become strings: those that exist before the start and those
/// created after; updates follow; a teardown waits for the controller's
/// finalizer, which goes once the string is gone.
pub async fn int_to_str(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(IntToStr::new("default", "default")).expect("register");
    create_int(&state, "default", "one", 1).await;
    runtime.start().expect("start");
    create_int(&state, "default", "two", 2).await;
    expect_strs::<StrResource>(&state, "default", &[("one", "1"), ("two", "2")]).await;

    create_int(&state, "default", "three", 3).await;
    expect_strs::<StrResource>(&state, "default", &[("one", "1"), ("three", "3"), ("two", "2")]).await;
    set_int(&state, "default", "three", 33).await;
    expect_strs::<StrResource>(&state, "default", &[("one", "1"), ("three", "33"), ("two", "2")]).await;

    let three = int_pointer("default", "three");
    assert!(!state.teardown_dynamic(&three, Default::default()).await.expect("teardown"), "no finalizer on the input");
    wait_finalizers_empty(&state, &three).await;
    expect_strs::<StrResource>(&state, "default", &[("one", "1"), ("two", "2")]).await;
    state.destroy_dynamic(&three, DestroyOptions::default()).await.expect("destroy");
    runtime.shutdown().await;
}

/// Two controllers in a chain: changes and teardowns travel through both.
pub async fn int_to_str_to_sentence(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(IntToStr::new("ints", "strings")).expect("register");
    runtime.register(StrToSentence::new("strings", "sentences")).expect("register");
    create_int(&state, "ints", "one", 1).await;
    runtime.start().expect("start");
    create_int(&state, "ints", "two", 2).await;
    expect_strs::<SentenceResource>(&state, "sentences", &[("one", "1 sentence"), ("two", "2 sentence")]).await;
    create_int(&state, "ints", "three", 3).await;
    set_int(&state, "ints", "one", 11).await;
    expect_strs::<SentenceResource>(
        &state,
        "sentences",
        &[("one", "11 sentence"), ("three", "3 sentence"), ("two", "2 sentence")],
    )
    .await;

    let one = int_pointer("ints", "one");
    assert!(!state.teardown_dynamic(&one, Default::default()).await.expect("teardown"));
    wait_finalizers_empty(&state, &one).await;
    expect_strs::<SentenceResource>(&state, "sentences", &[("three", "3 sentence"), ("two", "2 sentence")]).await;
    expect_strs::<StrResource>(&state, "strings", &[("three", "3"), ("two", "2")]).await;
    state.destroy_dynamic(&one, DestroyOptions::default()).await.expect("destroy");
    runtime.shutdown().await;
}

/// A controller whose inputs are set while it runs sums a namespace.
pub async fn sum(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(Sum::new("source", "target", "sum")).expect("register");
    runtime.start().expect("start");
    expect_ints(&state, "target", &[("sum", 0)]).await;
    create_int(&state, "source", "one", 1).await;
    create_int(&state, "source", "two", 2).await;
    expect_ints(&state, "target", &[("sum", 3)]).await;
    state.destroy_dynamic(&int_pointer("source", "one"), DestroyOptions::default()).await.expect("destroy");
    expect_ints(&state, "target", &[("sum", 2)]).await;
    runtime.shutdown().await;
}

/// The same with a label query on the inputs.
pub async fn sum_filtered(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    let query = LabelQuery::new().exists("summable").equal("app", "app1");
    runtime.register(Sum::new("source", "target", "sum").filtered(query)).expect("register");
    runtime.start().expect("start");
    expect_ints(&state, "target", &[("sum", 0)]).await;
    create_labelled_int(&state, "one", 1, &[]).await;
    create_labelled_int(&state, "two", 2, &[("summable", "true"), ("app", "app1")]).await;
    expect_ints(&state, "target", &[("sum", 2)]).await;
    create_labelled_int(&state, "three", 3, &[("summable", "true"), ("app", "app1")]).await;
    create_labelled_int(&state, "four", 4, &[("summable", "true"), ("app", "app2")]).await;
    expect_ints(&state, "target", &[("sum", 5)]).await;
    state.destroy_dynamic(&int_pointer("source", "two"), DestroyOptions::default()).await.expect("destroy");
    expect_ints(&state, "target", &[("sum", 3)]).await;
    runtime.shutdown().await;
}

/// Three sums registered after the start, two feeding the third, sharing
/// their output type.
pub async fn cascading_sum(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.start().expect("start");
    runtime.register(Sum::new("source1", "source", "sum1").named("sum1")).expect("register");
    runtime.register(Sum::new("source2", "source", "sum2").named("sum2")).expect("register");
    runtime.register(Sum::new("source", "target", "sum").named("sum")).expect("register");
    expect_ints(&state, "target", &[("sum", 0)]).await;
    create_int(&state, "source1", "one", 1).await;
    create_int(&state, "source1", "two", 2).await;
    create_int(&state, "source2", "three", 3).await;
    create_int(&state, "source2", "four", 4).await;
    expect_ints(&state, "target", &[("sum", 10)]).await;
    runtime.shutdown().await;
}

/// A controller that fails every time is restarted with backoff (its state
/// kept), the runtime records it, and the other controllers keep working.
pub async fn failing(state: Arc<dyn State>) {
    restarts_after(state, false).await;
}

/// The same with a panic.
pub async fn panicking(state: Arc<dyn State>) {
    restarts_after(state, true).await;
}

async fn restarts_after(state: Arc<dyn State>, panic: bool) {
    let runtime = Runtime::new(state.clone());
    runtime.register(Failing::new("target", panic)).expect("register");
    runtime.register(IntToStr::new("default", "default")).expect("register");
    runtime.start().expect("start");
    expect_ints(&state, "target", &[("0", 0)]).await;
    expect_ints(&state, "target", &[("0", 0), ("1", 1)]).await;
    let stats = runtime.stats("Failing").expect("stats");
    assert!(stats.restarts >= 1 && stats.errors >= 1, "{stats:?}");
    let expected = match panic {
        true => "panics on purpose",
        false => "fails on purpose",
    };
    assert!(stats.last_error.as_deref().is_some_and(|error| error.contains(expected)), "{stats:?}");
    create_int(&state, "default", "alive", 7).await;
    expect_strs::<StrResource>(&state, "default", &[("alive", "7")]).await;
    runtime.shutdown().await;
}

/// Output tracking: outputs follow inputs, and go when their input goes.
pub async fn int_doubler(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(doubler {}).expect("register");
    runtime.start().expect("start");
    create_int(&state, "doubler-in", "one", 1).await;
    create_int(&state, "doubler-in", "two", 2).await;
    expect_ints(&state, "doubler-out", &[("one", 2), ("two", 4)]).await;
    set_int(&state, "doubler-in", "one", 5).await;
    expect_ints(&state, "doubler-out", &[("one", 10), ("two", 4)]).await;
    state.destroy_dynamic(&int_pointer("doubler-in", "two"), DestroyOptions::default()).await.expect("destroy");
    expect_ints(&state, "doubler-out", &[("one", 10)]).await;
    runtime.shutdown().await;
}

/// `modify` returns the stored resource when it creates and when it updates.
pub async fn modify_with_result(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(modify_reader {}).expect("register");
    runtime.start().expect("start");
    create_int(&state, "mwr-in", "a", 1).await;
    expect_strs::<SentenceResource>(&state, "mwr-out", &[("a", "1 v1")]).await;
    set_int(&state, "mwr-in", "a", 2).await;
    expect_strs::<SentenceResource>(&state, "mwr-out", &[("a", "2 v2")]).await;
    runtime.shutdown().await;
}

/// The runtime counts wake-ups, reads, writes and failures per controller,
/// and publishes them as a resource.
pub async fn runtime_metrics(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(metrics_controller {}).expect("register");
    runtime.start().expect("start");
    let stats = eventually("the first reconcile", || async {
        let stats = runtime.stats("metrics_controller").ok_or("no stats")?;
        match stats.reconciles {
            1 => Ok(stats),
            _ => Err(format!("{stats:?}")),
        }
    })
    .await;
    assert_eq!((stats.wakeups, stats.reads, stats.writes, stats.errors), (1, 2, 2, 0), "{stats:?}");

    create_int(&state, "metrics", "counter", 42).await;
    let stats = eventually("a failure", || async {
        let stats = runtime.stats("metrics_controller").ok_or("no stats")?;
        match stats.errors >= 1 && stats.restarts >= 1 {
            true => Ok(stats),
            false => Err(format!("{stats:?}")),
        }
    })
    .await;
    assert!(stats.wakeups >= 2, "{stats:?}");

    let pointer = Pointer::new(RUNTIME_NAMESPACE, ControllerStatus::TYPE, "metrics_controller");
    let status = eventually("the published status", || async {
        let status = state.get::<ControllerStatus>(&pointer).await.map_err(|error| error.to_string())?;
        match status.errors >= 1 && !status.healthy {
            true => Ok(status),
            false => Err(format!("{status:?}")),
        }
    })
    .await;
    assert!(status.last_error.as_deref().is_some_and(|error| error.contains("the answer")), "{status:?}");
    assert_eq!(status.metadata().owner(), Some(crate::runtime::RUNTIME_OWNER));
    assert_eq!(status.outputs.len(), 1);
    runtime.shutdown().await;
}

/// A queue controller: items follow their inputs, four at once; a finalizer
/// someone else put on an output holds the input until it is removed.
pub async fn queue_int_to_str(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(QIntToStr).expect("register");
    for i in 0..5 {
        create_int(&state, "qints", &format!("i{i}"), i).await;
    }
    runtime.start().expect("start");
    for i in 5..10 {
        create_int(&state, "qints", &format!("i{i}"), i).await;
    }
    let expected: Vec<(String, String)> = (0..10).map(|i| (format!("i{i}"), i.to_string())).collect();
    let expected: Vec<(&str, &str)> = expected.iter().map(|(id, value)| (id.as_str(), value.as_str())).collect();
    expect_strs::<StrResource>(&state, "qstrs", &expected).await;
    set_int(&state, "qints", "i3", 33).await;
    let str3 = Pointer::new("qstrs", StrResource::TYPE, "i3");
    expect_value::<StrResource>(&state, &str3, "33").await;

    state.add_finalizers_dynamic(&str3, &["external"]).await.expect("add finalizer");
    let int3 = int_pointer("qints", "i3");
    assert!(!state.teardown_dynamic(&int3, Default::default()).await.expect("teardown"));
    eventually("the output tearing down", || async {
        let str = state.get_dynamic(&str3).await.map_err(|error| error.to_string())?;
        match str.metadata().phase() {
            Phase::TearingDown => Ok(()),
            Phase::Running => Err("running".to_owned()),
        }
    })
    .await;
    let int = state.get_dynamic(&int3).await.expect("get");
    assert!(!int.metadata().finalizers().is_empty(), "the input was released while its output was held");
    state.remove_finalizers_dynamic(&str3, &["external"]).await.expect("remove finalizer");
    wait_finalizers_empty(&state, &int3).await;
    assert!(state.get_dynamic(&str3).await.err().is_some_and(|error| error.is_not_found()));
    state.destroy_dynamic(&int3, DestroyOptions::default()).await.expect("destroy");
    runtime.shutdown().await;
}

/// Failing, panicking and requeueing items are retried and never block the
/// others; once their values change they are all processed.
pub async fn queue_failing(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(QFailing).expect("register");
    runtime.start().expect("start");
    let ids = ["fail", "panic", "requeue_no_error", "requeue_with_error", "ok"];
    for id in ids {
        let str = Typed::new_in("qfail", id, StrResource { value: id.to_owned() });
        state.create(str, CreateOptions::default()).await.expect("create");
    }
    create_int(&state, "qfail", "number", 7).await;
    expect_strs::<SentenceResource>(&state, "qfail", &[("number", "int 7"), ("ok", "ok")]).await;
    eventually("failures and requeues", || async {
        let stats = runtime.stats("QFailing").ok_or("no stats")?;
        match stats.errors >= 3 {
            true => Ok(()),
            false => Err(format!("{stats:?}")),
        }
    })
    .await;
    let sentences = state.list_in::<SentenceResource>("qfail", &ListOptions::default()).await.expect("list");
    assert_eq!(sentences.len(), 2, "a failing item was processed: {sentences:?}");

    for id in ids {
        let pointer = Pointer::new("qfail", StrResource::TYPE, id);
        state
            .update_with_conflicts(&pointer, UpdateOptions::default(), |str: &mut Typed<StrResource>| {
                str.value = "no fail".to_owned();
                Ok::<_, Error>(())
            })
            .await
            .expect("update");
    }
    let mut expected: Vec<(&str, &str)> = ids.iter().map(|id| (*id, "no fail")).collect();
    expected.push(("number", "int 7"));
    expected.sort();
    expect_strs::<SentenceResource>(&state, "qfail", &expected).await;
    runtime.shutdown().await;
}

/// With concurrency 1, a long item blocks the next; tearing it down
/// interrupts it, and the next runs.
pub async fn queue_sleeping(state: Arc<dyn State>) {
    let runtime = Runtime::new(state.clone());
    runtime.register(QSleeping).expect("register");
    // Created before the start, the long item is queued once, by the initial
    // listing; created after, its event could queue it again while it runs.
    create_int(&state, "qsleep", "long", 600_000).await;
    runtime.start().expect("start");
    let long = Pointer::new("qsleep", StrResource::TYPE, "long");
    expect_value::<StrResource>(&state, &long, "started").await;
    create_int(&state, "qsleep", "short", 1).await;
    eventually("the short item waiting", || async {
        let stats = runtime.stats("QSleeping").ok_or("no stats")?;
        match stats.queue_depth {
            1 => Ok(()),
            _ => Err(format!("{stats:?}")),
        }
    })
    .await;
    let short = Pointer::new("qsleep", StrResource::TYPE, "short");
    assert!(
        state.get_dynamic(&short).await.err().is_some_and(|error| error.is_not_found()),
        "ran beside the long item"
    );
    state.teardown_dynamic(&int_pointer("qsleep", "long"), Default::default()).await.expect("teardown");
    expect_value::<StrResource>(&state, &long, "interrupted").await;
    expect_value::<StrResource>(&state, &short, "done").await;
    runtime.shutdown().await;
}

// ---------------------------------------------------------------------------
// Helpers.

/// Polls `check` until it succeeds, for at most [`EVENTUALLY`].
pub async fn eventually<T, E, F, Fut>(what: &str, mut check: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(error) if tokio::time::Instant::now() >= deadline => {
                panic!("{what}: not reached within {EVENTUALLY:?}: {error}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

fn int_pointer(namespace: &str, id: &str) -> Pointer {
    Pointer::new(namespace, IntResource::TYPE, id)
}

async fn create_int(state: &Arc<dyn State>, namespace: &str, id: &str, value: i64) {
    let int = Typed::new_in(namespace, id, IntResource { value });
    state.create(int, CreateOptions::default()).await.expect("create an integer");
}

async fn create_labelled_int(state: &Arc<dyn State>, id: &str, value: i64, labels: &[(&str, &str)]) {
    let mut int = Typed::new_in("source", id, IntResource { value });
    for (key, label) in labels {
        int.metadata_mut().labels_mut().set(*key, *label);
    }
    state.create(int, CreateOptions::default()).await.expect("create an integer");
}

async fn set_int(state: &Arc<dyn State>, namespace: &str, id: &str, value: i64) {
    state
        .update_with_conflicts(&int_pointer(namespace, id), UpdateOptions::default(), |int: &mut Typed<IntResource>| {
            int.value = value;
            Ok::<_, Error>(())
        })
        .await
        .expect("update an integer");
}

/// Waits until the integer at `pointer` has no finalizers left.
async fn wait_finalizers_empty(state: &Arc<dyn State>, pointer: &Pointer) {
    let condition = crate::state::WatchCondition::new().finalizers_empty();
    tokio::time::timeout(EVENTUALLY, state.watch_for::<IntResource>(pointer, condition))
        .await
        .unwrap_or_else(|_| panic!("the finalizers of {pointer} stayed"))
        .expect("watch for empty finalizers");
}

/// A spec with a string value.
trait StringValue: Resource {
    fn value(&self) -> &str;
}

impl StringValue for StrResource {
    fn value(&self) -> &str {
        &self.value
    }
}

impl StringValue for SentenceResource {
    fn value(&self) -> &str {
        &self.value
    }
}

async fn expect_strs<T: StringValue>(state: &Arc<dyn State>, namespace: &str, expected: &[(&str, &str)]) {
    let what = format!("{} in {namespace} to be {expected:?}", T::TYPE);
    eventually(&what, || async {
        let all = state.list_in::<T>(namespace, &ListOptions::default()).await.map_err(|e| e.to_string())?;
        let actual: Vec<(&str, &str)> = all.iter().map(|resource| (resource.id(), resource.value())).collect();
        match actual == expected {
            true => Ok(()),
            false => Err(format!("found {actual:?}")),
        }
    })
    .await;
}

async fn expect_value<T: StringValue>(state: &Arc<dyn State>, pointer: &Pointer, expected: &str) {
    eventually(&format!("{pointer} to be {expected:?}"), || async {
        let resource = state.get::<T>(pointer).await.map_err(|error| error.to_string())?;
        match resource.value() == expected {
            true => Ok(()),
            false => Err(format!("found {:?}", resource.value())),
        }
    })
    .await;
}

async fn expect_ints(state: &Arc<dyn State>, namespace: &str, expected: &[(&str, i64)]) {
    eventually(&format!("integers in {namespace} to be {expected:?}"), || async {
        let all = state
            .list_in::<IntResource>(namespace, &ListOptions::default())
            .await
            .map_err(|error| error.to_string())?;
        let actual: Vec<(&str, i64)> = all.iter().map(|int| (int.id(), int.value)).collect();
        match actual == expected {
            true => Ok(()),
            false => Err(format!("found {actual:?}")),
        }
    })
    .await;
}
