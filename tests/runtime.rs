//! The runtime's own behaviour beyond the conformance suite: graph checks at
//! registration, the inventory, coalescing, shutdown, the graph exports and
//! the generic controllers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cosi::controller::{Merge, QueueTransform, Transform};
use cosi::prelude::*;
use cosi::runtime::{Graph, RuntimeError};
use cosi::state::WatchCondition;
use cosi::testing::resources::{IntResource, StrResource};
use cosi::testing::runtime::eventually;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Configs.runtime-test.cosi.dev", namespace = "default")]
pub struct Config {
    pub value: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.runtime-test.cosi.dev", namespace = "default")]
pub struct Status {
    pub value: String,
    pub reconciles: u64,
}

/// Collected by `inventory`: copies configs to statuses.
#[controller(inputs = [Weak<Config>], outputs = [Exclusive<Status>])]
async fn copier(ctx: &mut Ctx) -> cosi::Result<()> {
    for config in ctx.list::<Config>(&ListOptions::default()).await? {
        ctx.modify::<Status>(config.id(), |status| status.value.clone_from(&config.value)).await?;
    }
    ctx.cleanup_outputs::<Status>().await
}

/// [`copier`] through the context that checks types at run time only: the
/// labelled configs to statuses, the others' statuses cleaned up, and a
/// finalizer on each config copied.
#[controller(inputs = [Strong<Config>], outputs = [Exclusive<Status>], inventory = false)]
async fn dynamic_copier(ctx: &mut Ctx) -> cosi::Result<()> {
    let ctx = ctx.dynamic();
    let copied = ListOptions::default().label(LabelQuery::default().equal("copy", "yes"));
    for config in ctx.list::<Config>(&copied).await? {
        ctx.modify::<Status>(config.id(), |status| status.value.clone_from(&config.value)).await?;
        ctx.add_finalizers::<Config>(&config, &["copied", "dynamic"]).await?;
    }
    for config in ctx.list_dynamic(&Config::kind(), &ListOptions::default()).await? {
        if config.metadata().labels().get("copy") != Some("yes") {
            ctx.remove_finalizers_dynamic(config.metadata().pointer(), &["copied", "dynamic"]).await?;
        }
    }
    ctx.cleanup_outputs::<Status>().await
}

/// Also collected: reads statuses.
#[controller(inputs = [Weak<Status>], outputs = [])]
async fn observer(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<Status>(&ListOptions::default()).await.map(drop)
}

/// Not collected: a second exclusive writer of `Status`.
#[controller(inputs = [Weak<Config>], outputs = [Exclusive<Status>], inventory = false)]
async fn rival(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<Config>(&ListOptions::default()).await.map(drop)
}

/// Not collected: counts its reconciles into one status, slowly, to show coalescing.
#[controller(inputs = [Weak<Config>(namespace = "burst")], outputs = [Exclusive<Status>], inventory = false)]
async fn counter(ctx: &mut Ctx) -> cosi::Result<()> {
    let configs = ctx.list_in::<Config>("burst", &ListOptions::default()).await?;
    let last = configs.iter().map(|config| config.value.clone()).max().unwrap_or_default();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    ctx.modify::<Status>("burst", |status| {
        status.value.clone_from(&last);
        status.reconciles += 1;
    })
    .await
    .map(drop)
}

/// Flags when it is dropped, which happens when its task ends.
#[controller(inputs = [Weak<Config>], outputs = [], inventory = false)]
struct Guarded {
    dropped: Arc<AtomicBool>,
}

impl Guarded {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        ctx.list::<Config>(&ListOptions::default()).await.map(drop)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// Not collected: reads configs in the namespace `namespace` holds when it reconciles.
#[controller(inputs = [Weak<Config>], outputs = [], inventory = false)]
struct Follower {
    namespace: Arc<parking_lot::Mutex<String>>,
    reading: Option<String>,
}

impl Follower {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let namespace = self.namespace.lock().clone();
        // New inputs wake the controller again: move only when the namespace changed.
        if self.reading.as_ref() != Some(&namespace) {
            ctx.update_inputs([Input::of::<Config>(InputKind::Weak).in_namespace(&namespace)])?;
            self.reading = Some(namespace);
        }
        Ok(())
    }
}

/// Not collected: sets its inputs on every reconcile, as a controller that
/// computes them each time does; they are the same from the second time on.
#[controller(inputs = [Weak<Config>], outputs = [], inventory = false)]
struct Restless;

impl Restless {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        ctx.update_inputs([Input::of::<Config>(InputKind::Weak).in_namespace("restless")])
    }
}

/// Not collected: a queue controller that fails every config but `move`,
/// which moves its input to the namespace `elsewhere`.
#[controller(inputs = [Primary<Config>], outputs = [], inventory = false)]
struct Mover;

impl Mover {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<(), cosi::controller::BoxError> {
        match item.id() {
            "move" => Ok(ctx.update_inputs([Input::of::<Config>(InputKind::Primary).in_namespace("elsewhere")])?),
            _ => Err(format!("{item} fails on purpose").into()),
        }
    }
}

/// Not collected: a queue controller of two workers whose reconciles wait
/// for each other holding their threads, noting the thread each runs on.
#[controller(inputs = [Primary<Config>(namespace = "parallel")], outputs = [], concurrency = 2, inventory = false)]
struct Pair {
    inside: Arc<std::sync::atomic::AtomicUsize>,
    threads: Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
}

impl Pair {
    async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) -> cosi::Result<()> {
        self.threads.lock().expect("not poisoned").push(std::thread::current().id());
        self.inside.fetch_add(1, Ordering::SeqCst);
        let started = std::time::Instant::now();
        while self.inside.load(Ordering::SeqCst) < 2 {
            if started.elapsed() > std::time::Duration::from_secs(20) {
                return Err(cosi::Error::other(std::io::Error::other("the other item never ran at the same time")));
            }
            std::hint::spin_loop();
        }
        Ok(())
    }
}

/// Not collected: asks for another reconcile every time, forever.
#[controller(inputs = [Weak<Config>(namespace = "spinning")], outputs = [], inventory = false)]
async fn spinner(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.requeue();
    Ok(())
}

/// Not collected: panics in its first call, before it returns its future.
#[controller(inputs = [Weak<Config>(namespace = "hasty")], outputs = [], inventory = false)]
#[derive(Default)]
struct Hasty {
    calls: u32,
}

impl Hasty {
    fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> impl std::future::Future<Output = cosi::Result<()>> + Send {
        self.calls += 1;
        assert!(self.calls > 1, "the first call panics before it returns its future");
        async { Ok(()) }
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

#[test]
fn the_inventory_collects_annotated_controllers_and_validates_them_as_a_graph() {
    let runtime = Runtime::from_inventory(cosi::state::memory()).expect("a valid graph");
    let names = runtime.controllers();
    assert!(names.contains(&"copier".to_owned()) && names.contains(&"observer".to_owned()), "{names:?}");
    assert!(!names.contains(&"rival".to_owned()), "`inventory = false` was collected");

    let error = runtime.register(rival {}).expect_err("two exclusive writers");
    assert!(matches!(error, RuntimeError::Conflict(_)));
    let message = error.to_string();
    assert!(message.contains("`copier`") && message.contains("`rival`") && message.contains(Status::TYPE), "{message}");

    let graph = Graph::from_inventory();
    assert!(graph.controllers.iter().any(|controller| controller.name == "copier"));
}

#[test]
fn registration_refuses_duplicate_and_reserved_names() {
    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(observer {}).expect("register");
    let error = runtime.register(observer {}).expect_err("duplicate name");
    assert_eq!(error.to_string(), "two controllers are named `observer`");
    let error = runtime.register(observer {}.named("runtime")).expect_err("reserved name");
    assert!(error.to_string().contains("reserved"), "{error}");
}

#[test]
fn a_burst_of_changes_wakes_a_controller_a_few_times_and_never_misses_the_last() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        runtime.register(counter {}).expect("register");
        runtime.start().expect("start");
        for i in 0..10_000 {
            let config = Typed::new_in("burst", format!("c{i:05}"), Config { value: format!("{i:05}") });
            state.create(config, CreateOptions::default()).await.expect("create");
        }
        let status = eventually("the last change", || async {
            let status = state.get::<Status>("burst").await.map_err(|error| error.to_string())?;
            match status.value == "09999" {
                true => Ok(status),
                false => Err(format!("{:?}", status.value)),
            }
        })
        .await;
        assert!(status.reconciles < 1_000, "{} reconciles for 10 000 changes", status.reconciles);
        let stats = runtime.stats("counter").expect("stats");
        assert!(stats.wakeups < 1_000, "{stats:?}");
        runtime.shutdown().await;
    });
}

#[test]
fn a_kind_watch_stops_when_no_controller_reads_the_kind_any_more() {
    block_on(async {
        let state = cosi::state::memory();
        let mut options = cosi::runtime::RuntimeOptions::default();
        options.status_namespace = None;
        let runtime = Runtime::with_options(state.clone(), options);
        let namespace = Arc::new(parking_lot::Mutex::new("one".to_owned()));
        runtime.register(Follower { namespace: Arc::clone(&namespace), reading: None }).expect("register");
        assert_eq!(runtime.watched_kinds(), [], "nothing is watched before the start");
        runtime.start().expect("start");
        runtime.settled().await;
        assert_eq!(runtime.watched_kinds(), [Kind::new("one", Config::TYPE)]);
        // Each change in the namespace it reads moves the follower on to the next.
        for (from, to) in [("one", "two"), ("two", "three"), ("three", "one")] {
            *namespace.lock() = to.to_owned();
            let config = Typed::new_in(from, format!("to-{to}"), Config::default());
            state.create(config, CreateOptions::default()).await.expect("create");
            runtime.settled().await;
            assert_eq!(runtime.watched_kinds(), [Kind::new(to, Config::TYPE)], "moved from {from} to {to}");
        }
        runtime.shutdown().await;
    });
}

#[test]
fn setting_the_same_inputs_again_does_not_wake_the_controller() {
    block_on(async {
        let state = cosi::state::memory();
        let mut options = cosi::runtime::RuntimeOptions::default();
        options.status_namespace = None;
        let runtime = Runtime::with_options(state.clone(), options);
        runtime.register(Restless).expect("register");
        runtime.start().expect("start");
        // Bounds against a hang, not timing assertions: each update_inputs
        // used to wake the controller again, so it never settled.
        let settled = || tokio::time::timeout(std::time::Duration::from_secs(30), runtime.settled());
        settled().await.expect("the runtime settles");
        let config = Typed::new_in("restless", "one", Config::default());
        state.create(config, CreateOptions::default()).await.expect("create");
        settled().await.expect("the runtime settles after a change");
        let stats = runtime.stats("Restless").expect("stats");
        // The start, the move to `restless` once, and the change.
        assert!(stats.reconciles <= 4, "{stats:?}");
        assert_eq!(runtime.watched_kinds(), [Kind::new("restless", Config::TYPE)]);
        runtime.shutdown().await;
    });
}

#[test]
fn failed_items_of_a_kind_no_longer_read_leave_the_queue_and_their_backoff() {
    block_on(async {
        let state = cosi::state::memory();
        let mut options = cosi::runtime::RuntimeOptions::default();
        options.status_namespace = None;
        let runtime = Runtime::with_options(state.clone(), options);
        runtime.register(Mover).expect("register");
        runtime.start().expect("start");
        state.create(Typed::new("broken", Config::default()), CreateOptions::default()).await.expect("create");
        runtime.settled().await;
        let stats = runtime.stats("Mover").expect("stats");
        assert!(stats.errors >= 1, "{stats:?}");
        assert_eq!((stats.queue_depth, stats.backing_off), (1, 1), "the failed item waits out its backoff");
        state.create(Typed::new("move", Config::default()), CreateOptions::default()).await.expect("create");
        runtime.settled().await;
        assert_eq!(runtime.watched_kinds(), [Kind::new("elsewhere", Config::TYPE)]);
        let stats = runtime.stats("Mover").expect("stats");
        assert_eq!((stats.queue_depth, stats.backing_off), (0, 0), "{stats:?}");
        runtime.shutdown().await;
    });
}

#[test]
fn shutdown_stops_every_controller_task() {
    block_on(async {
        let runtime = Runtime::new(cosi::state::memory());
        let dropped = Arc::new(AtomicBool::new(false));
        runtime.register(Guarded { dropped: Arc::clone(&dropped) }).expect("register");
        runtime.start().expect("start");
        eventually("a reconcile", || async {
            match runtime.stats("Guarded").is_some_and(|stats| stats.reconciles > 0) {
                true => Ok(()),
                false => Err("none yet"),
            }
        })
        .await;
        assert!(!dropped.load(Ordering::SeqCst));
        assert!(runtime.is_running());
        runtime.shutdown().await;
        assert!(!runtime.is_running());
        assert!(dropped.load(Ordering::SeqCst), "the controller outlived the shutdown");
        assert_eq!(runtime.start(), Err(RuntimeError::ShutDown));
    });
}

/// A reconcile that panics before it returns its future restarts with
/// backoff, as one that panics inside its future does.
#[test]
fn a_reconcile_that_panics_before_its_future_restarts() {
    block_on(async {
        let runtime = Runtime::new(cosi::state::memory());
        runtime.register(Hasty::default()).expect("register");
        runtime.start().expect("start");
        eventually("a reconcile after the panic", || async {
            match runtime.stats("Hasty") {
                Some(stats) if stats.reconciles >= 2 && stats.next_retry.is_none() => Ok(()),
                stats => Err(format!("{stats:?}")),
            }
        })
        .await;
        let stats = runtime.stats("Hasty").expect("stats");
        assert_eq!((stats.errors, stats.restarts), (1, 1), "{stats:?}");
        runtime.shutdown().await;
    });
}

/// The runtime owns its tasks: dropping it stops them all, while a handle
/// left behind keeps nothing running and registers nothing.
#[test]
fn dropping_the_runtime_stops_every_task_and_its_handles_see_it() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        let dropped = Arc::new(AtomicBool::new(false));
        runtime.register(Guarded { dropped: Arc::clone(&dropped) }).expect("register");
        runtime.start().expect("start");
        runtime.settled().await;
        let handle = runtime.handle();
        assert!(!handle.watched_kinds().is_empty());

        drop(runtime);
        assert!(!handle.is_running());
        eventually("the controller's task to end", || async {
            match dropped.load(Ordering::SeqCst) {
                true => Ok(()),
                false => Err("the controller is alive"),
            }
        })
        .await;
        eventually("the watch tasks to end", || async {
            match handle.watched_kinds().is_empty() {
                true => Ok(()),
                false => Err(format!("still watched: {:?}", handle.watched_kinds())),
            }
        })
        .await;
        assert_eq!(handle.register(copier {}), Err(RuntimeError::ShutDown));
        // Nothing reconciles any more.
        let reconciles = handle.stats("Guarded").expect("registered").reconciles;
        state.create(Typed::new("late", Config::default()), CreateOptions::default()).await.expect("create");
        handle.settled().await;
        assert_eq!(handle.stats("Guarded").expect("registered").reconciles, reconciles);
        handle.shutdown().await;
    });
}

/// Controllers share one task, which lets the program's other tasks run
/// between its turns: a controller that is always woken again does not keep
/// a single-threaded program from running anything else.
#[test]
fn a_controller_that_never_rests_does_not_starve_the_program() {
    // On a thread of its own: starved, the runtime would never get back to
    // this test's own checks, so the verdict comes from outside it.
    let (done, verdict) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        spin_beside_another_task();
        let _ = done.send(());
    });
    verdict
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the spinning controller starved the rest of the program for a minute");
}

fn spin_beside_another_task() {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(async {
        let runtime = Runtime::new(cosi::state::memory());
        runtime.register(spinner {}).expect("register");
        runtime.start().expect("start");
        let ticks = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let ticker = {
            let ticks = Arc::clone(&ticks);
            tokio::spawn(async move {
                loop {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            })
        };
        eventually("the other task to run beside the spinning controller", || async {
            let reconciles = runtime.stats("spinner").expect("registered").reconciles;
            match (reconciles > 1_000, ticks.load(Ordering::SeqCst) > 10) {
                (true, true) => Ok(()),
                other => Err(format!("{reconciles} reconciles, (many reconciles, many ticks) = {other:?}")),
            }
        })
        .await;
        ticker.abort();
        runtime.shutdown().await;
    });
}

#[test]
fn a_queue_controllers_workers_run_in_parallel() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        let threads = Arc::default();
        let pair = Pair { inside: Arc::default(), threads: Arc::clone(&threads) };
        runtime.register(pair).expect("register");
        runtime.start().expect("start");
        for id in ["a", "b"] {
            let config = Typed::new_in("parallel", id, Config::default());
            state.create(config, CreateOptions::default()).await.expect("create");
        }
        // Both items reconcile at once (each waits for the other, holding its
        // thread), so two workers run them, on two threads. An item may run
        // once more, when the start's listing finds it queued by its event
        // and parks that change until the first reconcile is done.
        eventually("both items reconciled", || async {
            match runtime.stats("Pair").expect("registered").reconciles {
                2.. => Ok(()),
                reconciles => Err(format!("{reconciles} reconciles")),
            }
        })
        .await;
        assert_eq!(runtime.stats("Pair").expect("registered").errors, 0, "an item waited in vain for the other");
        let threads = threads.lock().expect("not poisoned").clone();
        assert_ne!(threads[0], threads[1], "the first two reconciles, at once, ran on one thread");
        runtime.shutdown().await;
    });
}

#[test]
fn the_graph_exports_as_dot_mermaid_and_json() {
    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(copier {}).expect("register");
    runtime.register(observer {}).expect("register");
    let graph = runtime.graph();

    let dot = graph.to_dot();
    assert!(dot.starts_with("digraph cosi {"), "{dot}");
    assert!(dot.contains("label=\"copier\"") && dot.contains(&format!("label=\"{}\"", Config::TYPE)), "{dot}");
    assert!(dot.contains("label=\"weak default\"") && dot.contains("label=\"exclusive\""), "{dot}");

    let mermaid = graph.to_mermaid();
    assert!(mermaid.starts_with("flowchart LR"), "{mermaid}");
    assert!(mermaid.contains("-- \"exclusive\" -->") && mermaid.contains("\"observer\""), "{mermaid}");

    let json: serde_json::Value = serde_json::from_str(&graph.to_json()).expect("json");
    assert_eq!(json["controllers"][0]["name"], "copier");
    assert_eq!(json["controllers"][0]["inputs"][0]["kind"], "weak");
    assert_eq!(json["controllers"][0]["outputs"][0]["kind"], "exclusive");
    assert_eq!(json["controllers"][0]["outputs"][0]["type"], Status::TYPE);
}

#[test]
fn transform_follows_its_inputs_and_releases_their_finalizers() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        let transform = Transform::<IntResource, StrResource>::new(
            "int-to-str",
            |int| (int.value >= 0).then(|| int.id().to_owned()),
            |int, str| {
                str.value = int.value.to_string();
                Ok(())
            },
        )
        .input_finalizers();
        runtime.register(transform).expect("register");
        runtime.start().expect("start");
        for (id, value) in [("a", 1), ("b", 2), ("negative", -1)] {
            state.create(Typed::new(id, IntResource { value }), CreateOptions::default()).await.expect("create");
        }
        let strs = || async {
            let all = state.list::<StrResource>(&ListOptions::default()).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(all.iter().map(|str| (str.id().to_owned(), str.value.clone())).collect::<Vec<_>>())
        };
        eventually("outputs", || async {
            let strs = strs().await?;
            match strs == [("a".to_owned(), "1".to_owned()), ("b".to_owned(), "2".to_owned())] {
                true => Ok(()),
                false => Err(format!("{strs:?}")),
            }
        })
        .await;
        assert!(
            !state.teardown::<IntResource>("a", TeardownOptions::default()).await.expect("teardown"),
            "no finalizer"
        );
        state.watch_for::<IntResource>("a", WatchCondition::new().finalizers_empty()).await.expect("released");
        eventually("the output gone", || async {
            let strs = strs().await?;
            match strs.len() {
                1 => Ok(()),
                _ => Err(format!("{strs:?}")),
            }
        })
        .await;
        runtime.shutdown().await;
    });
}

#[test]
fn the_dynamic_context_lists_with_options_modifies_and_cleans_up() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        runtime.register(dynamic_copier {}).expect("register");
        runtime.start().expect("start");
        for (id, copy) in [("a", true), ("b", true), ("c", false)] {
            let mut config = Typed::new(id, Config { value: format!("value-{id}") });
            if copy {
                config.metadata_mut().labels_mut().set("copy", "yes");
            }
            state.create(config, CreateOptions::default()).await.expect("create");
        }
        runtime.settled().await;
        let statuses = || async {
            let all = state.list::<Status>(&ListOptions::default()).await.expect("list");
            all.iter().map(|status| (status.id().to_owned(), status.value.clone())).collect::<Vec<_>>()
        };
        assert_eq!(statuses().await, [("a".to_owned(), "value-a".to_owned()), ("b".to_owned(), "value-b".to_owned())]);
        let finalizers = |id| {
            let state = state.clone();
            async move {
                let config = state.get::<Config>(id).await.expect("get");
                config.metadata().finalizers().iter().map(str::to_owned).collect::<Vec<_>>()
            }
        };
        assert_eq!(finalizers("a").await, ["copied", "dynamic"]);
        assert!(finalizers("c").await.is_empty());

        // No longer labelled: its status is cleaned up, its finalizers removed.
        state
            .modify::<Config>("b", UpdateOptions::default(), |config| {
                config.metadata_mut().labels_mut().remove("copy");
            })
            .await
            .expect("unlabel");
        runtime.settled().await;
        assert_eq!(statuses().await, [("a".to_owned(), "value-a".to_owned())]);
        assert!(finalizers("b").await.is_empty());
        runtime.shutdown().await;
    });
}

#[test]
fn queue_transform_follows_its_inputs() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        runtime
            .register(
                QueueTransform::<IntResource, StrResource>::new("q-int-to-str", |int, str| {
                    str.value = format!("#{}", int.value);
                    Ok(())
                })
                .concurrency(2),
            )
            .expect("register");
        runtime.start().expect("start");
        for i in 0..20 {
            state
                .create(Typed::new(format!("i{i:02}"), IntResource { value: i }), CreateOptions::default())
                .await
                .expect("create");
        }
        eventually("outputs", || async {
            let all = state.list::<StrResource>(&ListOptions::default()).await.map_err(|e| e.to_string())?;
            match all.len() == 20 && all[7].value == "#7" {
                true => Ok(()),
                false => Err(format!("{} outputs", all.len())),
            }
        })
        .await;
        assert!(!state.teardown::<IntResource>("i07", TeardownOptions::default()).await.expect("teardown"));
        state.watch_for::<IntResource>("i07", WatchCondition::new().finalizers_empty()).await.expect("released");
        assert!(state.get::<StrResource>("i07").await.err().is_some_and(|error| error.is_not_found()));
        runtime.shutdown().await;
    });
}

#[test]
fn merge_applies_layers_from_lowest_to_highest() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        let merge = Merge::<Config>::new("merge-configs", "layers", "merged", |config| {
            let (layer, id) = config.id().split_once('/').unwrap_or(("0", config.id()));
            (id.to_owned(), layer.parse().unwrap_or(0))
        })
        .with_merge(|merged, layer| {
            if !layer.value.is_empty() {
                merged.value.clone_from(&layer.value);
            }
        });
        runtime.register(merge).expect("register");
        runtime.start().expect("start");
        for (id, value) in
            [("0/hostname", "default"), ("20/hostname", "dhcp"), ("10/hostname", "config"), ("0/mtu", "1500")]
        {
            let config = Typed::new_in("layers", id, Config { value: value.to_owned() });
            state.create(config, CreateOptions::default()).await.expect("create");
        }
        let merged = |id: &'static str, expected: &'static str| {
            let state = state.clone();
            async move {
                eventually(&format!("merged {id}"), || async {
                    let pointer = Pointer::new("merged", Config::TYPE, id);
                    let config = state.get::<Config>(&pointer).await.map_err(|e| e.to_string())?;
                    match config.value == expected {
                        true => Ok(()),
                        false => Err(config.value.clone()),
                    }
                })
                .await;
            }
        };
        merged("hostname", "dhcp").await;
        merged("mtu", "1500").await;
        state
            .destroy_dynamic(&Pointer::new("layers", Config::TYPE, "20/hostname"), DestroyOptions::default())
            .await
            .expect("destroy");
        merged("hostname", "config").await;
        runtime.shutdown().await;
    });
}

#[test]
fn reconciles_and_failures_are_counted_through_the_metrics_facade() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The runtime takes its metric handles when a controller is registered.
    let runtime = metrics::with_local_recorder(&recorder, || {
        let runtime = Runtime::new(cosi::state::memory());
        runtime.register(copier {}).expect("register");
        runtime
    });
    block_on(async {
        runtime.start().expect("start");
        eventually("a reconcile", || async {
            match runtime.stats("copier").is_some_and(|stats| stats.reconciles > 0) {
                true => Ok(()),
                false => Err("none yet"),
            }
        })
        .await;
        runtime.shutdown().await;
    });
    let metrics: Vec<_> = snapshotter.snapshot().into_vec();
    let find = |name: &str| {
        metrics
            .iter()
            .find(|(key, ..)| {
                key.key().name() == name
                    && key.key().labels().any(|label| label.key() == "controller" && label.value() == "copier")
            })
            .map(|(.., value)| value)
    };
    assert!(matches!(find("cosi_controller_reconciles_total"), Some(DebugValue::Counter(n)) if *n >= 1));
    assert!(matches!(find("cosi_controller_errors_total"), Some(DebugValue::Counter(0))));
    assert!(matches!(find("cosi_controller_busy_seconds"), Some(DebugValue::Histogram(values)) if !values.is_empty()));
}

#[test]
fn a_controller_registered_from_another_thread_after_the_start_runs() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        runtime.start().expect("start");
        let handle = runtime.handle();
        std::thread::spawn(move || handle.register(copier {}))
            .join()
            .expect("the registering thread")
            .expect("register");
        let config = Typed::new("late", Config { value: "late".to_owned() });
        state.create(config, CreateOptions::default()).await.expect("create");
        eventually("the late controller's output", || async {
            state.get::<Status>("late").await.map_err(|error| error.to_string())
        })
        .await;
        runtime.shutdown().await;
    });
}
