//! State broker benchmarks: create, get, update, list of 10,000 and watch fan-out,
//! measured exactly as the Go baseline (`interop/go/bench/inmem_bench_test.go`)
//! measures Go COSI.
//!
//! Run with `cargo bench -p cosi --bench state`; results go in `BENCHMARKS.md`.
//!
//! What makes the two sides comparable:
//!
//! - Every ID, pointer and resource is built before the timed loop: the loop
//!   times the state's work, not `format!` or building a 256-byte payload.
//! - The calls are awaited from a task of a 2-worker multi-thread tokio runtime
//!   (the Go side runs with `GOMAXPROCS=2`), not `block_on` on the bench thread,
//!   so they pay what a controller's or a server's call pays. Each measurement
//!   runs many operations inside one task (`iter_custom`), so the numbers are
//!   the operations' cost, not the cost of spawning the task.
//! - Creates go into a fresh state every `CREATE_BATCH` creates on both sides,
//!   so neither side's create is measured against a state grown to millions.

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cosi::prelude::*;

#[path = "common/state.rs"]
mod bench_state;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "BenchSpecs.bench.cosi.dev", namespace = "bench")]
struct BenchSpec {
    value: u64,
    payload: String,
}

/// How many resources the get, update and list benchmarks read from.
const LIST_SIZE: usize = 10_000;

/// How many creates go into one state before the next starts empty (the Go side uses the same).
const CREATE_BATCH: u64 = 10_000;

fn spec(value: u64) -> BenchSpec {
    // A spec of realistic size: a copy of it would show up in the read numbers.
    BenchSpec { value, payload: "x".repeat(256) }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

/// Runs `body` as a task of `rt` and returns what it measured.
fn on_worker<F>(rt: &tokio::runtime::Runtime, body: F) -> Duration
where
    F: Future<Output = Duration> + Send + 'static,
{
    rt.block_on(rt.spawn(body)).expect("benchmark task")
}

fn ids() -> Arc<Vec<String>> {
    Arc::new((0..LIST_SIZE).map(|i| format!("r{i:06}")).collect())
}

fn state_with(ids: &[String], rt: &tokio::runtime::Runtime) -> Arc<dyn State> {
    let state: Arc<dyn State> = bench_state::memory();
    rt.block_on(async {
        for (i, id) in ids.iter().enumerate() {
            state.create(Typed::new(id, spec(i as u64)), CreateOptions::default()).await.unwrap();
        }
    });
    state
}

fn single_ops(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("memory");
    group.throughput(Throughput::Elements(1));

    let create_ids: Arc<Vec<String>> = Arc::new((0..CREATE_BATCH).map(|i| format!("r{i}")).collect());
    group.bench_function("create", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = (iters - done).min(CREATE_BATCH);
                let state: Arc<dyn State> = bench_state::memory();
                let resources: Vec<Typed<BenchSpec>> =
                    create_ids[..n as usize].iter().enumerate().map(|(i, id)| Typed::new(id, spec(i as u64))).collect();
                let timed = Arc::clone(&state);
                total += on_worker(&rt, async move {
                    let start = Instant::now();
                    for resource in resources {
                        black_box(timed.create(resource, CreateOptions::default()).await.unwrap());
                    }
                    start.elapsed()
                });
                // The full state is dropped here, outside the timed part (Go's is collected by its GC).
                drop(state);
                done += n;
            }
            total
        });
    });

    let ids = ids();
    let state = state_with(&ids, &rt);
    group.bench_function("get", |b| {
        b.iter_custom(|iters| {
            let (state, ids) = (Arc::clone(&state), Arc::clone(&ids));
            on_worker(&rt, async move {
                let start = Instant::now();
                for i in 0..iters as usize {
                    black_box(state.get::<BenchSpec>(&ids[i % LIST_SIZE]).await.unwrap());
                }
                start.elapsed()
            })
        });
    });

    group.bench_function("update", |b| {
        b.iter_custom(|iters| {
            let state = Arc::clone(&state);
            on_worker(&rt, async move {
                let pointer = BenchSpec::pointer("r000000");
                let start = Instant::now();
                for i in 0..iters {
                    let mut current = state.get::<BenchSpec>(&pointer).await.unwrap();
                    current.value = i;
                    black_box(state.update(current, UpdateOptions::default()).await.unwrap());
                }
                start.elapsed()
            })
        });
    });
    group.finish();

    let mut group = c.benchmark_group("memory/list");
    group.throughput(Throughput::Elements(LIST_SIZE as u64));
    group.bench_function(BenchmarkId::new("typed", LIST_SIZE), |b| {
        b.iter_custom(|iters| {
            let state = Arc::clone(&state);
            on_worker(&rt, async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let list = state.list::<BenchSpec>(&ListOptions::default()).await.unwrap();
                    assert_eq!(list.len(), LIST_SIZE);
                    black_box(list);
                }
                start.elapsed()
            })
        });
    });
    group.bench_function(BenchmarkId::new("dynamic", LIST_SIZE), |b| {
        b.iter_custom(|iters| {
            let state = Arc::clone(&state);
            on_worker(&rt, async move {
                let kind = BenchSpec::kind();
                let start = Instant::now();
                for _ in 0..iters {
                    let list = state.list_dynamic(&kind, &ListOptions::default()).await.unwrap();
                    assert_eq!(list.len(), LIST_SIZE);
                    black_box(list);
                }
                start.elapsed()
            })
        });
    });
    group.finish();
}

/// 100 watchers of one kind; the time until every one of them has seen a batch of writes.
fn watch_fan_out(c: &mut Criterion) {
    const WATCHERS: usize = 100;
    const WRITES: u64 = 100;
    let rt = runtime();
    let mut group = c.benchmark_group("memory/watch_fan_out");
    group.throughput(Throughput::Elements(WATCHERS as u64 * WRITES));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    let ids: Arc<Vec<String>> = Arc::new((0..WRITES).map(|i| format!("r{i}")).collect());
    group.bench_function(BenchmarkId::new("watchers", WATCHERS), |b| {
        b.iter_custom(|iters| {
            let ids = Arc::clone(&ids);
            rt.block_on(async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let state: Arc<dyn State> = bench_state::memory();
                    let mut readers = Vec::with_capacity(WATCHERS);
                    for _ in 0..WATCHERS {
                        let mut watch =
                            state.watch_kind_dynamic(&BenchSpec::kind(), WatchKindOptions::default()).await.unwrap();
                        readers.push(tokio::spawn(async move {
                            let mut seen = 0;
                            while seen < WRITES {
                                let batch = watch.recv_batch().await.expect("watch ended");
                                seen += batch.len() as u64;
                            }
                        }));
                    }
                    let resources: Vec<Typed<BenchSpec>> =
                        ids.iter().enumerate().map(|(i, id)| Typed::new(id, spec(i as u64))).collect();
                    let writer = Arc::clone(&state);
                    let start = Instant::now();
                    tokio::spawn(async move {
                        for resource in resources {
                            writer.create(resource, CreateOptions::default()).await.unwrap();
                        }
                    })
                    .await
                    .unwrap();
                    for reader in readers {
                        reader.await.unwrap();
                    }
                    total += start.elapsed();
                }
                total
            })
        });
    });
    group.finish();
}

criterion_group!(benches, single_ops, watch_fan_out);
criterion_main!(benches);
