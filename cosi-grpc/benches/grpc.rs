//! gRPC benchmarks over loopback TCP: get, create, watch fan-out to 1 and 100
//! remote watchers, and the cost of encoding typed specs.
//!
//! Run with `cargo bench -p cosi-grpc --bench grpc`; results go in `BENCHMARKS.md`.
//! Client and server share one process and one two-worker runtime, so each
//! operation pays both sides' CPU on the same cores.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi::resource::{DynamicResource, EncodedSpec, Metadata};
use cosi::state::{MemoryState, State};
use cosi_grpc::{Client, ClientSecurity, Endpoint, Security, Server};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "BenchSpecs.bench.cosi.dev", namespace = "bench")]
struct BenchSpec {
    value: u64,
    payload: String,
    addresses: Vec<String>,
    enabled: bool,
}

fn spec(value: u64) -> BenchSpec {
    BenchSpec {
        value,
        payload: "x".repeat(256),
        addresses: vec!["192.168.1.10/24".into(), "fd00::10/64".into()],
        enabled: true,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

async fn connect() -> Client {
    let listening = Server::new(MemoryState::default())
        .bind(&"tcp://127.0.0.1:0".parse::<Endpoint>().expect("endpoint"), Security::Insecure)
        .await
        .expect("bind");
    let endpoint = listening.endpoint().clone();
    tokio::spawn(listening.serve());
    Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect")
}

fn rpc(c: &mut Criterion) {
    let rt = runtime();
    let client = rt.block_on(connect());
    let mut group = c.benchmark_group("grpc");
    group.throughput(Throughput::Elements(1));

    let mut next = 0u64;
    group.bench_function("create typed (YAML spec)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    next += 1;
                    let resource = Typed::new(format!("c{next}"), spec(next));
                    black_box(client.create(resource, CreateOptions::default()).await.expect("create"));
                }
                start.elapsed()
            })
        });
    });

    let encoded = EncodedSpec { proto: vec![0; 300], yaml: Some(serde_yaml_ng::to_string(&spec(0)).expect("yaml")) };
    group.bench_function("create encoded (bytes as they are)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    next += 1;
                    let metadata = Metadata::new("bench", BenchSpec::TYPE, format!("e{next}"));
                    let resource = DynamicResource::encoded(metadata, encoded.clone());
                    black_box(client.create_dynamic(resource, CreateOptions::default()).await.expect("create"));
                }
                start.elapsed()
            })
        });
    });

    rt.block_on(async {
        client.create(Typed::new("target", spec(1)), CreateOptions::default()).await.expect("create");
    });
    let pointer = BenchSpec::pointer("target");
    group.bench_function("get", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(client.get_dynamic(&pointer).await.expect("get"));
                }
                start.elapsed()
            })
        });
    });
    group.bench_function("get typed (decodes the YAML spec)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(client.get::<BenchSpec>("target").await.expect("get"));
                }
                start.elapsed()
            })
        });
    });
    group.finish();
}

/// `writes` updates of one resource, until every watcher has received all of them.
fn watch(c: &mut Criterion) {
    const WRITES: u64 = 200;
    // Every round watches a fresh namespace, across all of criterion's calls.
    static ROUND: AtomicU64 = AtomicU64::new(0);
    let rt = runtime();
    let client = rt.block_on(connect());
    let mut group = c.benchmark_group("grpc watch");
    group.sample_size(10);
    for watchers in [1usize, 100] {
        group.throughput(Throughput::Elements(WRITES * watchers as u64));
        group.bench_with_input(BenchmarkId::new("events to watchers", watchers), &watchers, |b, &watchers| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let round = ROUND.fetch_add(1, Ordering::Relaxed);
                        let kind = Kind::new(format!("watch-{watchers}-{round}"), BenchSpec::TYPE);
                        let mut tasks = Vec::new();
                        for _ in 0..watchers {
                            let mut watch =
                                client.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.expect("watch");
                            tasks.push(tokio::spawn(async move {
                                let mut seen = 0;
                                while seen < WRITES {
                                    let batch = watch.recv_batch().await.expect("events");
                                    seen += batch.len() as u64;
                                }
                            }));
                        }
                        let start = Instant::now();
                        let writer = Arc::new(client.clone());
                        for i in 0..WRITES {
                            let resource = Typed::new_in(kind.namespace(), format!("r{i}"), spec(i));
                            writer.create(resource, CreateOptions::default()).await.expect("create");
                        }
                        for task in tasks {
                            task.await.expect("watcher");
                        }
                        total += start.elapsed();
                    }
                    total
                })
            });
        });
    }
    group.finish();
}

/// What the spec encoding costs alone, without the RPC: YAML (chosen) against JSON.
fn encoding(c: &mut Criterion) {
    let value = spec(42);
    let yaml = serde_yaml_ng::to_string(&value).expect("yaml");
    let json = serde_json::to_string(&value).expect("json");
    let mut group = c.benchmark_group("spec encoding");
    group.throughput(Throughput::Elements(1));
    group.bench_function("YAML encode", |b| b.iter(|| serde_yaml_ng::to_string(black_box(&value)).expect("yaml")));
    group.bench_function("YAML decode", |b| {
        b.iter(|| serde_yaml_ng::from_str::<BenchSpec>(black_box(&yaml)).expect("yaml"))
    });
    group.bench_function("JSON encode", |b| b.iter(|| serde_json::to_string(black_box(&value)).expect("json")));
    group.bench_function("JSON decode", |b| {
        b.iter(|| serde_json::from_str::<BenchSpec>(black_box(&json)).expect("json"))
    });
    group.finish();
}

criterion_group!(benches, rpc, watch, encoding);
criterion_main!(benches);
