//! `Runtime::settled`: it resolves only once every write made before it, and
//! every write the reconciles set off made in turn, has reached the
//! controllers that read it and their reconciles have finished. The tests
//! never sleep and never poll: after `settled`, the outputs must be exactly
//! right, at once.

use std::sync::Arc;
use std::time::Duration;

use cosi::controller::{QueueTransform, Transform};
use cosi::prelude::*;
use cosi::state::{BackingStore, MemoryOptions, MemoryState, NamespacedState, StoreWrite};
use cosi::testing::resources::{IntResource, SentenceResource, StrResource};
use cosi::testing::runtime::{EVENTUALLY, Failing, IntToStr, StrToSentence};

/// A backing store that keeps nothing: the memory state's write-through path
/// (batched writes, published once durable), which the redb state uses.
struct Discard;

impl BackingStore for Discard {
    fn load(&self) -> cosi::Result<Vec<DynamicResource>> {
        Ok(Vec::new())
    }

    fn write(&self, _batch: &[StoreWrite<'_>]) -> cosi::Result<()> {
        Ok(())
    }
}

/// The in-process states `settled` is exact for.
fn states() -> Vec<(&'static str, Arc<dyn State>)> {
    let backed = MemoryState::with_store(MemoryOptions::default(), Arc::new(Discard)).expect("a backed state");
    vec![
        ("memory", cosi::state::memory()),
        ("namespaced", Arc::new(NamespacedState::new(|_| cosi::state::memory()))),
        ("backed", Arc::new(backed)),
    ]
}

async fn settle(runtime: &Runtime) {
    // A bound, not a wait: a `settled` that hangs fails the test instead of the run.
    tokio::time::timeout(EVENTUALLY, runtime.settled()).await.expect("the runtime settles");
}

async fn values<T: Resource>(state: &Arc<dyn State>, namespace: &str, value: impl Fn(&T) -> String) -> Vec<String> {
    let all = state.list_in::<T>(namespace, &ListOptions::default()).await.expect("list");
    all.iter().map(|resource| format!("{}={}", resource.id(), value(resource.spec()))).collect()
}

async fn set_int(state: &Arc<dyn State>, namespace: &str, id: &str, value: i64) {
    state
        .modify::<IntResource>(Pointer::new(namespace, IntResource::TYPE, id), UpdateOptions::default(), |int| {
            int.value = value
        })
        .await
        .expect("write an integer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_is_complete_when_settled_returns() {
    for (name, state) in states() {
        let runtime = Runtime::new(state.clone());
        runtime.register(IntToStr::new("ints", "strings")).expect("register");
        runtime.register(StrToSentence::new("strings", "sentences")).expect("register");
        set_int(&state, "ints", "before", -1).await;
        runtime.start().expect("start");
        settle(&runtime).await;
        let sentences = values::<SentenceResource>(&state, "sentences", |s| s.value.clone()).await;
        assert_eq!(sentences, ["before=-1 sentence"], "{name}: the initial reconciles");

        // Every round writes, settles, and finds both levels of the chain done.
        for round in 0..100_i64 {
            let id = format!("i{:02}", round % 7);
            set_int(&state, "ints", &id, round).await;
            settle(&runtime).await;
            let strs = values::<StrResource>(&state, "strings", |s| s.value.clone()).await;
            let sentences = values::<SentenceResource>(&state, "sentences", |s| s.value.clone()).await;
            assert!(strs.contains(&format!("{id}={round}")), "{name} round {round}: {strs:?}");
            assert!(sentences.contains(&format!("{id}={round} sentence")), "{name} round {round}: {sentences:?}");
            assert_eq!(strs.len(), sentences.len(), "{name} round {round}");
        }

        // A teardown travels down the chain and back up as released finalizers.
        let before = Pointer::new("ints", IntResource::TYPE, "before");
        assert!(!state.teardown_dynamic(&before, TeardownOptions::default()).await.expect("teardown"));
        settle(&runtime).await;
        let int = state.get_dynamic(&before).await.expect("the integer waits for its destroy");
        assert!(int.metadata().finalizers().is_empty(), "{name}: {:?}", int.metadata().finalizers());
        let sentences = values::<SentenceResource>(&state, "sentences", |s| s.value.clone()).await;
        assert!(!sentences.iter().any(|sentence| sentence.starts_with("before=")), "{name}: {sentences:?}");
        runtime.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transform_is_complete_when_settled_returns() {
    for (name, state) in states() {
        let runtime = Runtime::new(state.clone());
        let transform = Transform::<IntResource, StrResource>::new(
            "int-to-str",
            |int| Some(int.id().to_owned()),
            |int, str| {
                str.value = (int.value * 10).to_string();
                Ok(())
            },
        )
        .input_finalizers();
        runtime.register(transform).expect("register");
        runtime.start().expect("start");
        for round in 0..50_i64 {
            set_int(&state, "default", &format!("t{}", round % 5), round).await;
            settle(&runtime).await;
            let strs = values::<StrResource>(&state, "default", |s| s.value.clone()).await;
            assert!(strs.contains(&format!("t{}={}", round % 5, round * 10)), "{name} round {round}: {strs:?}");
        }
        let t0 = IntResource::pointer("t0");
        state.teardown_dynamic(&t0, TeardownOptions::default()).await.expect("teardown");
        settle(&runtime).await;
        let int = state.get_dynamic(&t0).await.expect("the input");
        assert!(int.metadata().finalizers().is_empty(), "{name}: the transform still holds its input");
        assert!(state.get::<StrResource>("t0").await.is_err_and(|error| error.is_not_found()), "{name}");
        runtime.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_transform_is_complete_when_settled_returns() {
    for (name, state) in states() {
        let runtime = Runtime::new(state.clone());
        runtime
            .register(
                QueueTransform::<IntResource, StrResource>::new("q-int-to-str", |int, str| {
                    str.value = format!("#{}", int.value);
                    Ok(())
                })
                .concurrency(3),
            )
            .expect("register");
        runtime.start().expect("start");
        for i in 0..30 {
            set_int(&state, "default", &format!("q{i:02}"), i).await;
        }
        settle(&runtime).await;
        let strs = values::<StrResource>(&state, "default", |s| s.value.clone()).await;
        let expected: Vec<String> = (0..30).map(|i| format!("q{i:02}=#{i}")).collect();
        assert_eq!(strs, expected, "{name}");
        runtime.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_changed_at_run_time_are_watched_before_settled_returns() {
    // `IntToStr` moves its inputs to `late-ints` in its first reconcile: the
    // runtime starts that watch, then wakes the controller, and `settled`
    // waits for both.
    let state = cosi::state::memory();
    set_int(&state, "late-ints", "one", 1).await;
    let runtime = Runtime::new(state.clone());
    runtime.start().expect("start");
    runtime.register(IntToStr::new("late-ints", "late-strs")).expect("register");
    settle(&runtime).await;
    assert_eq!(values::<StrResource>(&state, "late-strs", |s| s.value.clone()).await, ["one=1"]);
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_in_backoff_counts_as_settled() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(Failing::new("failing", false)).expect("register");
    runtime.register(IntToStr::new("ok-ints", "ok-strs")).expect("register");
    runtime.start().expect("start");
    set_int(&state, "ok-ints", "one", 1).await;
    settle(&runtime).await;
    let stats = runtime.stats("Failing").expect("stats");
    assert!(stats.errors >= 1 && stats.last_error.is_some(), "settled before the failure: {stats:?}");
    assert_eq!(values::<StrResource>(&state, "ok-strs", |s| s.value.clone()).await, ["one=1"]);
    runtime.shutdown().await;
}

/// Requeues itself an hour later after each reconcile.
#[controller(inputs = [Primary<IntResource>(namespace = "later")], outputs = [], concurrency = 1, inventory = false)]
#[derive(Default)]
struct Later;

impl Later {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<Requeue> {
        ctx.get::<IntResource>(item).await?;
        Ok(Requeue::After(Duration::from_secs(3600)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_scheduled_for_later_does_not_count() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(Later).expect("register");
    runtime.start().expect("start");
    // After the first listing, so the create queues the item once.
    settle(&runtime).await;
    set_int(&state, "later", "one", 1).await;
    settle(&runtime).await;
    let stats = runtime.stats("Later").expect("stats");
    assert_eq!((stats.reconciles, stats.queue_depth), (1, 1), "{stats:?}");
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_does_not_run_has_nothing_pending() {
    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(IntToStr::new("a", "b")).expect("register");
    // Before the start, nothing runs: `settled` does not wait for a start.
    settle(&runtime).await;
    runtime.start().expect("start");
    settle(&runtime).await;
    // The first reconcile, and the one after it moved its inputs.
    assert_eq!(runtime.stats("IntToStr").map(|stats| stats.reconciles), Some(2));

    // A shutdown ends a wait.
    let waiting = tokio::spawn({
        let runtime = runtime.handle();
        async move { runtime.settled().await }
    });
    runtime.shutdown().await;
    tokio::time::timeout(EVENTUALLY, waiting).await.expect("settled returns at shutdown").expect("the task");
    settle(&runtime).await;
}

/// Reads integers and fails every time, asking to be retried an hour later.
#[controller(inputs = [Weak<IntResource>(namespace = "stubborn")], outputs = [], inventory = false)]
async fn stubborn(ctx: &mut Ctx) -> std::result::Result<(), RequeueError> {
    let hour = Duration::from_secs(3600);
    let ints = ctx.list_in::<IntResource>("stubborn", &ListOptions::default()).await;
    ints.map_err(|error| RequeueError::new(error, hour))?;
    Err(RequeueError::new("stubborn fails on purpose", hour))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_during_a_backoff_does_not_keep_settled_waiting() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(stubborn {}).expect("register");
    runtime.start().expect("start");
    settle(&runtime).await;
    assert_eq!(runtime.stats("stubborn").map(|stats| stats.errors), Some(1));
    // The change wakes it, but its retry is an hour away: nothing is due.
    set_int(&state, "stubborn", "one", 1).await;
    settle(&runtime).await;
    assert_eq!(runtime.stats("stubborn").map(|stats| stats.errors), Some(1), "retried before its delay");
    runtime.shutdown().await;
}

/// Fails every time and asks never to be retried: `Duration::MAX`.
#[controller(outputs = [], inventory = false)]
async fn never_again(_ctx: &mut Ctx) -> std::result::Result<(), RequeueError> {
    Err(RequeueError::new("never again", Duration::MAX))
}

/// Reconciles each integer once, then asks for it again after `Duration::MAX`.
#[controller(inputs = [Primary<IntResource>(namespace = "forever")], outputs = [], inventory = false)]
#[derive(Default)]
struct Forever;

impl Forever {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<Requeue> {
        ctx.get::<IntResource>(item).await?;
        Ok(Requeue::After(Duration::MAX))
    }
}

/// A delay longer than the clock can count (`Duration::MAX`, "not again")
/// is a wait, not an overflow: the controllers go on, settle and stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_of_duration_max_waits_instead_of_overflowing() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(never_again {}).expect("register");
    runtime.register(Forever).expect("register");
    runtime.start().expect("start");
    settle(&runtime).await;
    for id in ["one", "two"] {
        set_int(&state, "forever", id, 1).await;
        settle(&runtime).await;
    }
    let forever = runtime.stats("Forever").expect("stats");
    assert_eq!((forever.reconciles, forever.queue_depth), (2, 2), "{forever:?}");
    let never = runtime.stats("never_again").expect("stats");
    assert_eq!((never.errors, never.restarts), (1, 1), "{never:?}");
    assert!(never.next_retry.is_some(), "{never:?}");
    tokio::time::timeout(EVENTUALLY, runtime.shutdown()).await.expect("the runtime shuts down");
}

/// Asks, through its dynamic context, for its items again once.
#[controller(inputs = [Primary<IntResource>(namespace = "again")], outputs = [], inventory = false)]
#[derive(Default)]
struct Again {
    asked: std::sync::atomic::AtomicBool,
}

impl Again {
    async fn reconcile(&self, ctx: &Ctx<Self>, _item: &Pointer) {
        if !self.asked.swap(true, std::sync::atomic::Ordering::SeqCst) {
            ctx.dynamic().requeue();
        }
    }
}

/// A queue controller's requeue queues its items again, and is over once they ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_controllers_requeue_runs_its_items_again() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(Again::default()).expect("register");
    runtime.start().expect("start");
    settle(&runtime).await;
    set_int(&state, "again", "one", 1).await;
    settle(&runtime).await;
    assert_eq!(runtime.stats("Again").map(|stats| stats.reconciles), Some(2));
    runtime.shutdown().await;
}
