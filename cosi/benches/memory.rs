//! Memory per stored resource: the resident set of a process before and after
//! its in-memory state stores 1,000,000 resources of the benchmark type (a
//! `u64` and a 256-byte string of its own), divided by the count.
//!
//! Run with `cargo bench -p cosi --bench memory`; the Go side is
//! `interop/go/cmd/cosi-go-memory`, which does the same with Go COSI. Results
//! go in `BENCHMARKS.md`. Without `--bench` (`cargo test --benches`) it stores
//! 10,000 resources, as a smoke test.
//!
//! The resources are created by a task of a 2-worker multi-thread runtime,
//! one after another, each built just before its create (as a program builds
//! what it writes), so the figure includes what the allocator keeps of the
//! freed temporaries. Linux only: it reads `VmRSS` from `/proc/self/status`.
//!
//! With `-- --owner NAME` every resource is created owned by `NAME`, as a
//! controller creates its outputs (the options built once, cloned per create).

use std::sync::Arc;

use cosi::prelude::*;
use cosi::state::MemoryState;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "BenchSpecs.bench.cosi.dev", namespace = "bench")]
struct BenchSpec {
    value: u64,
    payload: String,
}

/// The resident set size in bytes, from `/proc/self/status`.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux only)");
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).expect("a VmRSS line");
    let kib: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().expect("VmRSS in kB");
    kib * 1024
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|arg| arg == "--bench");
    let owner = args.iter().position(|arg| arg == "--owner").map(|at| args.get(at + 1).expect("--owner NAME").clone());
    let count: u64 = if full { 1_000_000 } else { 10_000 };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    let state: Arc<dyn State> = Arc::new(MemoryState::default());

    let before = rss();
    let writer = Arc::clone(&state);
    let options = CreateOptions { owner: owner.clone() };
    rt.block_on(rt.spawn(async move {
        for i in 0..count {
            let resource = Typed::new(format!("r{i:07}"), BenchSpec { value: i, payload: "x".repeat(256) });
            writer.create(resource, options.clone()).await.expect("create");
        }
    }))
    .expect("writer task");
    let after = rss();

    let stored = rt.block_on(state.list::<BenchSpec>(&ListOptions::default())).expect("list").len() as u64;
    assert_eq!(stored, count, "every resource is stored");
    let per = (after.saturating_sub(before)) as f64 / count as f64;
    println!(
        "memory: {count} resources{}, RSS before {:.1} MiB, after {:.1} MiB: {per:.0} B per resource",
        owner.map(|owner| format!(" owned by {owner:?}")).unwrap_or_default(),
        before as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
}
