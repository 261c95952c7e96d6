//! Crash test: a writer killed with SIGKILL at a random moment loses nothing it acknowledged.
//!
//! The test re-executes its own binary as the writer (the environment
//! variable `COSI_REDB_CRASH_CHILD` names the store; runs alternate between a
//! plain and an encrypted store). The writer runs
//! [`WRITERS`] tasks, two per namespace, so that their writes share commits
//! both across and within collections; each task creates numbered resources
//! one after another and prints `try W ID` before and `ack W ID` after every create. The parent kills it
//! after a random delay, then checks on the same file, run after run:
//!
//! - redb opens it without a repair (no repair callback fires);
//! - every acknowledged resource is stored, with its spec;
//! - everything stored was attempted, and at most one unacknowledged write
//!   per task (the one in flight) is stored.
//!
//! Output from a pipe outlives the process that wrote it, so the parent sees
//! every line the writer printed before it died.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cosi::prelude::*;
use cosi::testing::resources::PathResource;
use cosi_redb::{Options, RedbState};

const CHILD_ENV: &str = "COSI_REDB_CRASH_CHILD";
const RUN_ENV: &str = "COSI_REDB_CRASH_RUN";
/// How many times the writer is killed; `COSI_REDB_CRASH_RUNS` overrides it.
/// Runs alternate between a plain and an encrypted store, so each is killed
/// half as often.
const RUNS: u32 = 50;
/// Set in the writer's environment when it writes the encrypted store.
const KEY_ENV: &str = "COSI_REDB_CRASH_ENCRYPTED";
const KEY: [u8; 32] = [0x42; 32];
const WRITERS: usize = 4;

fn main() {
    match std::env::var_os(CHILD_ENV) {
        Some(path) => writer(Path::new(&path)),
        None => parent(),
    }
}

/// Two writer tasks share each namespace.
fn namespace(writer: usize) -> String {
    format!("writers-{}", writer / 2)
}

/// The child: writes as fast as it can until it is killed.
fn writer(path: &Path) {
    let run = std::env::var(RUN_ENV).expect("the parent names the run");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let state = Arc::new(
            RedbState::open(path, options(std::env::var_os(KEY_ENV).is_some()))
                .expect("the writer cannot open the store"),
        );
        println!("ready");
        let tasks = (0..WRITERS).map(|w| {
            let state = Arc::clone(&state);
            let run = run.clone();
            tokio::spawn(async move {
                for n in 0u64.. {
                    let id = format!("w{w}-{run}-{n:07}");
                    print_line(&format!("try {w} {id}"));
                    let resource = Typed::new_in(namespace(w), &id, PathResource { value: id.clone() });
                    state.create(resource, CreateOptions::default()).await.expect("a create failed");
                    print_line(&format!("ack {w} {id}"));
                }
            })
        });
        for task in tasks.collect::<Vec<_>>() {
            task.await.expect("a writer task failed");
        }
    });
}

/// One line in one `write`, flushed, so a kill never leaves half a line.
fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{line}\n").as_bytes()).expect("stdout");
    out.flush().expect("stdout");
}

fn options(encrypted: bool) -> Options {
    match encrypted {
        true => Options::default().encryption_key(KEY),
        false => Options::default(),
    }
}

/// One store the writer is killed over, and what it was ever asked to hold.
struct Store {
    path: std::path::PathBuf,
    encrypted: bool,
    /// Per writer task: what was ever attempted and acknowledged, over all runs.
    attempted: Vec<BTreeSet<String>>,
    acked: Vec<BTreeSet<String>>,
    /// What the last check found stored.
    stored: usize,
}

fn parent() {
    let runs = std::env::var("COSI_REDB_CRASH_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(RUNS);
    let dir = tempfile::tempdir().expect("temporary directory");
    let exe = std::env::current_exe().expect("the test binary");
    let random = RandomState::new();
    let mut stores: Vec<Store> = [("plain.redb", false), ("encrypted.redb", true)]
        .into_iter()
        .map(|(name, encrypted)| Store {
            path: dir.path().join(name),
            encrypted,
            attempted: vec![BTreeSet::new(); WRITERS],
            acked: vec![BTreeSet::new(); WRITERS],
            stored: 0,
        })
        .collect();
    let mut total_acked = 0usize;

    for run in 0..runs {
        let store = &mut stores[run as usize % 2];
        let (path, attempted, acked) = (&store.path, &mut store.attempted, &mut store.acked);
        let mut command = Command::new(&exe);
        if store.encrypted {
            command.env(KEY_ENV, "1");
        }
        let mut child = command
            .env(CHILD_ENV, path)
            .env(RUN_ENV, format!("run{run:03}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start the writer");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        match lines.next() {
            Some(Ok(line)) if line == "ready" => {}
            other => panic!("run {run}: the writer did not start: {other:?}"),
        }
        let delay = 20 + random.hash_one((run, std::time::SystemTime::now())) % 280;
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().expect("cannot kill the writer");
        child.wait().expect("cannot reap the writer");

        let mut run_acked = 0;
        for line in lines {
            let line = line.expect("the writer's output");
            let mut words = line.split(' ');
            let (Some(what), Some(w), Some(id), None) = (words.next(), words.next(), words.next(), words.next()) else {
                panic!("run {run}: unexpected line {line:?}");
            };
            let w: usize = w.parse().expect("a writer number");
            match what {
                "try" => attempted[w].insert(id.to_owned()),
                "ack" => {
                    run_acked += 1;
                    acked[w].insert(id.to_owned())
                }
                _ => panic!("run {run}: unexpected line {line:?}"),
            };
        }
        total_acked += run_acked;

        assert!(!needs_repair(path), "run {run}: the file needed a repair after the kill");
        store.stored = check(path, store.encrypted, run, attempted, acked);
    }
    assert!(total_acked > 0, "the writers never got a write acknowledged");
    for store in &stores {
        let count = |sets: &[BTreeSet<String>]| sets.iter().map(BTreeSet::len).sum::<usize>();
        println!(
            "crash: {} store: {} acknowledged <= {} stored <= {} attempted",
            if store.encrypted { "encrypted" } else { "plain" },
            count(&store.acked),
            store.stored,
            count(&store.attempted)
        );
    }
    println!("crash: {runs} kills, {total_acked} acknowledged writes, all present");
    println!("crash: {runs} passed, 0 failed");
}

/// Whether redb has to repair the file to open it.
fn needs_repair(path: &Path) -> bool {
    let repaired = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&repaired);
    let db = redb::Database::builder()
        .set_repair_callback(move |_| flag.store(true, Ordering::SeqCst))
        .open(path)
        .expect("redb cannot open the file after the kill");
    drop(db);
    repaired.load(Ordering::SeqCst)
}

/// Checks acknowledged ⊆ stored ⊆ attempted; returns how many are stored.
fn check(path: &Path, encrypted: bool, run: u32, attempted: &[BTreeSet<String>], acked: &[BTreeSet<String>]) -> usize {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let state = RedbState::open(path, options(encrypted)).expect("the store does not open after the kill");
        let mut total = 0;
        for w in 0..WRITERS {
            let kind = Kind::new(namespace(w), <PathResource as Resource>::TYPE);
            let stored = state.list_dynamic(&kind, &ListOptions::default()).await.expect("list");
            let mut ids = BTreeSet::new();
            let mine = format!("w{w}-");
            for resource in stored.into_iter().filter(|resource| resource.id().starts_with(&mine)) {
                let typed = Typed::<PathResource>::try_from(resource.clone()).expect("a typed read");
                assert_eq!(typed.value, typed.id(), "run {run}: the spec of {} is not its own", typed.id());
                assert_eq!(resource.metadata().version(), Version::new(1));
                ids.insert(resource.id().to_owned());
            }
            let lost: Vec<_> = acked[w].difference(&ids).collect();
            assert!(
                lost.is_empty(),
                "run {run}, writer {w}: {} acknowledged writes are gone, the first: {:?}",
                lost.len(),
                &lost[..lost.len().min(5)]
            );
            let invented: Vec<_> = ids.difference(&attempted[w]).collect();
            assert!(invented.is_empty(), "run {run}, writer {w}: never attempted, yet stored: {invented:?}");
            let in_flight: Vec<_> = ids.difference(&acked[w]).collect();
            assert!(
                in_flight.len() <= usize::try_from(run + 1).unwrap_or(usize::MAX),
                "run {run}, writer {w}: more unacknowledged writes stored than were in flight: {in_flight:?}"
            );
            total += ids.len();
        }
        total
    })
}
