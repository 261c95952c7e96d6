//! Controllers run independently: one that holds its thread (computing, or
//! blocking where it should not) stalls no other, and controllers with work
//! use every worker thread.
//!
//! Nothing here is a timing: each test waits for an order of events (a
//! controller reconciles while another still spins) that the old design,
//! every controller in one task, could never produce; the waits are
//! generous bounds that only a broken runtime reaches.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi::state::WatchCondition;

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
    for ping in ctx.list::<Ping>().await? {
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
    for call in ctx.list::<Call>().await? {
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
