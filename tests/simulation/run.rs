//! One simulated run: a seed's system, clients and faults on one
//! current-thread tokio runtime with a paused clock, then the checks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cosi::prelude::*;
use cosi::runtime::RuntimeOptions;
use cosi::state::{DestroyOptions, Error, MemoryOptions, MemoryState, TeardownOptions};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::checks::{Observer, Seen, Violations, seen};
use crate::controllers;
use crate::faults::{Faults, FaultyState, FaultyStore, Profile, error_name};
use crate::system::{IDS, Logic, System, World, selector_kind};
use crate::trace::Trace;
use crate::types::{Sel, Sh, SimSpec, Src, value_of};

/// How long the system has to converge once the faults stop (simulated).
const CONVERGE_WITHIN: Duration = Duration::from_secs(10 * 60);
/// How long nothing may happen once it has converged (simulated).
const QUIET_FOR: Duration = Duration::from_secs(5 * 60);
/// Writes after the faults stop that mean controllers never stop writing.
const RUNAWAY_WRITES: u64 = 50_000;

/// The state the controllers work on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `MemoryState`.
    Memory,
    /// `MemoryState::with_store` over a store that refuses batches (what
    /// `cosi-redb` builds on), its contents compared with the state's at the end.
    Store,
}

pub struct Report {
    pub seed: u64,
    pub backend: Backend,
    pub controllers: usize,
    pub kinds: usize,
    /// Simulated time, start to end.
    pub simulated: Duration,
    /// Simulated time from the faults' stop to convergence.
    pub converged_in: Option<Duration>,
    pub trace_hash: u64,
    pub trace: Vec<String>,
    pub writes: u64,
    pub failures: Vec<String>,
}

/// Runs `seed`; `echo` prints the trace as it is written.
pub fn run(seed: u64, echo: bool) -> Report {
    // The runtime's backoff draws its jitter from this thread's generator.
    fastrand::seed(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread tokio runtime");
    runtime.block_on(simulate(seed, echo))
}

async fn simulate(seed: u64, echo: bool) -> Report {
    let mut rng = fastrand::Rng::with_seed(seed);
    let trace = Trace::new(echo);
    let system = System::generate(&mut rng);
    let backend = if rng.u8(0..3) == 0 { Backend::Store } else { Backend::Memory };
    let history = MemoryOptions {
        history_initial_capacity: 4,
        history_max_capacity: rng.usize(16..=256),
        history_gap: rng.usize(1..=4),
    };
    // Drawn apart from the system's generator, so a seed's graph and work
    // stay what they were before the choice existed.
    let observed = fastrand::Rng::with_seed(seed ^ 0x0b5e_4ed5).bool();
    let feeds = if observed { "observers" } else { "watches" };
    trace.log(format_args!("seed {seed}: {backend:?}, history {history:?}, runtime feeds: {feeds}"));
    for node in &system.nodes {
        let exclusive = if node.exclusive { "exclusive" } else { "shared" };
        trace.log(format_args!("node {} writes {} ({exclusive}): {:?}", node.name, node.output, node.logic));
    }
    let names: Vec<String> = system.nodes.iter().map(|node| node.name.clone()).collect();
    let profile = Profile::draw(&mut rng, &names);
    trace.log(format_args!("faults {profile:?}"));
    let faults = Faults::new(rng.u64(..), profile, Arc::clone(&trace));
    let store = Arc::new(FaultyStore { stored: Mutex::default(), faults: Arc::clone(&faults) });
    let inner: Arc<dyn State> = match backend {
        Backend::Memory => Arc::new(MemoryState::new(history).expect("valid history settings")),
        Backend::Store => Arc::new(MemoryState::with_store(history, Arc::clone(&store) as _).expect("an empty store")),
    };
    let faulty: Arc<dyn State> = Arc::new(FaultyState {
        inner: Arc::clone(&inner),
        faults: Arc::clone(&faults),
        trace: Arc::clone(&trace),
        observed,
    });

    let violations = Arc::new(Violations::default());
    let mut mirrors = Vec::new();
    for kind in system.kinds() {
        let owner = system.nodes.iter().find(|node| node.output == kind).map(|node| node.name.clone());
        let resume = if rng.bool() { rng.f64() * 0.2 } else { 0.0 };
        let observer = Observer { kind, owner, slow: rng.u8(0..4) == 0, resume, mirror: Arc::default() };
        mirrors.push((observer.kind.clone(), Arc::clone(&observer.mirror)));
        let run = observer.run(
            Arc::clone(&inner),
            fastrand::Rng::with_seed(rng.u64(..)),
            Arc::clone(&faults),
            Arc::clone(&trace),
            Arc::clone(&violations),
        );
        tokio::spawn(run);
    }

    let mut failures = Vec::new();
    let mut options = RuntimeOptions::default();
    options.status_namespace = None;
    let runtime = Runtime::with_options(Arc::clone(&faulty), options);
    let mut order: Vec<usize> = (0..system.nodes.len()).collect();
    rng.shuffle(&mut order);
    let mut later = order.split_off(rng.usize(0..=order.len()));
    let register = |index: usize, failures: &mut Vec<String>| {
        let node = &system.nodes[index];
        trace.log(format_args!("register {}", node.name));
        if let Err(error) = controllers::register(&runtime.handle(), node, &faults, &trace) {
            failures.push(format!("{} was refused: {error}", node.name));
        }
    };
    for index in order {
        register(index, &mut failures);
    }
    runtime.start().expect("the runtime starts");
    trace.log("runtime started");

    // The clients' work, with faults until a seeded step.
    let steps = rng.usize(20..=300);
    let stop_at = rng.usize(steps / 4..=steps);
    let selectors = system.selectors();
    for step in 0..steps {
        if step == stop_at {
            faults.stop();
            trace.log("faults stop");
        }
        // Half the operations come in bursts, at the same simulated instant.
        if rng.bool() {
            tokio::time::sleep(Duration::from_millis(rng.u64(0..300))).await;
        }
        if !later.is_empty() && rng.u8(0..8) == 0 {
            register(later.remove(0), &mut failures);
        }
        client(&inner, &system, &selectors, &mut rng, &trace).await;
    }
    if faults.active() {
        faults.stop();
        trace.log("faults stop");
    }
    for index in later {
        register(index, &mut failures);
    }

    // Convergence: every output as the model says, in bounded simulated time.
    faults.limit_writes(RUNAWAY_WRITES);
    let stopped = Instant::now();
    let deadline = stopped + CONVERGE_WITHIN;
    let mut converged_in = None;
    loop {
        let settled = tokio::time::timeout_at(deadline, runtime.settled());
        let settled = tokio::select! {
            biased;
            () = faults.runaway() => Err(format!("controllers keep writing: more than {RUNAWAY_WRITES} writes after the faults stopped")),
            settled = settled => settled.map_err(|_| format!("the runtime did not settle within {CONVERGE_WITHIN:?} after the faults stopped: work stays pending (a deadlock or a lost wake-up)")),
        };
        if let Err(failure) = settled {
            failures.push(failure);
            break;
        }
        let differences = differences(&system, &inner, &runtime).await;
        if differences.is_empty() {
            converged_in = Some(stopped.elapsed());
            trace.log("converged");
            break;
        }
        if Instant::now() >= deadline {
            failures.push(format!(
                "did not converge within {CONVERGE_WITHIN:?} after the faults stopped:\n    {}",
                differences.join("\n    ")
            ));
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    if converged_in.is_some() {
        // Quiet: with nothing changing, nothing reconciles or writes.
        let writes = faults.writes();
        let reconciles = reconciles(&runtime, &names);
        tokio::time::sleep(QUIET_FOR).await;
        runtime.settled().await;
        if faults.writes() != writes {
            failures.push(format!("{} writes after convergence, with nothing changing", faults.writes() - writes));
        }
        let now = reconciles_now(&runtime, &names);
        for ((name, before), after) in names.iter().zip(reconciles).zip(now) {
            if before != after {
                failures.push(format!(
                    "{name} reconciled {} times after convergence, with nothing changing",
                    after - before
                ));
            }
        }
        // Every observer has seen every event: its mirror is the kind.
        for (kind, mirror) in &mirrors {
            let actual: BTreeMap<String, Seen> = match inner.list_dynamic(kind, &ListOptions::default()).await {
                Ok(list) => list.iter().map(|resource| (resource.metadata().id().to_owned(), seen(resource))).collect(),
                Err(error) => {
                    failures.push(format!("list {kind}: {error}"));
                    continue;
                }
            };
            if *mirror.lock() != actual {
                failures.push(format!("the observer of {kind} saw {:?}, the state holds {actual:?}", mirror.lock()));
            }
        }
        if backend == Backend::Store {
            check_store(&store, &inner, &system.kinds(), &mut failures).await;
        }
    }
    failures.extend(violations.list());
    runtime.shutdown().await;
    trace.log(format_args!("end: {} failures", failures.len()));
    Report {
        seed,
        backend,
        controllers: system.nodes.len(),
        kinds: system.kinds().len(),
        simulated: trace.elapsed(),
        converged_in,
        trace_hash: trace.hash(),
        trace: trace.lines(),
        writes: faults.writes(),
        failures,
    }
}

/// One client operation on a kind the clients write.
async fn client(state: &Arc<dyn State>, system: &System, selectors: &[String], rng: &mut fastrand::Rng, trace: &Trace) {
    let choice = rng.u8(0..10);
    let pointer = if !selectors.is_empty() && choice == 0 {
        selector_kind().pointer(&selectors[rng.usize(..selectors.len())])
    } else if !system.layers.is_empty() && choice < 4 {
        let layer = &system.layers[rng.usize(..system.layers.len())];
        layer.pointer(format!("{}@{}", IDS[rng.usize(..IDS.len())], rng.u8(0..3)))
    } else {
        let kind = &system.sources[rng.usize(..system.sources.len())];
        kind.pointer(IDS[rng.usize(..IDS.len())])
    };
    let (verb, result) = match rng.u8(0..10) {
        0..=5 => {
            let (value, layer) = (rng.u64(0..1000), rng.i64(0..4));
            let written = if pointer.r#type() == Src::TYPE {
                modify::<Src>(state, &pointer, value, layer).await
            } else if pointer.r#type() == Sel::TYPE {
                modify::<Sel>(state, &pointer, value, layer).await
            } else {
                modify::<Sh>(state, &pointer, value, layer).await
            };
            ("modify", written.map(|version| format!("v{version} = {value}/{layer}")))
        }
        6 | 7 => {
            let torn = state.teardown_dynamic(&pointer, TeardownOptions::default()).await;
            ("teardown", torn.map(|ready| if ready { "ready".into() } else { "held".into() }))
        }
        _ => ("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default()).await.map(|()| "done".into())),
    };
    let result = result.unwrap_or_else(|error| error_name(&error));
    trace.log(format_args!("client {verb} {pointer}: {result}"));
}

async fn modify<T: SimSpec>(
    state: &Arc<dyn State>,
    pointer: &Pointer,
    value: u64,
    layer: i64,
) -> Result<String, Error> {
    let stored = state.modify::<T>(pointer, UpdateOptions::default(), |resource| resource.spec_mut().set(value, layer));
    Ok(stored.await?.metadata().version().to_string())
}

/// Where the state differs from the model, and what keeps the system from
/// being done: outputs still tearing down, finalizers held on tearing-down
/// resources, controllers still failing.
async fn differences(system: &System, state: &Arc<dyn State>, runtime: &Runtime) -> Vec<String> {
    let mut differences = Vec::new();
    let mut clients: World = BTreeMap::new();
    let client_kinds = system.sources.iter().chain(&system.layers).cloned().chain([selector_kind()]);
    for kind in client_kinds {
        let running = clients.entry(kind.clone()).or_default();
        for resource in list(state, &kind, &mut differences).await {
            let metadata = resource.metadata();
            match metadata.phase() {
                Phase::Running => {
                    running.insert(metadata.id().to_owned(), value_of(&resource).unwrap_or_default());
                }
                Phase::TearingDown if !metadata.finalizers().is_empty() => differences.push(format!(
                    "{} is tearing down, still held by {:?}",
                    metadata.pointer(),
                    metadata.finalizers().iter().collect::<Vec<_>>()
                )),
                Phase::TearingDown => (),
            }
        }
    }
    let expected = system.expected(&clients);
    for node in &system.nodes {
        let mut actual = BTreeMap::new();
        for resource in list(state, &node.output, &mut differences).await {
            let metadata = resource.metadata();
            if metadata.phase() != Phase::Running {
                differences.push(format!(
                    "{} is still tearing down ({:?})",
                    metadata.pointer(),
                    metadata.finalizers().iter().collect::<Vec<_>>()
                ));
            }
            if metadata.owner() != Some(node.name.as_str()) {
                differences.push(format!(
                    "{} is owned by {:?}, not {}",
                    metadata.pointer(),
                    metadata.owner(),
                    node.name
                ));
            }
            actual.insert(metadata.id().to_owned(), value_of(&resource).unwrap_or_default());
        }
        let want = expected.get(&node.output).cloned().unwrap_or_default();
        if actual != want {
            differences.push(format!("{} ({}) holds {actual:?}, the model says {want:?}", node.output, node.name));
        }
        if let Some(stats) = runtime.stats(&node.name) {
            // Retries count as done for `settled`, not here.
            if stats.next_retry.is_some() || stats.backing_off > 0 {
                differences.push(format!(
                    "{} is still failing ({} items in backoff): {:?}",
                    node.name, stats.backing_off, stats.last_error
                ));
            }
        }
        if matches!(node.logic, Logic::Merge { .. } | Logic::Fold { .. }) && runtime.stats(&node.name).is_none() {
            differences.push(format!("{} is not registered", node.name));
        }
    }
    differences
}

async fn list(state: &Arc<dyn State>, kind: &Kind, differences: &mut Vec<String>) -> Vec<Arc<DynamicResource>> {
    match state.list_dynamic(kind, &ListOptions::default()).await {
        Ok(list) => list,
        Err(error) => {
            differences.push(format!("list {kind}: {error}"));
            Vec::new()
        }
    }
}

fn reconciles(runtime: &Runtime, names: &[String]) -> Vec<u64> {
    reconciles_now(runtime, names)
}

fn reconciles_now(runtime: &Runtime, names: &[String]) -> Vec<u64> {
    names.iter().map(|name| runtime.stats(name).map_or(0, |stats| stats.reconciles)).collect()
}

/// The store holds exactly what the state holds: every write the state
/// applied was made durable, and none the store refused was applied.
async fn check_store(store: &FaultyStore, state: &Arc<dyn State>, system: &[Kind], failures: &mut Vec<String>) {
    let stored: BTreeMap<Pointer, u64> = store
        .stored
        .lock()
        .iter()
        .map(|(pointer, resource)| (pointer.clone(), resource.metadata().version().get().unwrap_or_default()))
        .collect();
    let mut kinds: std::collections::BTreeSet<Kind> = stored.keys().map(|pointer| pointer.kind()).collect();
    kinds.extend(system.iter().cloned());
    let mut held = BTreeMap::new();
    for kind in kinds {
        for resource in list(state, &kind, failures).await {
            held.insert(resource.metadata().pointer().clone(), resource.metadata().version().get().unwrap_or_default());
        }
    }
    if stored != held {
        failures.push(format!("the store holds {stored:?}, the state {held:?}"));
    }
}
