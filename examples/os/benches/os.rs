//! The example OS's two user-visible timings:
//!
//! - **boot to running**: from `Os::boot` to `MachineStatus` stage
//!   `running`, with the default fake delays (DHCP and NTP about a second
//!   each) and with none;
//! - **edit to files**: from a `machine.yaml` save (a new hostname) to the
//!   last file the OS writes because of it (`etc/hostname`, `etc/hosts`,
//!   `proc/sys/kernel/hostname`, `run/machine-status.json`, ...: the newest
//!   modification time under `etc/`, `proc/` and `run/` once the runtime has
//!   settled), median and worst of 20 edits.
//!
//! Run: `cargo bench -p example-os --bench os`. The results go in
//! `BENCHMARKS.md`. The machine configuration is the starter without the
//! `flaky` service, whose restarts would write files at random times.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use cosi::prelude::*;
use example_os::machine_config::STARTER;
use example_os::resources::{HostnameStatus, MachineStage, MachineStatus};
use example_os::{Options, Os, Timings};

const BOOTS_DEFAULT: usize = 5;
const BOOTS_INSTANT: usize = 10;
const EDITS: usize = 20;
const WAIT: Duration = Duration::from_secs(30);

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    runtime.block_on(async {
        report("boot to running, default timings", &boots(Timings::default(), BOOTS_DEFAULT).await);
        report("boot to running, no fake delays", &boots(Timings::instant(), BOOTS_INSTANT).await);
        report("machine.yaml save to the last file written", &edits(EDITS).await);
    });
}

fn report(what: &str, samples: &[Duration]) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    let worst = sorted[sorted.len() - 1];
    let best = sorted[0];
    println!("{what}: median {median:.1?}, best {best:.1?}, worst {worst:.1?} ({} runs)", sorted.len());
}

/// The starter configuration without the crashing service.
fn config() -> String {
    STARTER.lines().filter(|line| !line.contains("name: flaky")).map(|line| format!("{line}\n")).collect()
}

async fn boot(sandbox: &Path, timings: Timings) -> Os {
    std::fs::create_dir_all(sandbox).expect("the sandbox");
    if !sandbox.join("machine.yaml").exists() {
        std::fs::write(sandbox.join("machine.yaml"), config()).expect("machine.yaml");
    }
    Os::boot(Options::new(sandbox).timings(timings)).await.expect("the OS boots")
}

async fn until<T: Resource>(
    os: &Os,
    id: &str,
    predicate: impl Fn(&Typed<T>) -> bool + Send + Sync + 'static,
) -> Typed<T> {
    let condition = WatchCondition::new().resource(predicate);
    let event =
        tokio::time::timeout(WAIT, os.state().watch_for::<T>(id, condition)).await.expect("in time").expect("a watch");
    event.resource().cloned().expect("a resource")
}

async fn boots(timings: Timings, count: usize) -> Vec<Duration> {
    let mut samples = Vec::new();
    for _ in 0..count {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sandbox = dir.path().join("sandbox");
        std::fs::create_dir_all(&sandbox).expect("the sandbox");
        std::fs::write(sandbox.join("machine.yaml"), config()).expect("machine.yaml");
        let started = Instant::now();
        let os = boot(&sandbox, timings).await;
        until::<MachineStatus>(&os, "machine", |status| status.stage == MachineStage::Running).await;
        samples.push(started.elapsed());
        os.shutdown().await.expect("a clean shutdown");
    }
    samples
}

async fn edits(count: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sandbox = dir.path().join("sandbox");
    let os = boot(&sandbox, Timings::default()).await;
    until::<MachineStatus>(&os, "machine", |status| status.stage == MachineStage::Running).await;
    let base = config();
    let mut samples = Vec::new();
    for i in 0..count {
        let name = format!("bench-{i}");
        let text = base.replacen("hostname: demo-node", &format!("hostname: {name}"), 1);
        let swap = sandbox.join(".machine.yaml.swp");
        std::fs::write(&swap, text).expect("write");
        let saved = SystemTime::now();
        std::fs::rename(&swap, sandbox.join("machine.yaml")).expect("save");

        // The new hostname shows the file event was seen; once the runtime
        // has settled, every file the edit causes is written.
        until::<HostnameStatus>(&os, "hostname", move |status| status.hostname == name).await;
        tokio::time::timeout(WAIT, os.runtime().settled()).await.expect("settled in time");
        let last = ["etc", "proc", "run"]
            .iter()
            .filter_map(|dir| newest(&sandbox.join(dir)))
            .max()
            .expect("files were written");
        samples.push(last.duration_since(saved).unwrap_or_default());
    }
    os.shutdown().await.expect("a clean shutdown");
    samples
}

/// The newest modification time of a file under `dir`.
fn newest(dir: &Path) -> Option<SystemTime> {
    let mut latest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let metadata = entry.metadata().ok()?;
        let time = match metadata.is_dir() {
            true => newest(&entry.path()),
            false => metadata.modified().ok(),
        };
        latest = latest.max(time);
    }
    latest
}
