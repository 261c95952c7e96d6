//! One error type for a whole program: `cosi::Result` carries the state's
//! failures as they are and the runtime's refusals beside them, so `main` and
//! every helper can use `?` on both.

use cosi::prelude::*;
use cosi::runtime::Conflict;
use cosi::{Error, RuntimeError};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Pings.errors-test.cosi.dev", namespace = "default")]
pub struct Ping {
    pub count: u64,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Pongs.errors-test.cosi.dev", namespace = "default")]
pub struct Pong {
    pub count: u64,
}

#[controller(inputs = [Weak<Ping>], outputs = [Exclusive<Pong>], inventory = false)]
async fn pong(ctx: &mut Ctx) -> cosi::Result<()> {
    for ping in ctx.list::<Ping>(&ListOptions::default()).await? {
        ctx.modify::<Pong>(ping.id(), |pong| pong.count = ping.count).await?;
    }
    Ok(())
}

/// A second exclusive writer of `Pong`, which the runtime refuses.
#[controller(inputs = [Weak<Ping>], outputs = [Exclusive<Pong>], inventory = false)]
async fn rival(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<Ping>(&ListOptions::default()).await.map(drop)
}

/// What a program's `main` does, with `?` on the runtime's errors and the state's.
async fn program(state: std::sync::Arc<dyn State>, register_rival: bool) -> cosi::Result<u64> {
    let runtime = Runtime::new(state.clone());
    runtime.register(pong {})?;
    if register_rival {
        runtime.register(rival {})?;
    }
    runtime.start()?;
    state.create(Typed::new("one", Ping { count: 1 }), CreateOptions::default()).await?;
    let pong = state.watch_for::<Pong>("one", WatchCondition::new()).await?;
    runtime.shutdown().await;
    Ok(pong.resource().map_or(0, |pong| pong.count))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_mark_works_on_runtime_and_state_errors_alike() {
    let state = cosi::state::memory();
    assert_eq!(program(state.clone(), false).await.expect("a program that works"), 1);

    // A runtime error comes back as it was raised.
    let error = program(cosi::state::memory(), true).await.expect_err("two exclusive writers");
    match error.downcast_ref::<RuntimeError>() {
        Some(RuntimeError::Conflict(Conflict::OutputConflict { first, second, exclusive, r#type })) => {
            assert_eq!((first.as_str(), second.as_str(), r#type.as_str()), ("pong", "rival", Pong::TYPE));
            assert_eq!(exclusive, "pong");
        }
        other => panic!("expected the runtime's conflict, got {other:?} from {error:?}"),
    }
    assert!(matches!(error, Error::Other(_)));
    assert!(!error.is_conflict() && !error.is_not_found(), "a runtime error passed for a state failure");

    // A state error is the state's own variant: matching and predicates are unchanged.
    let error = program(state, false).await.expect_err("`one` exists already");
    assert!(error.is_conflict(), "{error:?}");
    assert!(matches!(&error, Error::AlreadyExists(pointer) if pointer.id() == "one"), "{error:?}");
    assert!(error.downcast_ref::<RuntimeError>().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_until_is_the_last_expression_of_main_and_accepts_a_started_runtime() {
    async fn main_like(runtime: &Runtime, stop: tokio::sync::oneshot::Receiver<()>) -> cosi::Result<()> {
        runtime.run_until(stop).await
    }

    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(pong {}).expect("register");
    runtime.start().expect("start");
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let handle = runtime.handle();
    let running = tokio::spawn(async move {
        let ran = main_like(&runtime, stopped).await;
        (runtime, ran)
    });
    assert!(handle.is_running());
    stop.send(()).expect("the runtime waits for the signal");
    let (runtime, ran) = running.await.expect("the task");
    ran.expect("run_until on a started runtime");
    assert!(!runtime.is_running());

    // A runtime that was shut down cannot run again, and says so.
    let error = runtime.run_until(async {}).await.expect_err("shut down");
    assert_eq!(error.downcast_ref::<RuntimeError>(), Some(&RuntimeError::ShutDown));
    assert_eq!(error.to_string(), RuntimeError::ShutDown.to_string());
}

#[test]
fn other_errors_carry_any_error_without_passing_for_a_state_failure() {
    let error = Error::other(std::io::Error::new(std::io::ErrorKind::NotFound, "no sandbox"));
    assert_eq!(error.to_string(), "no sandbox");
    assert!(!error.is_not_found() && !error.is_conflict() && !error.is_invalid_argument());
    assert_eq!(error.downcast_ref::<std::io::Error>().map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
    assert!(error.pointer().is_none());
    let cloned = error.clone();
    assert_eq!(cloned.to_string(), error.to_string());
}
