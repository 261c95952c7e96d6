//! Controllers run independently: one that holds its thread (computing, or
//! blocking where it should not) stalls no other, controllers with work use
//! every worker thread, and the runtime reports a poll that holds its thread
//! too long against its controller.
//!
//! Nothing here is a timing: each test waits for an order of events (a
//! controller reconciles while another still spins) that the old design,
//! every controller in one task, could never produce; the waits are
//! generous bounds that only a broken runtime reaches.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi::runtime::{ControllerStatus, RuntimeOptions};
use cosi::state::WatchCondition;
use cosi::testing::runtime::eventually;

/// How long a test waits for what it expects before it fails.
const WAIT: Duration = Duration::from_secs(20);
/// How long a spinning reconcile spins at most, when nothing releases it.
const SPIN_LIMIT: Duration = Duration::from_secs(30);

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Loads.isolation-test.cosi.dev", namespace = "default")]
pub struct Load {
    pub spin: bool,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Pings.isolation-test.cosi.dev", namespace = "default")]
pub struct Ping {
    pub n: u64,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Pongs.isolation-test.cosi.dev", namespace = "default")]
pub struct Pong {
    pub n: u64,
}

/// Spins, holding its thread, while its `Load` says so, until released.
#[controller(inputs = [Weak<Load>], outputs = [], inventory = false)]
struct Hog {
    spinning: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
}

impl Hog {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        if ctx.get::<Load>("load").await.is_ok_and(|load| load.spin) {
            self.spinning.store(true, Ordering::SeqCst);
            let started = Instant::now();
            while !self.release.load(Ordering::SeqCst) && started.elapsed() < SPIN_LIMIT {
                std::hint::spin_loop();
            }
            self.spinning.store(false, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// Answers each ping with a pong.
#[controller(inputs = [Weak<Ping>], outputs = [Exclusive<Pong>], inventory = false)]
async fn echo(ctx: &mut Ctx) -> cosi::Result<()> {
    for ping in ctx.list::<Ping>(&ListOptions::default()).await? {
        ctx.modify::<Pong>(ping.id(), |pong| pong.n = ping.n).await?;
    }
    Ok(())
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// Waits until `flag` is set, polling.
async fn until_set(flag: &AtomicBool, what: &str) {
    let started = Instant::now();
    while !flag.load(Ordering::SeqCst) {
        assert!(started.elapsed() < WAIT, "{what} did not happen within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[test]
fn a_controller_that_holds_its_thread_stalls_no_other() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        let (spinning, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        runtime.register(Hog { spinning: spinning.clone(), release: release.clone() }).expect("register");
        runtime.register(echo {}).expect("register");
        runtime.start().expect("start");
        runtime.settled().await;

        state.create(Typed::new("load", Load { spin: true }), CreateOptions::default()).await.expect("create");
        until_set(&spinning, "the hog's spin").await;
        // The echo answers, several times, while the hog still holds its thread.
        for n in 1..=3 {
            state.modify::<Ping>("p", UpdateOptions::default(), |ping| ping.n = n).await.expect("ping");
            let answered =
                state.watch_for::<Pong>("p", WatchCondition::new().resource(move |pong: &Typed<Pong>| pong.n == n));
            tokio::time::timeout(WAIT, answered)
                .await
                .expect("the echo answers while the hog spins")
                .expect("the watch");
            assert!(spinning.load(Ordering::SeqCst), "the hog stopped spinning before the echo answered ping {n}");
        }
        release.store(true, Ordering::SeqCst);
        runtime.settled().await;
        runtime.shutdown().await;
    });
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Calls.isolation-test.cosi.dev", namespace = "default")]
pub struct Call {
    pub n: u64,
}

/// Writes a `Call` its `Load` asks for, then spins, holding its thread,
/// until released: what it woke must not wait for it.
#[controller(inputs = [Weak<Load>(namespace = "caller")], outputs = [Exclusive<Call>], inventory = false)]
struct Caller {
    spinning: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
}

impl Caller {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let load = ctx.get::<Load>(Pointer::new("caller", Load::TYPE, "load")).await;
        if load.is_ok_and(|load| load.spin) {
            ctx.modify::<Call>("c", |call| call.n = 1).await?;
            self.spinning.store(true, Ordering::SeqCst);
            let started = Instant::now();
            while !self.release.load(Ordering::SeqCst) && started.elapsed() < SPIN_LIMIT {
                std::hint::spin_loop();
            }
            self.spinning.store(false, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// Answers each call with a pong.
#[controller(inputs = [Weak<Call>], outputs = [Exclusive<Pong>], inventory = false)]
async fn callee(ctx: &mut Ctx) -> cosi::Result<()> {
    for call in ctx.list::<Call>(&ListOptions::default()).await? {
        ctx.modify::<Pong>(call.id(), |pong| pong.n = call.n).await?;
    }
    Ok(())
}

#[test]
fn a_controller_woken_by_one_that_then_holds_its_thread_does_not_wait_for_it() {
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        let (spinning, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        runtime.register(Caller { spinning: spinning.clone(), release: release.clone() }).expect("register");
        runtime.register(callee {}).expect("register");
        runtime.start().expect("start");
        runtime.settled().await;

        let load = Typed::new_in("caller", "load", Load { spin: true });
        state.create(load, CreateOptions::default()).await.expect("create");
        let answered = state.watch_for::<Pong>("c", WatchCondition::new().resource(|pong: &Typed<Pong>| pong.n == 1));
        tokio::time::timeout(WAIT, answered)
            .await
            .expect("the callee answers while the caller spins")
            .expect("the watch");
        assert!(spinning.load(Ordering::SeqCst), "the caller stopped spinning before the callee answered");
        release.store(true, Ordering::SeqCst);
        runtime.settled().await;
        runtime.shutdown().await;
    });
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Hops.isolation-test.cosi.dev", namespace = "default")]
pub struct Hop {
    pub n: u64,
}

/// A link of a chain: copies each `Hop` of `h{i}` into `h{i+1}`.
#[controller(inputs = [Weak<Hop>(namespace = "h0")], outputs = [Shared<Hop>], inventory = false)]
struct Link {
    from: String,
    to: String,
}

impl Link {
    fn registration(index: usize) -> cosi::controller::Registration {
        let (from, to) = (format!("h{index}"), format!("h{}", index + 1));
        let inputs = [Input::of::<Hop>(InputKind::Weak).in_namespace(&from)];
        Link { from, to }.named(format!("link{index}")).with_inputs(inputs)
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        for hop in ctx.list_in::<Hop>(&self.from, &ListOptions::default()).await? {
            let n = hop.n;
            ctx.modify::<Hop>(&Pointer::new(&self.to, Hop::TYPE, hop.id()), |out| out.n = n).await?;
        }
        Ok(())
    }
}

/// Holds its thread for 20 ms at every reconcile, and asks for the next
/// at once, forever: busy, as many of them as there are threads.
#[controller(inputs = [Weak<Load>(namespace = "busy")], outputs = [], inventory = false)]
struct Busy {
    polls: Arc<AtomicUsize>,
}

impl Busy {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        self.polls.fetch_add(1, Ordering::SeqCst);
        ctx.requeue();
        Ok(())
    }
}

#[test]
fn a_chain_of_quick_controllers_runs_through_between_the_polls_of_busy_ones() {
    const LINKS: usize = 8;
    block_on(async {
        let state = cosi::state::memory();
        let runtime = Runtime::new(state.clone());
        for index in 0..LINKS {
            runtime.register(Link::registration(index)).expect("register");
        }
        let polls = Arc::new(AtomicUsize::new(0));
        // As many as the worker threads: every lane is held, most of the time.
        for name in ["busy0", "busy1"] {
            runtime.register(Busy { polls: polls.clone() }.named(name)).expect("register");
        }
        runtime.start().expect("start");
        // Not a tokio timer: with every worker held by busy polls, tokio
        // drives its timers only every 61 of them.
        while polls.load(Ordering::SeqCst) < 4 {
            std::thread::sleep(Duration::from_millis(1));
        }
        for n in 1..=3 {
            // From this thread, outside the runtime's: the write never waits for a lane.
            let before = polls.load(Ordering::SeqCst);
            state
                .modify::<Hop>(Pointer::new("h0", Hop::TYPE, "x"), UpdateOptions::default(), |hop| hop.n = n)
                .await
                .expect("the head");
            let tail = Pointer::new(format!("h{LINKS}"), Hop::TYPE, "x");
            let arrived =
                state.watch_for::<Hop>(tail, WatchCondition::new().resource(move |hop: &Typed<Hop>| hop.n == n));
            tokio::time::timeout(WAIT, arrived).await.expect("the chain's tail").expect("the watch");
            // Taken in the order they were woken, each hop would wait for a
            // busy poll: some eight of them. Quick ones first, the chain runs
            // through once a lane is free: the two busy polls that held the
            // lanes when the head changed end, and perhaps one more.
            let busy = polls.load(Ordering::SeqCst) - before;
            assert!(busy < LINKS / 2, "the chain of {LINKS} waited for {busy} busy polls on trip {n}");
        }
        runtime.shutdown().await;
    });
}

/// Each reconcile waits, holding its thread, until all `needed` are inside
/// one at once: it returns only if they run in parallel.
#[controller(inputs = [Weak<Load>(namespace = "a")], outputs = [], inventory = false)]
struct Rendezvous {
    inside: Arc<AtomicUsize>,
    needed: usize,
    met: Arc<AtomicUsize>,
}

impl Rendezvous {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        self.inside.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        while self.inside.load(Ordering::SeqCst) < self.needed {
            if started.elapsed() > WAIT {
                return Err(cosi::Error::other(std::io::Error::other("the others never ran at the same time")));
            }
            std::hint::spin_loop();
        }
        self.met.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn controllers_with_work_run_on_every_worker_thread() {
    block_on(async {
        let runtime = Runtime::new(cosi::state::memory());
        let (inside, met) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for name in ["first", "second"] {
            let rendezvous = Rendezvous { inside: inside.clone(), needed: 2, met: met.clone() };
            runtime.register(rendezvous.named(name)).expect("register");
        }
        runtime.start().expect("start");
        runtime.settled().await;
        assert_eq!(met.load(Ordering::SeqCst), 2, "both controllers reconciled at the same time, on two threads");
        for name in ["first", "second"] {
            assert_eq!(runtime.stats(name).expect("stats").errors, 0, "{name} waited in vain for the other");
        }
        runtime.shutdown().await;
    });
}

/// Holds its thread for `hold` in its first reconcile, then never again.
#[controller(inputs = [Weak<Load>(namespace = "slow")], outputs = [], inventory = false)]
struct Slow {
    hold: Duration,
    done: bool,
}

impl Slow {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        if !std::mem::replace(&mut self.done, true) {
            std::thread::sleep(self.hold);
        }
        Ok(())
    }
}

/// The log lines written through the global subscriber, which this test
/// binary sets once.
fn logs() -> &'static Mutex<Vec<u8>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&logs);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_writer(move || LogWriter(Arc::clone(&writer)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        logs
    })
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("the logs").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_poll_that_holds_its_thread_too_long_is_reported() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let logs = logs();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let state = cosi::state::memory();
    let mut options = RuntimeOptions::default();
    options.long_poll = Duration::from_millis(50);
    options.status_interval = Duration::from_millis(10);
    // The runtime takes its metric handles when a controller is registered.
    let runtime = metrics::with_local_recorder(&recorder, || {
        let runtime = Runtime::with_options(state.clone(), options);
        // Past the watchdog's second, so that it reports the poll while it lasts, too.
        runtime.register(Slow { hold: Duration::from_millis(1_300), done: false }.named("slow")).expect("register");
        runtime.register(Slow { hold: Duration::ZERO, done: false }.named("quick")).expect("register");
        runtime
    });
    block_on(async {
        runtime.start().expect("start");
        runtime.settled().await;
        // Counted when the poll has returned, which may be just after the
        // reconcile's end that `settled` saw.
        let slow = eventually("the long poll counted", || async {
            let slow = runtime.stats("slow").expect("stats");
            match slow.long_polls {
                0 => Err("not yet"),
                _ => Ok(slow),
            }
        })
        .await;
        assert_eq!(slow.long_polls, 1, "{slow:?}");
        assert!(slow.longest_poll >= Duration::from_millis(1_300), "{slow:?}");
        let quick = runtime.stats("quick").expect("stats");
        assert_eq!((quick.long_polls, quick.longest_poll), (0, Duration::ZERO), "{quick:?}");

        let reported = WatchCondition::new().resource(|status: &Typed<ControllerStatus>| status.long_polls == 1);
        let status = Pointer::new("runtime", ControllerStatus::TYPE, "slow");
        let event = tokio::time::timeout(WAIT, state.watch_for::<ControllerStatus>(status, reported))
            .await
            .expect("the status reports the long poll")
            .expect("the watch");
        let status = event.resource().expect("the status");
        assert!(status.longest_poll_ms.is_some_and(|ms| ms >= 1_300), "{status:?}");
        runtime.shutdown().await;
    });

    let logged = String::from_utf8_lossy(&logs.lock().expect("the logs")).into_owned();
    // The other tests of this binary log through the same subscriber.
    let about = |controller: &str| -> Vec<&str> {
        let name = format!("controller={controller} ");
        logged.lines().filter(|line| line.contains("held its thread") && line.contains(&name)).collect()
    };
    let lines = about("slow");
    // The watchdog's, while the poll lasted, then the one after it.
    let [during, after] = lines[..] else { panic!("two log lines for the long poll:\n{logged}") };
    assert!(during.contains("WARN") && during.contains("still does"), "{during}");
    assert!(after.contains("WARN") && !after.contains("still does"), "{after}");
    assert_eq!(about("quick"), Vec::<&str>::new());

    let metrics: Vec<_> = snapshotter.snapshot().into_vec();
    let long_polls = |controller: &str| {
        metrics.iter().find_map(|(key, .., value)| {
            let key = key.key();
            let named = key.name() == "cosi_controller_long_polls_total"
                && key.labels().any(|label| label.key() == "controller" && label.value() == controller);
            named.then_some(value)
        })
    };
    assert!(matches!(long_polls("slow"), Some(DebugValue::Counter(1))), "{metrics:?}");
    assert!(matches!(long_polls("quick"), Some(DebugValue::Counter(0))), "{metrics:?}");
}
