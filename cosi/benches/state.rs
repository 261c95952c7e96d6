//! State broker benchmarks: create, get, update, list of 10,000 and watch fan-out.
//!
//! Run with `cargo bench -p cosi --bench state`; results go in `BENCHMARKS.md`.
//! Each measurement runs many operations inside one `block_on` (`iter_custom`),
//! so the numbers are the operations' cost, not the runtime's entry cost.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi::state::MemoryState;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "BenchSpecs.bench.cosi.dev", namespace = "bench")]
struct BenchSpec {
    value: u64,
    payload: String,
}

fn spec(value: u64) -> BenchSpec {
    // A spec of realistic size: a copy of it would show up in the read numbers.
    BenchSpec { value, payload: "x".repeat(256) }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

fn state_with(n: u64, rt: &tokio::runtime::Runtime) -> Arc<dyn State> {
    let state: Arc<dyn State> = Arc::new(MemoryState::default());
    rt.block_on(async {
        for i in 0..n {
            state.create(Typed::new(format!("r{i:06}"), spec(i)), CreateOptions::default()).await.unwrap();
        }
    });
    state
}

fn single_ops(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("memory");
    group.throughput(Throughput::Elements(1));

    group.bench_function("create", |b| {
        b.iter_custom(|iters| {
            let state: Arc<dyn State> = Arc::new(MemoryState::default());
            rt.block_on(async {
                let start = Instant::now();
                for i in 0..iters {
                    let resource = Typed::new(format!("r{i}"), spec(i));
                    black_box(state.create(resource, CreateOptions::default()).await.unwrap());
                }
                start.elapsed()
            })
        });
    });

    let state = state_with(10_000, &rt);
    group.bench_function("get", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for i in 0..iters {
                    let id = format!("r{:06}", i % 10_000);
                    black_box(state.get::<BenchSpec>(&id).await.unwrap());
                }
                start.elapsed()
            })
        });
    });

    group.bench_function("update", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
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
    group.throughput(Throughput::Elements(10_000));
    group.bench_function(BenchmarkId::new("typed", 10_000), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(state.list::<BenchSpec>(&ListOptions::default()).await.unwrap());
                }
                start.elapsed()
            })
        });
    });
    group.bench_function(BenchmarkId::new("dynamic", 10_000), |b| {
        let kind = BenchSpec::kind();
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(state.list_dynamic(&kind, &ListOptions::default()).await.unwrap());
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
    group.bench_function(BenchmarkId::new("watchers", WATCHERS), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for iter in 0..iters {
                    let state: Arc<dyn State> = Arc::new(MemoryState::default());
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
                    let start = Instant::now();
                    for i in 0..WRITES {
                        let resource = Typed::new(format!("r{iter}-{i}"), spec(i));
                        state.create(resource, CreateOptions::default()).await.unwrap();
                    }
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
