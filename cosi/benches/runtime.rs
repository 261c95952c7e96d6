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

use std::time::{Duration, Instant};

use cosi::prelude::*;
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

/// How much to measure: the full run under `cargo bench`, a smoke test otherwise.
struct Plan {
    chains: &'static [(usize, usize)],
    resources: usize,
    runs: usize,
}

const FULL: Plan = Plan { chains: &[(10, 2_000), (100, 300)], resources: 100_000, runs: 5 };
const SMOKE: Plan = Plan { chains: &[(10, 3)], resources: 1_000, runs: 1 };

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
                rt.block_on(rt.spawn(async move { measure(plan, &filter).await })).expect("the bench task");
            }
            false => rt.block_on(measure(plan, &filter)),
        }
        println!();
    }
}

async fn measure(plan: &Plan, filter: &str) {
    println!("chain latency (update at the head until the tail has it)");
    println!("{:>8} {:>8} {:>12} {:>12} {:>12} {:>12}", "links", "samples", "median", "p90", "p99", "max");
    for &(links, samples) in plan.chains.iter().filter(|_| "chain".contains(filter)) {
        let mut times = chain_latency(links, samples).await;
        times.sort_unstable();
        println!(
            "{links:>8} {samples:>8} {:>12.1?} {:>12.1?} {:>12.1?} {:>12.1?}",
            percentile(&times, 0.5),
            percentile(&times, 0.9),
            percentile(&times, 0.99),
            times.last().copied().unwrap_or_default(),
        );
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

/// The sorted `times`' value at `fraction` (nearest rank).
fn percentile(times: &[Duration], fraction: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((times.len() as f64 * fraction).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

async fn chain_latency(links: usize, samples: usize) -> Vec<Duration> {
    let mut chain = Chain::start(links).await;
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
    chain.stop().await;
    times
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
