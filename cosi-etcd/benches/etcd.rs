//! `EtcdState` against a real etcd on loopback (started by the benchmark itself):
//! creates, updates and gets per second, and watch events per second, live and replayed.
//!
//! Run: `cargo bench -p cosi-etcd --features testing --bench etcd -- --warm-up-time 1 --measurement-time 4`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cosi::prelude::*;
use cosi::state::Bookmark;
use cosi_etcd::testing::EtcdServer;
use cosi_etcd::{EtcdState, Options};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "BenchSpecs.bench.cosi.dev", namespace = "bench")]
struct BenchSpec {
    value: u64,
    payload: String,
}

fn spec(value: u64) -> BenchSpec {
    BenchSpec { value, payload: "x".repeat(256) }
}

const WATCH_BATCH: u64 = 100;
const REPLAY: u64 = 1000;

fn etcd(c: &mut Criterion) {
    let Some(server) = EtcdServer::start() else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let state = runtime.block_on(EtcdState::connect(&[server.endpoint()], Options::prefix("/bench"))).unwrap();
    let state = Arc::new(state);
    let next = AtomicU64::new(0);

    let mut group = c.benchmark_group("etcd");
    group.throughput(Throughput::Elements(1));
    group.bench_function("create", |b| {
        b.to_async(&runtime).iter(|| async {
            let id = format!("c{}", next.fetch_add(1, Ordering::Relaxed));
            state.create(Typed::new(id, spec(1)), CreateOptions::default()).await.unwrap();
        });
    });

    let stored = runtime.block_on(state.create(Typed::new("updated", spec(0)), CreateOptions::default())).unwrap();
    let current = std::sync::Mutex::new(DynamicResource::from(stored));
    group.bench_function("update", |b| {
        b.to_async(&runtime).iter(|| async {
            let resource = current.lock().unwrap().clone();
            let stored = state.update_dynamic(resource, UpdateOptions::default()).await.unwrap();
            *current.lock().unwrap() = DynamicResource::clone(&stored);
        });
    });
    group.bench_function("get", |b| {
        b.to_async(&runtime).iter(|| async {
            state.get::<BenchSpec>("updated").await.unwrap();
        });
    });

    // Live: one kind watcher, WATCH_BATCH creates, until the watcher has them all.
    group.throughput(Throughput::Elements(WATCH_BATCH));
    group.bench_function("watch live, 100 creates until delivered", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut watch = state.watch_kind_dynamic(&BenchSpec::kind(), WatchKindOptions::default()).await.unwrap();
            for _ in 0..WATCH_BATCH {
                let id = format!("w{}", next.fetch_add(1, Ordering::Relaxed));
                state.create(Typed::new(id, spec(2)), CreateOptions::default()).await.unwrap();
            }
            let mut seen = 0;
            while seen < WATCH_BATCH {
                seen += watch.recv_batch().await.unwrap().len() as u64;
            }
        });
    });

    // Replay: a watch resumed from a bookmark reads REPLAY events of etcd's history.
    let kind = Kind::new("replay", BenchSpec::TYPE);
    let bookmark = runtime.block_on(async {
        let mut watch =
            state.watch_kind_dynamic(&kind, WatchKindOptions::default().with_bootstrap_bookmark()).await.unwrap();
        let bookmark: Bookmark = watch.recv().await.unwrap().bookmark().unwrap().clone();
        for index in 0..REPLAY {
            let resource = Typed::new_in("replay", format!("r{index}"), spec(index));
            state.create(resource, CreateOptions::default()).await.unwrap();
        }
        bookmark
    });
    group.throughput(Throughput::Elements(REPLAY));
    group.bench_function("watch replay, 1000 events from a bookmark", |b| {
        b.to_async(&runtime).iter(|| async {
            let options = WatchKindOptions::from_bookmark(bookmark.clone());
            let mut watch = state.watch_kind_dynamic(&kind, options).await.unwrap();
            let mut seen = 0;
            while seen < REPLAY {
                seen += watch.recv_batch().await.unwrap().len() as u64;
            }
        });
    });
    group.finish();
    drop(server);
}

criterion_group!(benches, etcd);
criterion_main!(benches);
