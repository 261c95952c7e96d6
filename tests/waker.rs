//! `Ctx::waker`: waking a controller from outside the state (Go COSI's
//! `QueueReconcile`), from any thread, coalesced with the other triggers,
//! valid across restarts and harmless after shutdown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cosi::controller::Waker;
use cosi::prelude::*;
use cosi::runtime::{BackoffOptions, RuntimeOptions};
use cosi::testing::resources::{IntResource, StrResource};
use cosi::testing::runtime::EVENTUALLY;
use tokio::sync::{Semaphore, mpsc};

/// The waker a controller handed out, for the "outside world" of a test.
type Slot = Arc<Mutex<Option<Waker>>>;

fn taken(slot: &Slot) -> Waker {
    slot.lock().expect("not poisoned").clone().expect("the controller handed out its waker")
}

/// Mirrors a value that lives outside the state (a file, in a real system)
/// into a string; nothing in the state wakes it.
#[controller(outputs = [Exclusive<StrResource>], inventory = false)]
struct Mirror {
    outside: Arc<AtomicU64>,
    slot: Slot,
}

impl Mirror {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        self.slot.lock().expect("not poisoned").get_or_insert_with(|| ctx.waker());
        let value = self.outside.load(Ordering::SeqCst);
        ctx.modify::<StrResource>("mirror", |str| str.value = value.to_string()).await?;
        Ok(())
    }
}

/// The `trigger` of every `reconcile` span, by controller.
fn triggers() -> &'static Mutex<BTreeMap<String, Vec<String>>> {
    static TRIGGERS: OnceLock<Mutex<BTreeMap<String, Vec<String>>>> = OnceLock::new();
    TRIGGERS.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(SpanRecorder);
        Mutex::default()
    })
}

/// Records the fields of reconcile spans; nothing else.
struct SpanRecorder;

impl tracing::Subscriber for SpanRecorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        if span.metadata().name() == "reconcile" {
            let mut fields = Fields::default();
            span.record(&mut fields);
            if let (Some(controller), Some(trigger)) = (fields.0.remove("controller"), fields.0.remove("trigger")) {
                triggers().lock().expect("not poisoned").entry(controller).or_default().push(trigger);
            }
        }
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// What a file watcher thread, a timer task or an operator task needs of it.
const _: fn() = || {
    fn outside_the_runtime<T: Clone + Send + Sync + 'static>() {}
    outside_the_runtime::<Waker>();
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_outside_the_runtime_wakes_a_controller_with_the_external_trigger() {
    let triggers = triggers();
    let state = cosi::state::memory();
    let (outside, slot) = (Arc::new(AtomicU64::new(1)), Slot::default());
    let runtime = Runtime::new(state.clone());
    runtime
        .register(Mirror { outside: Arc::clone(&outside), slot: Arc::clone(&slot) }.named("mirror"))
        .expect("register");
    runtime.start().expect("start");
    runtime.settled().await;
    assert_eq!(state.get::<StrResource>("mirror").await.expect("mirrored").value, "1");

    outside.store(2, Ordering::SeqCst);
    let waker = taken(&slot);
    std::thread::spawn(move || waker.wake()).join().expect("the waking thread");
    runtime.settled().await;
    assert_eq!(state.get::<StrResource>("mirror").await.expect("mirrored").value, "2");

    let stats = runtime.stats("mirror").expect("stats");
    assert_eq!((stats.reconciles, stats.wakeups, stats.external_wakeups), (2, 2, 1), "{stats:?}");
    let seen = triggers.lock().expect("not poisoned").get("mirror").cloned().unwrap_or_default();
    assert_eq!(seen, ["start", "external"]);
    runtime.shutdown().await;
}

/// Enters each reconcile, says so, and waits at a gate the test opens.
#[controller(outputs = [], inventory = false)]
struct Gated {
    slot: Slot,
    entered: mpsc::UnboundedSender<u64>,
    gate: Arc<Semaphore>,
    count: u64,
}

impl Gated {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        self.slot.lock().expect("not poisoned").get_or_insert_with(|| ctx.waker());
        self.count += 1;
        let _ = self.entered.send(self.count);
        if let Ok(permit) = self.gate.acquire().await {
            permit.forget();
        }
        Ok(())
    }
}

/// The count of the next reconcile to start.
async fn next(reconciles: &mut mpsc::UnboundedReceiver<u64>) -> u64 {
    let next = tokio::time::timeout(EVENTUALLY, reconciles.recv()).await;
    next.expect("a reconcile within the bound").expect("the controller runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_ups_while_the_controller_is_busy_make_exactly_one_more_reconcile() {
    let (entered, mut reconciles) = mpsc::unbounded_channel();
    let (slot, gate) = (Slot::default(), Arc::new(Semaphore::new(0)));
    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(Gated { slot: Arc::clone(&slot), entered, gate: Arc::clone(&gate), count: 0 }).expect("register");
    runtime.start().expect("start");
    assert_eq!(next(&mut reconciles).await, 1);

    // The first reconcile is busy at the gate: a hundred wake-ups from three
    // threads are one pending wake-up.
    let waker = taken(&slot);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let waker = waker.clone();
            std::thread::spawn(move || (0..100).for_each(|_| waker.wake()))
        })
        .collect();
    threads.into_iter().for_each(|thread| thread.join().expect("a waking thread"));
    gate.add_permits(1);
    assert_eq!(next(&mut reconciles).await, 2);
    gate.add_permits(1);
    runtime.settled().await;
    assert!(reconciles.try_recv().is_err(), "a third reconcile ran");
    let stats = runtime.stats("Gated").expect("stats");
    assert_eq!((stats.reconciles, stats.external_wakeups), (2, 1), "{stats:?}");
    runtime.shutdown().await;
}

/// Fails its first reconcile, after handing out its waker.
#[controller(outputs = [], inventory = false)]
struct FailsFirst {
    slot: Slot,
    entered: mpsc::UnboundedSender<u64>,
    count: u64,
}

impl FailsFirst {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        self.slot.lock().expect("not poisoned").get_or_insert_with(|| ctx.waker());
        self.count += 1;
        let _ = self.entered.send(self.count);
        match self.count {
            1 => Err(cosi::Error::invalid_argument("the first reconcile fails on purpose")),
            _ => Ok(()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waker_outlives_restarts_and_does_nothing_after_shutdown() {
    let mut options = RuntimeOptions::default();
    options.backoff = BackoffOptions { initial: std::time::Duration::from_millis(1), ..BackoffOptions::default() };
    let runtime = Runtime::with_options(cosi::state::memory(), options);
    let (entered, mut reconciles) = mpsc::unbounded_channel();
    let slot = Slot::default();
    runtime.register(FailsFirst { slot: Arc::clone(&slot), entered, count: 0 }).expect("register");
    runtime.start().expect("start");
    assert_eq!(next(&mut reconciles).await, 1, "the failure");
    assert_eq!(next(&mut reconciles).await, 2, "the restart");
    runtime.settled().await;

    // The waker from before the failure wakes the restarted controller.
    let waker = taken(&slot);
    waker.wake();
    assert_eq!(next(&mut reconciles).await, 3);
    runtime.settled().await;

    runtime.shutdown().await;
    let before = runtime.stats("FailsFirst").expect("stats");
    waker.wake();
    waker.wake_item(&IntResource::pointer("any")).expect("a reconcile controller takes any item");
    assert_eq!(runtime.stats("FailsFirst").expect("stats"), before, "a wake-up after the shutdown counted");
    assert!(reconciles.try_recv().is_err());
    drop(runtime);
    waker.wake();
}

/// Counts its reconciles per item.
#[controller(inputs = [Primary<IntResource>(namespace = "polled")], outputs = [], concurrency = 2, inventory = false)]
struct Poller {
    slot: Slot,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Poller {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<()> {
        self.slot.lock().expect("not poisoned").get_or_insert_with(|| ctx.waker());
        *self.counts.lock().expect("not poisoned").entry(item.id().to_owned()).or_default() += 1;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_controller_is_woken_per_item_or_for_all_its_items() {
    let state = cosi::state::memory();
    let (slot, counts) = (Slot::default(), Arc::new(Mutex::new(BTreeMap::new())));
    let runtime = Runtime::new(state.clone());
    runtime.register(Poller { slot: Arc::clone(&slot), counts: Arc::clone(&counts) }).expect("register");
    runtime.start().expect("start");
    // Once the first listing is done, each create queues its item once.
    runtime.settled().await;
    for id in ["a", "b"] {
        state
            .create(Typed::new_in("polled", id, IntResource { value: 1 }), CreateOptions::default())
            .await
            .expect("create");
    }
    runtime.settled().await;
    let snapshot = || counts.lock().expect("not poisoned").clone();
    assert_eq!(snapshot(), BTreeMap::from([("a".to_owned(), 1), ("b".to_owned(), 1)]));

    let waker = taken(&slot);
    waker.wake_item(&Pointer::new("polled", IntResource::TYPE, "a")).expect("a primary item");
    runtime.settled().await;
    assert_eq!(snapshot(), BTreeMap::from([("a".to_owned(), 2), ("b".to_owned(), 1)]));

    waker.wake();
    runtime.settled().await;
    assert_eq!(snapshot(), BTreeMap::from([("a".to_owned(), 3), ("b".to_owned(), 2)]));

    for wrong in [IntResource::pointer("a"), Pointer::new("polled", StrResource::TYPE, "a")] {
        let error = waker.wake_item(&wrong).expect_err("not a primary item");
        assert!(error.is_invalid_argument(), "{error:?}");
    }
    runtime.settled().await;
    assert_eq!(snapshot(), BTreeMap::from([("a".to_owned(), 3), ("b".to_owned(), 2)]));
    assert_eq!(runtime.stats("Poller").expect("stats").external_wakeups, 2);
    runtime.shutdown().await;
}
