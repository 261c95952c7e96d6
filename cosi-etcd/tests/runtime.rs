//! Controller runtimes in several processes on one etcd: controllers split
//! between two processes cooperate through the shared state, and replicas of
//! the same controllers fail over through leader election
//! ([`LeaderElection::run`](cosi_etcd::LeaderElection::run)).
//!
//! The other processes are this test binary, run again with [`ROLE_ENV`] set:
//! the child runs only the test that started it, which sees the variable and
//! plays its role instead. A child stops when its standard input closes (the
//! test's graceful shutdown), or when it is killed.
//!
//! The tests share the binary's etcd, each on a key prefix of its own; without
//! an etcd binary they fail and say how to install etcd (or are skipped with
//! `COSI_ALLOW_SKIP=1` outside CI). They wait by bounded polling, never by sleeping.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi::runtime::{ControllerStatus, RUNTIME_NAMESPACE, RuntimeError, RuntimeHandle};
use cosi::state::{EventType, WatchCondition};
use cosi::testing::resources::{IntResource, SentenceResource, StrResource};
use cosi::testing::runtime::{IntToStr, StrToSentence};
use cosi_etcd::testing::{EtcdServer, Raw};
use cosi_etcd::{ElectionError, ElectionOptions, EtcdState, Options};
use parking_lot::Mutex;

/// Set in a child process: `<role> <etcd endpoint> <key prefix>`.
const ROLE_ENV: &str = "COSI_ETCD_TEST_ROLE";

/// A guard against hangs; never a measurement.
const LIMIT: Duration = Duration::from_secs(30);

/// The leases' time to live: how long a killed leader keeps leadership.
const TTL: Duration = Duration::from_secs(2);

/// How soon after its holder is killed a standby must lead: the time to live,
/// the lease's expiry check and a campaign, with room for a loaded machine.
const TAKEOVER: Duration = Duration::from_secs(10);

/// The election the replicas campaign in.
const ELECTION: &str = "controllers";

// ---------------------------------------------------------------------------
// Cooperation.

/// Process A turns integers into strings, process B strings into sentences:
/// creates, updates and teardowns flow through both, and each holds the
/// other's inputs with its finalizers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_in_two_processes_cooperate_through_etcd() {
    if let Ok(config) = std::env::var(ROLE_ENV) {
        return play(&config).await;
    }
    let Some(server) = EtcdServer::shared() else { return };
    let prefix = unique_prefix("cooperation");
    let state = connect(&server.endpoint(), &prefix).await;
    create_int(&state, "one", 1).await;

    let test = "controllers_in_two_processes_cooperate_through_etcd";
    let ints_to_strings = Process::spawn(test, "ints-to-strings", &server.endpoint(), &prefix);
    let strings_to_sentences = Process::spawn(test, "strings-to-sentences", &server.endpoint(), &prefix);
    create_int(&state, "two", 2).await;
    expect_values::<SentenceResource>(&state, "sentences", &[("one", "1 sentence"), ("two", "2 sentence")]).await;
    set_int(&state, "one", 11).await;
    expect_values::<SentenceResource>(&state, "sentences", &[("one", "11 sentence"), ("two", "2 sentence")]).await;

    // Each process writes its own outputs and holds its inputs with its finalizer.
    let int = state.get_dynamic(&int_pointer("one")).await.unwrap();
    assert!(int.metadata().finalizers().has("IntToStr"), "{int:?}");
    let string = state.get_dynamic(&Pointer::new("strings", StrResource::TYPE, "one")).await.unwrap();
    assert_eq!(string.metadata().owner(), Some("IntToStr"));
    assert!(string.metadata().finalizers().has("StrToSentence"), "{string:?}");
    let sentence = state.get_dynamic(&Pointer::new("sentences", SentenceResource::TYPE, "one")).await.unwrap();
    assert_eq!(sentence.metadata().owner(), Some("StrToSentence"));
    for controller in ["IntToStr", "StrToSentence"] {
        let status = Pointer::new(RUNTIME_NAMESPACE, ControllerStatus::TYPE, controller);
        let published = state.watch_for::<ControllerStatus>(&status, WatchCondition::new());
        within("the controller's published status", published).await.unwrap();
    }

    // The teardown crosses both processes and comes back: A tears the string
    // down, B destroys the sentence and releases the string, A destroys the
    // string and releases the integer.
    let one = int_pointer("one");
    assert!(!state.teardown_dynamic(&one, Default::default()).await.unwrap(), "the integer should be held");
    let released = WatchCondition::new().finalizers_empty();
    within("the integer's release", state.watch_for::<IntResource>(&one, released)).await.unwrap();
    expect_values::<SentenceResource>(&state, "sentences", &[("two", "2 sentence")]).await;
    expect_values::<StrResource>(&state, "strings", &[("two", "2")]).await;
    state.destroy_dynamic(&one, DestroyOptions::default()).await.unwrap();

    for process in [ints_to_strings, strings_to_sentences] {
        let status = process.stop().await;
        assert!(status.success(), "the child should stop cleanly when told: {status}");
    }
}

// ---------------------------------------------------------------------------
// Failover.

/// Stamps each integer into a string that names the replica that wrote it.
#[controller(inputs = [Weak<IntResource>(namespace = "ints")], outputs = [Exclusive<StrResource>], inventory = false)]
struct Stamp {
    replica: String,
}

impl Stamp {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        for int in ctx.list_in::<IntResource>("ints", &ListOptions::default()).await? {
            let value = format!("{} by {}", int.value, self.replica);
            let output = Pointer::new("strings", StrResource::TYPE, int.id());
            ctx.modify::<StrResource>(&output, |string| string.value.clone_from(&value)).await?;
        }
        ctx.cleanup_outputs_in::<StrResource>("strings").await
    }
}

/// Two replicas of one controller, each running it only while it leads: one
/// writes at a time; the holder is killed and the other takes over within a
/// few seconds; what was written before, during and after the failover is all
/// reconciled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_fail_over_through_leader_election_and_lose_nothing() {
    if let Ok(config) = std::env::var(ROLE_ENV) {
        return play(&config).await;
    }
    let Some(server) = EtcdServer::shared() else { return };
    let prefix = unique_prefix("failover");
    let state = connect(&server.endpoint(), &prefix).await;
    let election = state.election(ELECTION, "observer", ElectionOptions { ttl: TTL });
    let writes = Writes::record(&state).await;
    for (id, value) in [("b0", 0), ("b1", 1), ("b2", 2)] {
        create_int(&state, id, value).await;
    }

    let test = "replicas_fail_over_through_leader_election_and_lose_nothing";
    let mut replicas = vec![
        ("a", Process::spawn(test, "replica-a", &server.endpoint(), &prefix)),
        ("b", Process::spawn(test, "replica-b", &server.endpoint(), &prefix)),
    ];
    let holder = eventually("a leader", || async { election.leader().await.ok().flatten() }).await;
    let standby = match holder.as_str() {
        "a" => "b",
        _ => "a",
    };
    expect_values::<StrResource>(&state, "strings", &by(holder.as_str(), &[("b0", 0), ("b1", 1), ("b2", 2)])).await;
    // The standby is campaigning, so its takeover is not its start-up.
    eventually("both candidates", || async { (candidates(&state, &prefix).await == 2).then_some(()) }).await;

    // Killed: no resignation, the standby waits for the lease to expire.
    let position = replicas.iter().position(|(name, _)| *name == holder).unwrap();
    let (_, mut killed) = replicas.swap_remove(position);
    killed.kill();
    let killed_at = Instant::now();
    // Written while nobody leads.
    create_int(&state, "d0", 10).await;
    set_int(&state, "b0", 100).await;
    state.destroy_dynamic(&int_pointer("b1"), DestroyOptions::default()).await.unwrap();

    let leader = tokio::time::timeout(TAKEOVER, async {
        loop {
            match election.leader().await {
                Ok(Some(leader)) if leader == standby => return leader,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the standby did not lead within {TAKEOVER:?} of the holder's death"));
    eprintln!("failover: {leader} leads {:?} after {holder} was killed", killed_at.elapsed());
    // Written after the takeover.
    create_int(&state, "a0", 20).await;
    set_int(&state, "b2", 200).await;

    let expected = by(standby, &[("a0", 20), ("b0", 100), ("b2", 200), ("d0", 10)]);
    expect_values::<StrResource>(&state, "strings", &expected).await;
    let log = writes.until_written(&expected).await;
    // One writer at a time: the holder's writes, then only the standby's.
    let first_of_standby = log.iter().position(|(_, writer)| writer == standby).unwrap();
    assert!(first_of_standby > 0 && log[0].1 == holder, "the holder should write first: {log:?}");
    assert!(
        log[first_of_standby..].iter().all(|(_, writer)| writer == standby),
        "the holder wrote after the standby took over: {log:?}"
    );

    let (_, survivor) = replicas.pop().unwrap();
    let status = survivor.stop().await;
    assert!(status.success(), "the survivor should stop cleanly when told: {status}");
    // It resigned when it stopped: nobody leads.
    assert_eq!(election.leader().await.unwrap(), None);
}

/// In one process: a runtime that loses leadership is stopped, a fresh one is
/// built when leadership comes back, a replica that stops hands over at once,
/// and a runtime that cannot be built gives leadership up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_gated_runtime_rebuilds_after_loss_and_hands_over_on_shutdown() {
    let Some(server) = EtcdServer::shared() else { return };
    let prefix = unique_prefix("gated");
    let state = connect(&server.endpoint(), &prefix).await;
    let observer = state.election(ELECTION, "observer", ElectionOptions { ttl: TTL });
    create_int(&state, "x", 1).await;

    let a = Replica::run(connect(&server.endpoint(), &prefix).await, "a");
    eventually("a leading", || async { (observer.leader().await.ok().flatten()? == "a").then_some(()) }).await;
    expect_values::<StrResource>(&state, "strings", &[("x", "1 by a")]).await;
    let b = Replica::run(connect(&server.endpoint(), &prefix).await, "b");
    eventually("b campaigning", || async { (candidates(&state, &prefix).await == 2).then_some(()) }).await;

    // a's lease goes behind its back: a stops its runtime and campaigns again, behind b.
    let raw = Raw::new(&state);
    let lease = raw.leader_lease(ELECTION).await.unwrap().expect("a leads");
    raw.revoke(lease).await.unwrap();
    eventually("b leading", || async { (observer.leader().await.ok().flatten()? == "b").then_some(()) }).await;
    expect_values::<StrResource>(&state, "strings", &[("x", "1 by b")]).await;
    eventually("a campaigning again", || async { (candidates(&state, &prefix).await == 2).then_some(()) }).await;
    assert_eq!((a.builds(), b.builds()), (1, 1));

    // b stops: it resigns, and a leads at once, with a fresh runtime.
    within("b's run", b.stop()).await.unwrap();
    eventually("a leading again", || async { (observer.leader().await.ok().flatten()? == "a").then_some(()) }).await;
    set_int(&state, "x", 2).await;
    expect_values::<StrResource>(&state, "strings", &[("x", "2 by a")]).await;
    assert_eq!(a.builds(), 2);
    within("a's run", a.stop()).await.unwrap();
    assert_eq!(observer.leader().await.unwrap(), None);

    // A runtime that refuses its controllers: the error comes back and leadership goes.
    let broken = state.election(ELECTION, "broken", ElectionOptions { ttl: TTL });
    let build = || {
        let runtime = Runtime::new(state.clone());
        runtime.register(Stamp { replica: "broken".into() })?;
        runtime.register(Stamp { replica: "broken".into() })?;
        Ok(runtime)
    };
    let error = within("the broken run", broken.run(build, std::future::pending::<()>())).await.unwrap_err();
    assert!(matches!(error, ElectionError::Runtime { source: RuntimeError::Conflict(_), .. }), "{error:?}");
    assert_eq!(observer.leader().await.unwrap(), None);
}

/// An etcd outage longer than the time to live: the replica loses leadership
/// and stops its runtime, keeps campaigning while etcd is down, and leads
/// again with a fresh runtime once etcd is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_gated_runtime_leads_again_after_an_etcd_outage() {
    // Stopping etcd affects every prefix: this test has an etcd of its own.
    let Some(mut server) = EtcdServer::start() else { return };
    let prefix = unique_prefix("outage");
    let state = connect(&server.endpoint(), &prefix).await;
    let observer = state.election(ELECTION, "observer", ElectionOptions { ttl: TTL });
    create_int(&state, "x", 1).await;
    let a = Replica::run(connect(&server.endpoint(), &prefix).await, "a");
    expect_values::<StrResource>(&state, "strings", &[("x", "1 by a")]).await;
    assert_eq!(a.builds(), 1);

    server.stop();
    eventually("the runtime stopped", || async { a.stopped().await.then_some(()) }).await;
    server.restart();

    eventually("a fresh runtime", || async { (a.builds() == 2).then_some(()) }).await;
    eventually("a leading again", || async { (observer.leader().await.ok().flatten()? == "a").then_some(()) }).await;
    set_int(&state, "x", 2).await;
    expect_values::<StrResource>(&state, "strings", &[("x", "2 by a")]).await;
    within("a's run", a.stop()).await.unwrap();
    assert_eq!(observer.leader().await.unwrap(), None);
}

/// A replica running [`Stamp`] under `LeaderElection::run` in a task of this process.
struct Replica {
    builds: Arc<AtomicUsize>,
    /// A handle to the last runtime it built.
    runtime: Arc<Mutex<Option<RuntimeHandle>>>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ElectionError>>,
}

impl Replica {
    fn run(state: EtcdState, name: &'static str) -> Replica {
        let builds = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = Arc::new(Mutex::new(None));
        let (counted, built) = (Arc::clone(&builds), Arc::clone(&runtime));
        let task = tokio::spawn(async move {
            let election = state.election(ELECTION, name, ElectionOptions { ttl: TTL });
            let build = || {
                counted.fetch_add(1, Ordering::SeqCst);
                let runtime = stamp_runtime(&state, name)?;
                *built.lock() = Some(runtime.handle());
                Ok(runtime)
            };
            election.run(build, stopped).await
        });
        Replica { builds, runtime, stop, task }
    }

    fn builds(&self) -> usize {
        self.builds.load(Ordering::SeqCst)
    }

    /// Whether the last runtime it built (and started) has been shut down.
    async fn stopped(&self) -> bool {
        let runtime = self.runtime.lock().clone();
        runtime.is_some_and(|runtime| !runtime.is_running())
    }

    async fn stop(self) -> Result<(), ElectionError> {
        let _ = self.stop.send(());
        self.task.await.expect("the replica's task panicked")
    }
}

fn stamp_runtime(state: &EtcdState, replica: &str) -> Result<Runtime, RuntimeError> {
    let runtime = Runtime::new(state.clone());
    runtime.register(Stamp { replica: replica.to_owned() })?;
    Ok(runtime)
}

/// How many candidates campaign in the election: their keys under its name.
async fn candidates(state: &EtcdState, prefix: &str) -> i64 {
    Raw::new(state).count(format!("{prefix}!election/{ELECTION}/")).await.unwrap_or(-1)
}

/// Every write of a string's value, in order, as (id, replica) pairs.
struct Writes {
    log: Arc<Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Writes {
    /// Starts recording, from now on.
    async fn record(state: &EtcdState) -> Writes {
        let kind = Kind::new("strings", StrResource::TYPE);
        let mut watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let written = Arc::clone(&log);
        let task = tokio::spawn(async move {
            while let Some(event) = watch.recv().await {
                if let Some(error) = event.error() {
                    // Fails the order check, which prints the log.
                    written.lock().push((format!("the watch failed: {error}"), "nobody".to_owned()));
                    break;
                }
                if !matches!(event.event_type(), EventType::Created | EventType::Updated) {
                    continue;
                }
                let resource = event.resource().expect("a written resource");
                // A teardown keeps the value, and with it the name of the previous writer.
                if resource.metadata().phase() == Phase::TearingDown {
                    continue;
                }
                let string = Typed::<StrResource>::try_from(resource).expect("a string");
                let writer = string.value.rsplit(" by ").next().unwrap_or_default().to_owned();
                written.lock().push((string.id().to_owned(), writer));
            }
        });
        Writes { log, task }
    }

    /// The log, once it holds the writes of the `expected` strings' current values.
    async fn until_written(&self, expected: &[(String, String)]) -> Vec<(String, String)> {
        eventually("every write in the log", || async {
            let log = self.log.lock().clone();
            let complete = expected.iter().all(|(id, value)| {
                let writer = value.rsplit(" by ").next().unwrap_or_default();
                log.iter().any(|(logged, by)| logged == id && by == writer)
            });
            complete.then_some(log)
        })
        .await
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `(id, "<value> by <replica>")` for each integer.
fn by(replica: &str, ints: &[(&str, i64)]) -> Vec<(String, String)> {
    ints.iter().map(|(id, value)| (id.to_string(), format!("{value} by {replica}"))).collect()
}

// ---------------------------------------------------------------------------
// The child processes.

/// A child process: this test binary, running only `test`, in a role.
struct Process(Child);

impl Process {
    fn spawn(test: &str, role: &str, endpoint: &str, prefix: &str) -> Process {
        let child = Command::new(std::env::current_exe().expect("the test binary"))
            .args([test, "--exact", "--nocapture", "--test-threads", "1"])
            .env(ROLE_ENV, format!("{role} {endpoint} {prefix}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot run the test binary again");
        Process(child)
    }

    /// SIGKILL: the process ends without a word to etcd.
    fn kill(&mut self) {
        self.0.kill().expect("cannot kill the child");
        self.0.wait().expect("cannot reap the child");
    }

    /// Closes its standard input, which tells it to stop, and waits until it has.
    async fn stop(mut self) -> ExitStatus {
        drop(self.0.stdin.take());
        let deadline = Instant::now() + LIMIT;
        loop {
            match self.0.try_wait().expect("cannot wait for the child") {
                Some(status) => return status,
                None if Instant::now() >= deadline => panic!("the child did not stop within {LIMIT:?}"),
                None => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The child's side: plays `<role> <endpoint> <prefix>` until its standard input closes.
async fn play(config: &str) {
    let mut parts = config.splitn(3, ' ');
    let (Some(role), Some(endpoint), Some(prefix)) = (parts.next(), parts.next(), parts.next()) else {
        panic!("{ROLE_ENV} should be `<role> <endpoint> <prefix>`, not {config:?}");
    };
    let state = connect(endpoint, prefix).await;
    let stop = stdin_closed();
    match role {
        "ints-to-strings" => {
            let runtime = Runtime::new(state);
            runtime.register(IntToStr::new("ints", "strings")).unwrap();
            runtime.run_until(stop).await.unwrap();
        }
        "strings-to-sentences" => {
            let runtime = Runtime::new(state);
            runtime.register(StrToSentence::new("strings", "sentences")).unwrap();
            runtime.run_until(stop).await.unwrap();
        }
        replica => {
            let name = replica.strip_prefix("replica-").unwrap_or_else(|| panic!("unknown role {replica:?}"));
            let election = state.election(ELECTION, name, ElectionOptions { ttl: TTL });
            election.run(|| stamp_runtime(&state, name), stop).await.unwrap();
        }
    }
}

/// Resolves when this process's standard input closes: the parent said stop, or died.
fn stdin_closed() -> impl Future<Output = ()> {
    let (closed, receiver) = tokio::sync::oneshot::channel::<()>();
    // A thread of its own: reading blocks, and the runtime must not wait for it at exit.
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        let _ = closed.send(());
    });
    async move {
        let _ = receiver.await;
    }
}

// ---------------------------------------------------------------------------
// Helpers.

fn unique_prefix(test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("/runtime-tests/{test}/{}/{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

async fn connect(endpoint: &str, prefix: &str) -> EtcdState {
    EtcdState::connect(&[endpoint], Options::prefix(prefix)).await.expect("connect to etcd")
}

async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `check` until it gives a value, for at most [`LIMIT`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not reached within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn int_pointer(id: &str) -> Pointer {
    Pointer::new("ints", IntResource::TYPE, id)
}

async fn create_int(state: &EtcdState, id: &str, value: i64) {
    state.create(Typed::new_in("ints", id, IntResource { value }), CreateOptions::default()).await.unwrap();
}

async fn set_int(state: &EtcdState, id: &str, value: i64) {
    state
        .update_with_conflicts(&int_pointer(id), UpdateOptions::default(), |int: &mut Typed<IntResource>| {
            int.value = value;
            Ok::<_, cosi::Error>(())
        })
        .await
        .unwrap();
}

/// A spec with a string value.
trait Value: Resource {
    fn value(&self) -> &str;
}

impl Value for StrResource {
    fn value(&self) -> &str {
        &self.value
    }
}

impl Value for SentenceResource {
    fn value(&self) -> &str {
        &self.value
    }
}

/// Waits until the resources of `T` in `namespace` are exactly `expected` (by ID).
async fn expect_values<T: Value>(state: &EtcdState, namespace: &str, expected: &[(impl AsRef<str>, impl AsRef<str>)]) {
    let expected: Vec<(&str, &str)> = expected.iter().map(|(id, value)| (id.as_ref(), value.as_ref())).collect();
    let mut last = Vec::new();
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Ok(all) = state.list_in::<T>(namespace, &ListOptions::default()).await {
            last = all.iter().map(|resource| (resource.id().to_owned(), resource.value().to_owned())).collect();
            if last.iter().map(|(id, value)| (id.as_str(), value.as_str())).eq(expected.iter().copied()) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{} in {namespace}: expected {expected:?}, found {last:?}", T::TYPE);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
