//! Controller runtime benchmarks: how long a change takes to travel down a
//! chain of controllers, and how fast one controller transforms 100,000
//! resources.
//!
//! Run with `cargo bench -p cosi --bench runtime`; results go in
//! `BENCHMARKS.md`; a name after `--` (`chain`, `reconcile`, `queue`) runs only
//! those measurements. The harness is our own, not criterion's: a latency
//! needs its 99th percentile, which criterion does not report, so every sample
//! is timed with `Instant` and the results printed as tables. Everything runs
//! three times: on a 2-worker multi-thread tokio runtime with the bench's own
//! code in a task on it (as Go's benchmark goroutine runs on one of its
//! GOMAXPROCS=2 Ps: the like-for-like match), on the same runtime with the
//! bench's code in `block_on` (a third thread, which every sample must wake
//! and be woken by), and on a current-thread runtime.
//! Without `--bench` (`cargo test --benches`) the measurements run small and
//! few, as a smoke test.
//!
//! - **Chain latency**: controller `i` copies the resources of namespace `c{i}`
//!   into `c{i+1}` (one controller type, registered `n` times under its own
//!   name, inputs set at its first reconcile). One sample: update the head
//!   resource in `c0`, wait on a watch of the tail resource in `c{n}` until it
//!   carries the new value.
//! - **Transform throughput**: one controller turns each `Num` into a `Text`.
//!   `preloaded`: 100,000 inputs exist before the runtime starts; timed from
//!   `start` until all 100,000 outputs exist. `live`: the runtime runs idle,
//!   then the bench writes 100,000 inputs; timed from the first write until all
//!   outputs exist (and, separately, from the last write).
//! - **Neighbour**: the chain of ten again, beside an eleventh controller
//!   that none of the links reads, which spends about 8 ms of CPU per
//!   reconcile ([`crunch`] for 2,000,000 rounds) and which a task of the
//!   bench wakes again every millisecond by writing its input, throughout.
//!   What a busy controller costs the others. Then beside two such
//!   neighbours, as many as the worker threads: what having no preemption
//!   costs (Go preempts a goroutine after 10 ms).
//! - **Parallel**: four independent controllers, each over its own 2,000
//!   preloaded inputs, each input costing [`crunch`] for 20,000 rounds
//!   (about 80 µs) before its output is written; timed from `start` until
//!   every output exists. How the cores are used.
//! - **Scale** (bench in a task only): 1,000 controllers, each summing its
//!   own namespace of 1,000 inputs (1,000,000 resources, preloaded) into
//!   one output. `settle`: from `start` until `settled`; `wake`: update one
//!   input of a random controller, until its sum has the change.
//!
//! `interop/go/bench/runtime_bench_test.go` runs the chain, the neighbour,
//! the parallel controllers and the preloaded transforms on Go COSI, with the
//! same work per item ([`crunch`] is the same arithmetic there).

use std::hint::black_box;
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi::state::Watch;
use tokio::runtime::Builder;

#[path = "common/state.rs"]
mod bench_state;
#[path = "common/chain.rs"]
mod chain;

use chain::{Chain, Num};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Texts.bench.cosi.dev", namespace = "out")]
struct Text {
    value: String,
}

const TRANSFORM_IN: &str = "in";
const TRANSFORM_OUT: &str = "out";

/// The reconcile-controller transform: lists every input, writes every output.
#[controller(inputs = [Weak<Num>(namespace = "in")], outputs = [Exclusive<Text>], inventory = false)]
async fn transform(ctx: &mut Ctx) -> cosi::Result<()> {
    for num in ctx.list_in::<Num>(TRANSFORM_IN, &ListOptions::default()).await? {
        let value = num.value.to_string();
        ctx.modify::<Text>(&Pointer::new(TRANSFORM_OUT, Text::TYPE, num.id()), |text| text.value.clone_from(&value))
            .await?;
    }
    Ok(())
}

/// The queue-controller transform: one input per item, four at once.
#[controller(inputs = [Primary<Num>(namespace = "in")], outputs = [Exclusive<Text>], concurrency = 4, inventory = false)]
#[derive(Default)]
struct QueueTransform;

impl QueueTransform {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<()> {
        let num = match ctx.get::<Num>(item).await {
            Ok(num) => num,
            Err(error) if error.is_not_found() => return Ok(()),
            Err(error) => return Err(error),
        };
        let value = num.value.to_string();
        ctx.modify::<Text>(&Pointer::new(TRANSFORM_OUT, Text::TYPE, item.id()), |text| text.value.clone_from(&value))
            .await?;
        Ok(())
    }
}

/// Pure CPU work, the same arithmetic as the Go benchmark's: `rounds` steps
/// of splitmix64 from `seed`, each depending on the last (about 4 ns a step).
fn crunch(seed: u64, rounds: u64) -> u64 {
    let mut x = black_box(seed);
    for _ in 0..rounds {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x = z ^ (z >> 31);
    }
    x
}

/// The neighbour's work per reconcile: about 8 ms.
const NEIGHBOUR_ROUNDS: u64 = 2_000_000;
/// The parallel controllers' work per item: about 80 µs.
const PARALLEL_ROUNDS: u64 = 20_000;

/// A busy neighbour (`busy{k}`, `NEIGHBOUR_ROUNDS`) or a parallel
/// controller (`p{k}`, `PARALLEL_ROUNDS`): crunches each `Num` of its
/// namespace into a `Text` of the namespace with `-out` after it, as the Go
/// benchmark's `crunchController`. Its input is given at its registration,
/// as a Go controller declares it; no chain link reads either namespace.
#[controller(inputs = [Weak<Num>(namespace = "p0")], outputs = [Shared<Text>], inventory = false)]
struct Crunch {
    from: String,
    to: String,
    rounds: u64,
}

impl Crunch {
    fn registration(name: String, from: String, rounds: u64) -> cosi::controller::Registration {
        let inputs = [Input::of::<Num>(InputKind::Weak).in_namespace(&from)];
        Crunch { to: format!("{from}-out"), from, rounds }.named(name).with_inputs(inputs)
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        for num in ctx.list_in::<Num>(&self.from, &ListOptions::default()).await? {
            let value = crunch(num.value as u64, self.rounds).to_string();
            ctx.modify::<Text>(&Pointer::new(&self.to, Text::TYPE, num.id()), |text| text.value.clone_from(&value))
                .await?;
        }
        Ok(())
    }
}

/// One controller of the scale scenario: sums the `Num`s of `s{index}` into
/// the `Num` `{index}` of `sums`.
#[controller(inputs = [Weak<Num>(namespace = "s0")], outputs = [Shared<Num>], inventory = false)]
struct Sum {
    from: String,
    to: Pointer,
}

impl Sum {
    fn registration(index: usize) -> cosi::controller::Registration {
        let from = format!("s{index}");
        let inputs = [Input::of::<Num>(InputKind::Weak).in_namespace(&from)];
        let to = Pointer::new("sums", Num::TYPE, index.to_string());
        Sum { from, to }.named(format!("sum{index}")).with_inputs(inputs)
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let sum = ctx.list_in::<Num>(&self.from, &ListOptions::default()).await?.iter().map(|num| num.value).sum();
        ctx.modify::<Num>(&self.to, |out| out.value = sum).await?;
        Ok(())
    }
}

/// How much to measure: the full run under `cargo bench`, a smoke test otherwise.
struct Plan {
    chains: &'static [(usize, usize)],
    resources: usize,
    runs: usize,
    /// Samples of the chain of ten beside the busy neighbour.
    neighbour_samples: usize,
    /// Inputs of each parallel controller.
    parallel_inputs: usize,
    /// Controllers and inputs of each in the scale scenario, and wake samples.
    scale: (usize, usize, usize),
}

const FULL: Plan = Plan {
    chains: &[(10, 2_000), (100, 300)],
    resources: 100_000,
    runs: 5,
    neighbour_samples: 500,
    parallel_inputs: 2_000,
    scale: (1_000, 1_000, 1_000),
};
const SMOKE: Plan = Plan {
    chains: &[(10, 3)],
    resources: 1_000,
    runs: 1,
    neighbour_samples: 3,
    parallel_inputs: 10,
    scale: (10, 10, 3),
};

fn main() {
    let plan: &'static Plan = match std::env::args().any(|arg| arg == "--bench") {
        true => &FULL,
        false => &SMOKE,
    };
    // Like criterion's filter: `cargo bench --bench runtime -- queue` runs the
    // measurements whose name contains `queue` (chain, reconcile, queue).
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-')).unwrap_or_default();
    // Both flavours a program may run the runtime on: the hand-off between
    // worker threads is most of a chain's latency.
    for (flavour, multi_thread, in_task) in [
        ("tokio multi-thread, 2 workers, bench in a task", true, true),
        ("tokio multi-thread, 2 workers, bench in block_on", true, false),
        ("tokio current-thread", false, false),
    ] {
        let rt = match multi_thread {
            true => Builder::new_multi_thread().worker_threads(2).enable_all().build(),
            false => Builder::new_current_thread().enable_all().build(),
        };
        let rt = rt.expect("tokio runtime");
        println!("== {flavour}");
        match in_task {
            true => {
                let filter = filter.clone();
                rt.block_on(rt.spawn(async move { measure(plan, &filter, Flavour::InTask).await }))
                    .expect("the bench task");
            }
            false => {
                rt.block_on(measure(plan, &filter, if multi_thread { Flavour::BlockOn } else { Flavour::OneThread }))
            }
        }
        println!();
    }
}

/// Where the bench's own code runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavour {
    /// In a task of a 2-worker multi-thread runtime.
    InTask,
    /// In `block_on`, beside a 2-worker multi-thread runtime.
    BlockOn,
    /// On a current-thread runtime, where nothing runs in parallel and a
    /// busy controller holds the one thread: no neighbour, parallel or scale.
    OneThread,
}

async fn measure(plan: &Plan, filter: &str, flavour: Flavour) {
    println!("chain latency (update at the head until the tail has it)");
    println!("{:>8} {:>8} {:>12} {:>12} {:>12} {:>12}", "links", "samples", "median", "p90", "p99", "max");
    for &(links, samples) in plan.chains.iter().filter(|_| "chain".contains(filter)) {
        let times = chain_latency(links, samples, 0).await;
        print_latencies(&links.to_string(), samples, times);
    }
    if flavour != Flavour::OneThread && "neighbours".contains(filter) {
        println!("chain latency beside busy neighbours (8 ms of CPU per reconcile each, woken every 1 ms)");
        let times = chain_latency(10, plan.neighbour_samples, 1).await;
        print_latencies("neighbour 10", plan.neighbour_samples, times);
        // As many busy controllers as worker threads: what no preemption costs.
        let times = chain_latency(10, plan.neighbour_samples, 2).await;
        print_latencies("neighbours2 10", plan.neighbour_samples, times);
    }
    if flavour != Flavour::OneThread && "parallel".contains(filter) {
        let mut totals = Vec::new();
        for _ in 0..plan.runs {
            totals.push(parallel(4, plan.parallel_inputs).await);
        }
        totals.sort_unstable();
        println!(
            " parallel 4x{} preloaded, from start {:>10.1?} [{:.1?}, {:.1?}]",
            plan.parallel_inputs,
            percentile(&totals, 0.5),
            percentile(&totals, 0.0),
            percentile(&totals, 1.0),
        );
    }
    if flavour == Flavour::InTask && "scale".contains(filter) {
        let (controllers, inputs, samples) = plan.scale;
        let (settle, times) = scale(controllers, inputs, samples).await;
        println!("scale: {controllers} controllers over {inputs} inputs each");
        println!("    scale settle {settle:>10.1?}");
        print_latencies("scale wake", samples, times);
    }

    println!("transform throughput ({} resources, {} runs: median [min, max])", plan.resources, plan.runs);
    for kind in [Transform::Reconcile, Transform::Queue].into_iter().filter(|kind| kind.name().contains(filter)) {
        for live in [false, true] {
            let mut totals = Vec::new();
            let mut tails = Vec::new();
            for _ in 0..plan.runs {
                let (total, tail) = transform_throughput(kind, live, plan.resources).await;
                totals.push(total);
                tails.push(tail);
            }
            totals.sort_unstable();
            tails.sort_unstable();
            let median = percentile(&totals, 0.5);
            let rate = plan.resources as f64 / median.as_secs_f64();
            let mode = match live {
                true => "live, from the first write",
                false => "preloaded, from start",
            };
            println!(
                "{:>9} {mode:<28} {median:>10.1?} [{:.1?}, {:.1?}] {rate:>10.0} resources/s",
                kind.name(),
                percentile(&totals, 0.0),
                percentile(&totals, 1.0),
            );
            if live {
                println!(
                    "{:>9} {:<28} {:>10.1?} [{:.1?}, {:.1?}]",
                    kind.name(),
                    "live, from the last write",
                    percentile(&tails, 0.5),
                    percentile(&tails, 0.0),
                    percentile(&tails, 1.0),
                );
            }
        }
    }
}

/// Prints one row of latencies: median, p90, p99, max.
fn print_latencies(name: &str, samples: usize, mut times: Vec<Duration>) {
    times.sort_unstable();
    println!(
        "{name:>8} {samples:>8} {:>12.1?} {:>12.1?} {:>12.1?} {:>12.1?}",
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        percentile(&times, 0.99),
        times.last().copied().unwrap_or_default(),
    );
}

/// The sorted `times`' value at `fraction` (nearest rank).
fn percentile(times: &[Duration], fraction: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((times.len() as f64 * fraction).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

/// The chain's samples, beside `neighbours` busy neighbours and the tasks
/// that wake each every millisecond, running from before the first sample
/// until after the last.
async fn chain_latency(links: usize, samples: usize, neighbours: usize) -> Vec<Duration> {
    let mut chain = Chain::start(links).await;
    let mut writers = Vec::new();
    for index in 0..neighbours {
        writers.push(start_neighbour(&chain.runtime, chain.state.clone(), index).await);
    }
    // A tenth of the samples again as warm-up, not recorded.
    let warm_up = samples / 10;
    let mut times = Vec::with_capacity(samples);
    for value in 1..=(warm_up + samples) as i64 {
        let start = Instant::now();
        chain.send(value).await;
        if value > warm_up as i64 {
            times.push(start.elapsed());
        }
    }
    for writer in writers {
        writer.abort();
        let _ = writer.await;
    }
    chain.stop().await;
    times
}

/// Registers busy neighbour `index` on the chain's runtime and starts the
/// task that writes its input every millisecond; returns once the neighbour
/// has reconciled once.
async fn start_neighbour(
    runtime: &Runtime,
    state: std::sync::Arc<dyn State>,
    index: usize,
) -> tokio::task::JoinHandle<()> {
    let from = format!("busy{index}");
    let registration = Crunch::registration(format!("neighbour{index}"), from.clone(), NEIGHBOUR_ROUNDS);
    runtime.register(registration).expect("register the neighbour");
    let input = Pointer::new(&from, Num::TYPE, "x");
    state.create(Typed::new_in(&from, "x", Num { value: 0 }), CreateOptions::default()).await.expect("create");
    let output = Pointer::new(format!("{from}-out"), Text::TYPE, "x");
    while state.get_dynamic(&output).await.is_err() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(1));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for value in 1.. {
            interval.tick().await;
            state.modify::<Num>(&input, UpdateOptions::default(), |num| num.value = value).await.expect("update");
        }
    })
}

/// The time from `start` until each of `controllers` parallel controllers
/// has written all its `inputs` outputs.
async fn parallel(controllers: usize, inputs: usize) -> Duration {
    let state = bench_state::memory();
    let runtime = Runtime::new(state.clone());
    for index in 0..controllers {
        let registration = Crunch::registration(format!("parallel{index}"), format!("p{index}"), PARALLEL_ROUNDS);
        runtime.register(registration).expect("register");
        for id in 0..inputs {
            let num = Typed::new_in(format!("p{index}"), format!("n{id:06}"), Num { value: id as i64 });
            state.create(num, CreateOptions::default()).await.expect("create");
        }
    }
    let start = Instant::now();
    runtime.start().expect("start");
    for index in 0..controllers {
        let kind = Kind::new(format!("p{index}-out"), Text::TYPE);
        while state.list_dynamic(&kind, &ListOptions::default()).await.expect("list").len() < inputs {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let done = start.elapsed();
    let last = Pointer::new(format!("p{}-out", controllers - 1), Text::TYPE, format!("n{:06}", inputs - 1));
    let output = state.get::<Text>(&last).await.expect("the last output");
    assert_eq!(output.value, crunch(inputs as u64 - 1, PARALLEL_ROUNDS).to_string(), "a wrong output");
    runtime.shutdown().await;
    done
}

/// The scale scenario: the time from `start` until `settled`, and `samples`
/// wake-ups, each from an update of one input until its controller's sum has it.
async fn scale(controllers: usize, inputs: usize, samples: usize) -> (Duration, Vec<Duration>) {
    let state = bench_state::memory();
    let runtime = Runtime::new(state.clone());
    for index in 0..controllers {
        runtime.register(Sum::registration(index)).expect("register");
        for id in 0..inputs {
            let num = Typed::new_in(format!("s{index}"), format!("n{id:06}"), Num { value: 1 });
            state.create(num, CreateOptions::default()).await.expect("create");
        }
    }
    let start = Instant::now();
    runtime.start().expect("start");
    runtime.settled().await;
    let settle = start.elapsed();
    let sums = Kind::new("sums", Num::TYPE);
    assert_eq!(state.list_dynamic(&sums, &ListOptions::default()).await.expect("list").len(), controllers);
    let mut watch = state.watch_kind_dynamic(&sums, WatchKindOptions::default()).await.expect("watch");
    let mut rng = fastrand::Rng::with_seed(7);
    let mut times = Vec::with_capacity(samples);
    for sample in 1..=samples as i64 {
        let index = rng.usize(..controllers);
        let input = Pointer::new(format!("s{index}"), Num::TYPE, format!("n{:06}", rng.usize(..inputs)));
        let started = Instant::now();
        let before = state.get::<Num>(&input).await.expect("the input").value;
        state.modify::<Num>(&input, UpdateOptions::default(), |num| num.value = 1 + sample).await.expect("update");
        let id = index.to_string();
        wait_for_sum(&mut watch, &id, inputs as i64 - before + 1 + sample).await;
        times.push(started.elapsed());
        // Back as it was, settled, so that every sample starts alike.
        state.modify::<Num>(&input, UpdateOptions::default(), |num| num.value = before).await.expect("update");
        runtime.settled().await;
    }
    drop(watch);
    runtime.shutdown().await;
    (settle, times)
}

/// Waits on the watch of the sums until the sum `id` is `value`.
async fn wait_for_sum(watch: &mut Watch, id: &str, value: i64) {
    while let Some(event) = watch.recv().await {
        match event {
            Event::Created { resource, .. } | Event::Updated { resource, .. }
                if resource.metadata().id() == id
                    && Typed::<Num>::try_from(&resource).expect("a Num").value == value =>
            {
                return;
            }
            Event::Errored { error } => panic!("the watch of the sums failed: {error}"),
            _ => (),
        }
    }
    panic!("the watch of the sums ended");
}

#[derive(Clone, Copy)]
enum Transform {
    Reconcile,
    Queue,
}

impl Transform {
    fn name(self) -> &'static str {
        match self {
            Transform::Reconcile => "reconcile",
            Transform::Queue => "queue",
        }
    }
}

/// Returns the time until every output exists, from the start (`preloaded`)
/// or the first write (`live`), and from the last write (zero when preloaded).
async fn transform_throughput(kind: Transform, live: bool, resources: usize) -> (Duration, Duration) {
    let state = bench_state::memory();
    let runtime = Runtime::new(state.clone());
    match kind {
        Transform::Reconcile => runtime.register(transform {}),
        Transform::Queue => runtime.register(QueueTransform),
    }
    .expect("register");
    let write_inputs = async || {
        for index in 0..resources {
            let num = Typed::new_in(TRANSFORM_IN, format!("n{index:06}"), Num { value: index as i64 });
            state.create(num, CreateOptions::default()).await.expect("create");
        }
    };

    let (start, last_write) = match live {
        false => {
            write_inputs().await;
            let start = Instant::now();
            runtime.start().expect("start");
            (start, start)
        }
        true => {
            runtime.start().expect("start");
            // Let the first (empty) reconcile pass.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let start = Instant::now();
            write_inputs().await;
            (start, Instant::now())
        }
    };

    // Outputs are written in ID order, about: wait for the last one, then
    // until all are there. Polled every millisecond: a watch would fall more
    // than the history's capacity behind the writer and fail.
    let last = Pointer::new(TRANSFORM_OUT, Text::TYPE, format!("n{:06}", resources - 1));
    while state.get_dynamic(&last).await.is_err() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let kind = Kind::new(TRANSFORM_OUT, Text::TYPE);
    while state.list_dynamic(&kind, &ListOptions::default()).await.expect("list").len() < resources {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let done = Instant::now();
    let output = state.get::<Text>(&last).await.expect("the last output");
    assert_eq!(output.value, (resources - 1).to_string(), "the transform wrote a wrong output");
    runtime.shutdown().await;
    (done - start, done - last_write)
}
