//! Instruction counts per state operation, for `valgrind --tool=callgrind`.
//!
//! Wall-clock numbers on a machine shared with other builds move by tens of
//! per cent between runs; instruction counts do not. Each operation runs
//! many times inside one future whose `poll` is never inlined (`Measured`),
//! with everything built before the loop and awaited from a task of a
//! 2-worker multi-thread runtime, as in `state.rs`, so callgrind can count
//! that function alone:
//!
//! ```text
//! cargo bench -p cosi --bench ops --no-run   # prints the binary's path
//! valgrind --tool=callgrind --toggle-collect='*Measured*poll*' TARGET/release/deps/ops-HASH --bench get
//! ```
//!
//! and divide the total by the count it prints on standard error. The
//! argument names the operation (`create`, `create-owned`, `get`, `update`,
//! `list`, `decode`, `chain`); without `--bench` (`cargo test --benches`)
//! each runs a few times, as a smoke test. `decode` is a typed read of a spec
//! that arrived encoded (another client's), decoded from its YAML text.
//!
//! `chain` counts a trip down `runtime.rs`'s chain of 10 controllers, which
//! runs in many tasks: on a current-thread runtime (a multi-thread one adds
//! the idle workers' spinning to the count), between two marker functions
//! that callgrind zeroes its counters before and dumps them at:
//!
//! ```text
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*chain_trips*' TARGET/release/deps/ops-HASH --bench chain
//! ```

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use cosi::prelude::*;
use cosi::resource::EncodedSpec;

#[path = "common/state.rs"]
mod bench_state;
#[path = "common/chain.rs"]
mod chain;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "BenchSpecs.bench.cosi.dev", namespace = "bench")]
struct BenchSpec {
    value: u64,
    payload: String,
}

const LIST_SIZE: usize = 10_000;

/// The owner of `create-owned`'s resources: a controller's name.
const OWNER: &str = "bench.BenchSpecController";

fn spec(value: u64) -> BenchSpec {
    BenchSpec { value, payload: "x".repeat(256) }
}

/// A future whose `poll` is never inlined: the function callgrind counts.
struct Measured<F>(Pin<Box<F>>);

impl<F: Future> Future for Measured<F> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.0.as_mut().poll(cx)
    }
}

fn measured<F: Future>(future: F) -> Measured<F> {
    Measured(Box::pin(future))
}

async fn measure_create(state: &Arc<dyn State>, creates: Vec<(Typed<BenchSpec>, CreateOptions)>) {
    for (resource, options) in creates {
        black_box(state.create(resource, options).await.unwrap());
    }
}

async fn measure_get(state: &Arc<dyn State>, ids: &[String], ops: usize) {
    for i in 0..ops {
        black_box(state.get::<BenchSpec>(&ids[i % LIST_SIZE]).await.unwrap());
    }
}

async fn measure_update(state: &Arc<dyn State>, pointer: &Pointer, ops: usize) {
    for i in 0..ops {
        let mut current = state.get::<BenchSpec>(pointer).await.unwrap();
        current.value = i as u64;
        black_box(state.update(current, UpdateOptions::default()).await.unwrap());
    }
}

async fn measure_list(state: &Arc<dyn State>, ops: usize) {
    for _ in 0..ops {
        black_box(state.list::<BenchSpec>(&ListOptions::default()).await.unwrap());
    }
}

async fn measure_decode(resource: &DynamicResource, ops: usize) {
    for _ in 0..ops {
        black_box(Typed::<BenchSpec>::try_from(black_box(resource)).unwrap());
    }
}

/// The trips down the chain, counted alone: every task of the chain runs
/// inside this call, on the current-thread runtime.
#[inline(never)]
fn chain_trips(rt: &tokio::runtime::Runtime, chain: &mut chain::Chain, trips: usize) {
    rt.block_on(async {
        for value in 1..=trips as i64 {
            chain.send(value).await;
        }
    });
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let ops = if full { 100_000 } else { 10 };
    let which: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let wanted = move |name: &str| which.is_empty() || which.iter().any(|w| w == name);
    if wanted("chain") {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
        let mut chain = rt.block_on(chain::Chain::start(10));
        // Warm up, uncounted: the first trips allocate what later ones reuse.
        rt.block_on(async {
            for value in 1..=100 {
                chain.send(-value).await;
            }
        });
        let trips = ops / 10;
        eprintln!("chain: {trips} operations (trips down 10 links)");
        chain_trips(&rt, &mut chain, trips);
        rt.block_on(chain.stop());
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");

    rt.block_on(rt.spawn(async move {
        let ids: Vec<String> = (0..LIST_SIZE).map(|i| format!("r{i:06}")).collect();
        // `create-owned`: as a controller creates its outputs, owned by its name.
        for (op, options) in [("create", CreateOptions::default()), ("create-owned", CreateOptions::owner(OWNER))] {
            if wanted(op) {
                let state: Arc<dyn State> = bench_state::memory();
                let count = ops.min(LIST_SIZE);
                eprintln!("{op}: {count} operations");
                let creates = ids[..count]
                    .iter()
                    .enumerate()
                    .map(|(i, id)| (Typed::new(id, spec(i as u64)), options.clone()))
                    .collect();
                measured(measure_create(&state, creates)).await;
            }
        }
        let state: Arc<dyn State> = bench_state::memory();
        for (i, id) in ids.iter().enumerate() {
            state.create(Typed::new(id, spec(i as u64)), CreateOptions::default()).await.unwrap();
        }
        if wanted("get") {
            eprintln!("get: {ops} operations");
            measured(measure_get(&state, &ids, ops)).await;
        }
        if wanted("update") {
            eprintln!("update: {ops} operations");
            measured(measure_update(&state, &BenchSpec::pointer("r000000"), ops)).await;
        }
        if wanted("decode") {
            let yaml = format!("value: 42\npayload: {}\n", "x".repeat(256));
            let encoded = EncodedSpec { proto: Vec::new(), yaml: Some(yaml) };
            let resource = DynamicResource::encoded(Metadata::new("bench", BenchSpec::TYPE, "r000000"), encoded);
            eprintln!("decode: {ops} operations");
            measured(measure_decode(&resource, ops)).await;
        }
        if wanted("list") {
            let lists = ops / 1000 + 1;
            eprintln!("list: {lists} operations");
            measured(measure_list(&state, lists)).await;
        }
    }))
    .expect("benchmark task");
}
