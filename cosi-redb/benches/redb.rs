//! Durable state benchmarks: creates per second with 1 and 16 writers, reopen of 100,000 resources.
//!
//! Run with `cargo bench -p cosi-redb --bench redb`; results go in `BENCHMARKS.md`.
//! Every create waits for its commit (fsync), so the numbers depend on the
//! disk more than on the CPU. The store lives in a temporary directory (set
//! `TMPDIR` to measure another disk).

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi_redb::{Options, RedbState};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "BenchSpecs.bench.cosi.dev", namespace = "bench")]
struct BenchSpec {
    value: u64,
    payload: String,
}

fn spec(value: u64) -> BenchSpec {
    // The same 256-byte spec as the in-memory benchmarks.
    BenchSpec { value, payload: "x".repeat(256) }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

/// `total` creates by `writers` concurrent tasks, each in its own namespace
/// (`spread`) or all in one; returns the time they took.
async fn create(state: &Arc<RedbState>, run: u64, total: u64, writers: u64, spread: bool) -> Duration {
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let state = Arc::clone(state);
            tokio::spawn(async move {
                let namespace = if spread { format!("bench-{w}") } else { "bench".to_owned() };
                for i in (w..total).step_by(writers as usize) {
                    let resource = Typed::new_in(&namespace, format!("r{run}-{i}"), spec(i));
                    black_box(state.create(resource, CreateOptions::default()).await.unwrap());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

fn creates(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("redb/create");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    for (name, writers, spread) in [("1", 1, true), ("16", 16, true), ("16-one-kind", 16, false)] {
        let state = Arc::new(RedbState::open(dir.path().join(format!("{name}.redb")), Options::default()).unwrap());
        let mut run = 0;
        group.bench_function(BenchmarkId::new("writers", name), |b| {
            b.iter_custom(|iters| {
                run += 1;
                rt.block_on(create(&state, run, iters, writers, spread))
            });
        });
    }
    group.finish();
}

/// A store of `n` resources, written by 64 writers so that it fills in seconds.
fn fill(path: &Path, n: u64, rt: &tokio::runtime::Runtime) {
    let state = Arc::new(RedbState::open(path, Options::default()).unwrap());
    rt.block_on(create(&state, 0, n, 64, true));
}

fn reopen(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.redb");
    const N: u64 = 100_000;
    fill(&path, N, &rt);
    let mut group = c.benchmark_group("redb/reopen");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N));
    group.bench_function(BenchmarkId::from_parameter(N), |b| {
        b.iter(|| {
            let state = RedbState::open(&path, Options::default()).unwrap();
            black_box(&state);
        });
    });
    group.finish();
}

criterion_group!(benches, creates, reopen);
criterion_main!(benches);
