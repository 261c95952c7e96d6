//! One simulated run: a seed's system, clients and faults on one
//! current-thread tokio runtime with a paused clock, then the checks.
//!
//! Registration order is shuffled and some controllers register after the
//! start; the runtime's feeds are the state's observers in half the seeds and
//! watch tasks in the other half (always across gRPC). Once the faults stop,
//! within [`CONVERGE_WITHIN`]: settled (no deadlock, no lost wake-up), every
//! output equal to the model, no controller failing or with items in backoff,
//! no finalizer held on a tearing-down resource, no output left tearing down,
//! and fewer than [`RUNAWAY_WRITES`] writes. Then [`QUIET_FOR`] with no write
//! and no reconcile (a polling controller reconciles and writes nothing),
//! every observer's mirror equal to its kind, and a store holding exactly
//! what the state holds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use cosi::prelude::*;
use cosi::runtime::RuntimeOptions;
use cosi::state::{DestroyOptions, Error, MemoryOptions, MemoryState, TeardownOptions};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::checks::{Mirror, Observer, Seen, Violations, seen};
use crate::controllers::{self, OutsideWorld};
use crate::faults::{Faults, FaultyState, FaultyStore, Profile, error_name};
use crate::net::{Network, RESUME_MAX_DELAY};
use crate::redb::RedbFile;
use crate::system::{IDS, Logic, Outside, System, World, selector_kind};
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
    /// A `cosi_grpc::Client` of a `cosi_grpc::Server` serving `MemoryState`,
    /// over in-memory connections that are cut and refused (`net.rs`).
    Grpc,
    /// `cosi_redb::RedbState` on a temporary file whose commits fail, each
    /// failure followed by a restart on the file (`redb.rs`). Not
    /// replayable byte for byte: its store commits on a thread of its own.
    Redb,
}

impl Backend {
    pub const ALL: [Backend; 4] = [Backend::Memory, Backend::Store, Backend::Grpc, Backend::Redb];

    /// Whether the same seed gives the same trace, byte for byte.
    pub fn replayable(self) -> bool {
        self != Backend::Redb
    }

    /// A seed's backend, with these odds per thousand (the gRPC and redb
    /// paths cost several times a run in process).
    fn draw(rng: &mut fastrand::Rng) -> Self {
        match rng.u16(0..1000) {
            0..4 => Backend::Redb,
            4..24 => Backend::Grpc,
            24..324 => Backend::Store,
            _ => Backend::Memory,
        }
    }
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

/// Runs `seed` on its backend, or on `backend`; `echo` prints the trace as it is written.
pub fn run(seed: u64, backend: Option<Backend>, echo: bool) -> Report {
    // The runtime's backoff draws its jitter from this thread's generator.
    fastrand::seed(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread tokio runtime");
    runtime.block_on(simulate(seed, backend, echo))
}

async fn simulate(seed: u64, backend: Option<Backend>, echo: bool) -> Report {
    let mut rng = fastrand::Rng::with_seed(seed);
    let trace = Trace::new(echo);
    let system = System::generate(&mut rng);
    // Drawn apart from the system's generator, so a seed's graph and work
    // stay what they were before these choices existed.
    let mut setup = fastrand::Rng::with_seed(seed ^ 0x0b5e_4ed5);
    let observed = setup.bool();
    let backend = backend.unwrap_or_else(|| Backend::draw(&mut setup));
    let history = MemoryOptions {
        history_initial_capacity: 4,
        history_max_capacity: rng.usize(16..=256),
        history_gap: rng.usize(1..=4),
    };
    let feeds = if observed && backend != Backend::Grpc { "observers" } else { "watches" };
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
    let mut file = None;
    let mut states = match backend {
        Backend::Memory => States::one(Arc::new(MemoryState::new(history).expect("valid history settings"))),
        Backend::Store => {
            States::one(Arc::new(MemoryState::with_store(history, Arc::clone(&store) as _).expect("an empty store")))
        }
        Backend::Grpc => {
            let memory: Arc<dyn State> = Arc::new(MemoryState::new(history).expect("valid history settings"));
            let (network, client) = Network::serve(Arc::clone(&memory), &faults, &trace);
            tokio::spawn(network.cut_connections());
            States { truth: memory, inner: Arc::new(client) }
        }
        Backend::Redb => {
            let redb = RedbFile::new(history, &faults);
            let opened = redb.open().await.expect("a new redb file opens");
            file = Some(redb);
            States::one(opened)
        }
    };

    let outside = OutsideWorld::new(&system);
    let run = Run {
        system: &system,
        outside: &outside,
        faults: Arc::clone(&faults),
        trace: Arc::clone(&trace),
        violations: Arc::default(),
        observed,
        remote: backend == Backend::Grpc,
    };
    let mut failures = Vec::new();
    let mut registered: Vec<usize> = (0..system.nodes.len()).collect();
    rng.shuffle(&mut registered);
    let mut later = registered.split_off(rng.usize(0..=registered.len()));
    let mut live = run.start(&states.inner, &registered, &mut rng, &mut failures);

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
            let index = later.remove(0);
            run.register(&live.runtime, index, &mut failures);
            registered.push(index);
        }
        client(&states.inner, &system, &selectors, &outside, &mut rng, &trace).await;
        if let Some(file) = file.as_ref().filter(|file| file.failed()) {
            (states, live) = run.restart(live, states, file, &registered, &mut rng, &mut failures).await;
        }
    }
    if faults.active() {
        faults.stop();
        trace.log("faults stop");
    }
    for index in later {
        run.register(&live.runtime, index, &mut failures);
        registered.push(index);
    }

    // Convergence: every output as the model says, in bounded simulated time.
    faults.limit_writes(RUNAWAY_WRITES);
    let mut stopped = Instant::now();
    let mut converged_in = None;
    loop {
        // A commit that failed as the faults stopped is found here.
        if let Some(file) = file.as_ref().filter(|file| file.failed()) {
            (states, live) = run.restart(live, states, file, &registered, &mut rng, &mut failures).await;
            stopped = Instant::now();
        }
        let deadline = stopped + CONVERGE_WITHIN;
        let settled = tokio::time::timeout_at(deadline, live.runtime.settled());
        let settled = tokio::select! {
            biased;
            () = faults.runaway() => Err(format!("controllers keep writing: more than {RUNAWAY_WRITES} writes after the faults stopped")),
            settled = settled => settled.map_err(|_| format!("the runtime did not settle within {CONVERGE_WITHIN:?} after the faults stopped: work stays pending (a deadlock or a lost wake-up)")),
        };
        if let Err(failure) = settled {
            failures.push(failure);
            break;
        }
        let differences = differences(&system, &outside, &states.truth, &live.runtime).await;
        if differences.is_empty() && !(run.remote && stopped.elapsed() < RESUME_MAX_DELAY) {
            converged_in = Some(stopped.elapsed());
            trace.log("converged");
            break;
        }
        if differences.is_empty() {
            // Across the network, `settled` cannot see a watch that is
            // resuming: wait until every resume is due, then look again.
            tokio::time::sleep_until(stopped + RESUME_MAX_DELAY).await;
            continue;
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
        let before = reconciles(&live.runtime, &names);
        tokio::time::sleep(QUIET_FOR).await;
        live.runtime.settled().await;
        if faults.writes() != writes {
            failures.push(format!("{} writes after convergence, with nothing changing", faults.writes() - writes));
        }
        let now = reconciles(&live.runtime, &names);
        for ((node, before), after) in system.nodes.iter().zip(before).zip(now) {
            let name = &node.name;
            match (node.outside, &node.logic) {
                // It looks again unprompted, and finds nothing to write.
                (Outside::Polled(_), Logic::Fold { .. }) if before == after => {
                    failures.push(format!("{name} polls, and did not reconcile in {QUIET_FOR:?}"));
                }
                (Outside::Polled(_), _) => (),
                _ if before != after => failures.push(format!(
                    "{name} reconciled {} times after convergence, with nothing changing",
                    after - before
                )),
                _ => (),
            }
        }
        // Every observer has seen every event: its mirror is the kind.
        for (kind, mirror) in &live.mirrors {
            let actual: BTreeMap<String, Seen> = match states.truth.list_dynamic(kind, &ListOptions::default()).await {
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
            check_store(&store, &states.truth, &system.kinds(), &mut failures).await;
        }
    }
    live.stop().await;
    if let Some(file) = &file {
        // The file holds exactly what the state held.
        file.reopen(states.into_one(), &system.kinds(), &mut failures).await;
    }
    failures.extend(run.violations.list());
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

/// The states of a run.
struct States {
    /// What the system holds, read by the checks once the faults have stopped.
    truth: Arc<dyn State>,
    /// Where the clients, the observers and (behind the faults) the runtime
    /// work: `truth` itself, or a client of it.
    inner: Arc<dyn State>,
}

impl States {
    fn one(state: Arc<dyn State>) -> Self {
        States { truth: Arc::clone(&state), inner: state }
    }

    /// The state, with no other holder here.
    fn into_one(self) -> Arc<dyn State> {
        drop(self.truth);
        self.inner
    }
}

/// What stays the same for the whole run, across restarts.
struct Run<'a> {
    system: &'a System,
    outside: &'a OutsideWorld,
    faults: Arc<Faults>,
    trace: Arc<Trace>,
    violations: Arc<Violations>,
    /// Whether the runtime's feeds may be the state's observers.
    observed: bool,
    /// Whether the state is across a network.
    remote: bool,
}

/// The runtime and the observers on one state.
struct Live {
    runtime: Runtime,
    observers: Vec<tokio::task::JoinHandle<()>>,
    mirrors: Vec<(Kind, Mirror)>,
}

impl Run<'_> {
    /// Observers of every kind on `state`, and a runtime on it behind the
    /// faults, with the controllers of `registered` registered in that order.
    fn start(
        &self,
        state: &Arc<dyn State>,
        registered: &[usize],
        rng: &mut fastrand::Rng,
        failures: &mut Vec<String>,
    ) -> Live {
        let Run { system, faults, trace, violations, observed, remote, .. } = self;
        let mut observers = Vec::new();
        let mut mirrors = Vec::new();
        for kind in system.kinds() {
            let owner = system.nodes.iter().find(|node| node.output == kind).map(|node| node.name.clone());
            let resume = if rng.bool() { rng.f64() * 0.2 } else { 0.0 };
            let slow = rng.u8(0..4) == 0;
            let observer = Observer { kind, owner, slow, resume, remote: *remote, mirror: Arc::default() };
            mirrors.push((observer.kind.clone(), Arc::clone(&observer.mirror)));
            let run = observer.run(
                Arc::clone(state),
                fastrand::Rng::with_seed(rng.u64(..)),
                Arc::clone(faults),
                Arc::clone(trace),
                Arc::clone(violations),
            );
            observers.push(tokio::spawn(run));
        }
        let faulty = FaultyState {
            inner: Arc::clone(state),
            faults: Arc::clone(faults),
            trace: Arc::clone(trace),
            observed: *observed,
        };
        let mut options = RuntimeOptions::default();
        options.status_namespace = None;
        let runtime = Runtime::with_options(faulty, options);
        for &index in registered {
            self.register(&runtime, index, failures);
        }
        runtime.start().expect("the runtime starts");
        trace.log("runtime started");
        Live { runtime, observers, mirrors }
    }

    fn register(&self, runtime: &Runtime, index: usize, failures: &mut Vec<String>) {
        let node = &self.system.nodes[index];
        self.trace.log(format_args!("register {}", node.name));
        if let Err(error) = controllers::register(&runtime.handle(), node, &self.faults, &self.trace, self.outside) {
            failures.push(format!("{} was refused: {error}", node.name));
        }
    }

    /// After the redb store failed (it refuses every write from then on):
    /// stops everything, opens the file again, checks that it holds what the
    /// state held, and starts again on it.
    async fn restart(
        &self,
        live: Live,
        states: States,
        file: &RedbFile,
        registered: &[usize],
        rng: &mut fastrand::Rng,
        failures: &mut Vec<String>,
    ) -> (States, Live) {
        self.trace.log("the store failed: everything restarts on its file");
        live.stop().await;
        let reopened = file.reopen(states.into_one(), &self.system.kinds(), failures).await;
        let live = self.start(&reopened, registered, rng, failures);
        (States::one(reopened), live)
    }
}

impl Live {
    /// Stops the runtime and the observers, and waits until they have let
    /// go of the state and every write they started has landed.
    async fn stop(self) {
        self.runtime.shutdown().await;
        drop(self.runtime);
        for observer in &self.observers {
            observer.abort();
        }
        for observer in self.observers {
            let _ = observer.await;
        }
        // A write whose reconcile the shutdown dropped may still be running
        // on tokio's blocking pool (the redb state writes there, and applies
        // to memory once its commit is durable): it lands all the same. Work
        // on that pool holds the paused clock, so this sleep ends only once
        // the pool is idle.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// One client operation: on a kind the clients write, or (one in ten, when
/// some controller reads one) on a value outside the state.
async fn client(
    state: &Arc<dyn State>,
    system: &System,
    selectors: &[String],
    outside: &OutsideWorld,
    rng: &mut fastrand::Rng,
    trace: &Trace,
) {
    let readers = outside.controllers();
    if !readers.is_empty() && rng.u8(0..10) == 0 {
        let (controller, value) = (readers[rng.usize(..readers.len())], rng.u64(0..1000));
        let woken = if outside.change(controller, value) { ", woken" } else { "" };
        trace.log(format_args!("client outside {controller} = {value}{woken}"));
        return;
    }
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
async fn differences(
    system: &System,
    outside: &OutsideWorld,
    state: &Arc<dyn State>,
    runtime: &Runtime,
) -> Vec<String> {
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
    let expected = system.expected(&clients, &outside.values());
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

async fn list(state: &Arc<dyn State>, kind: &Kind, differences: &mut Vec<String>) -> Vec<DynamicResource> {
    match state.list_dynamic(kind, &ListOptions::default()).await {
        Ok(list) => list,
        Err(error) => {
            differences.push(format!("list {kind}: {error}"));
            Vec::new()
        }
    }
}

fn reconciles(runtime: &Runtime, names: &[String]) -> Vec<u64> {
    names.iter().map(|name| runtime.stats(name).map_or(0, |stats| stats.reconciles)).collect()
}

/// The store holds exactly what the state holds: every write the state
/// applied was made durable, and none the store refused was applied.
async fn check_store(store: &FaultyStore, state: &Arc<dyn State>, system: &[Kind], failures: &mut Vec<String>) {
    let stored: BTreeMap<Pointer, Seen> =
        store.stored.lock().iter().map(|(pointer, resource)| (pointer.clone(), seen(resource))).collect();
    let mut kinds: BTreeSet<Kind> = stored.keys().map(|pointer| pointer.kind()).collect();
    kinds.extend(system.iter().cloned());
    let held = contents(state, &kinds, failures).await;
    if let Some(differences) = differ(&stored, &held) {
        failures.push(format!("the store differs from the state (store, state): {differences}"));
    }
}

/// Where two copies of a state's contents differ, at most ten places.
pub fn differ(a: &BTreeMap<Pointer, Seen>, b: &BTreeMap<Pointer, Seen>) -> Option<String> {
    let pointers: BTreeSet<&Pointer> = a.keys().chain(b.keys()).collect();
    let differences: Vec<String> = pointers
        .into_iter()
        .filter(|pointer| a.get(*pointer) != b.get(*pointer))
        .map(|pointer| format!("{pointer}: {:?}, {:?}", a.get(pointer), b.get(pointer)))
        .collect();
    match differences.len() {
        0 => None,
        count => Some(format!("{} ({count} in all)", differences.into_iter().take(10).collect::<Vec<_>>().join("; "))),
    }
}

/// What `state` holds of `kinds`.
pub async fn contents<'a>(
    state: &Arc<dyn State>,
    kinds: impl IntoIterator<Item = &'a Kind>,
    failures: &mut Vec<String>,
) -> BTreeMap<Pointer, Seen> {
    let mut held = BTreeMap::new();
    for kind in kinds {
        for resource in list(state, kind, failures).await {
            held.insert(resource.metadata().pointer().clone(), seen(&resource));
        }
    }
    held
}
