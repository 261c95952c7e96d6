//! The engine behind [`Runtime`](crate::Runtime): what runs the controllers,
//! in parts that each own their lock.
//!
//! - [`Engine`] (here): the lifecycle (register, start, stop, `settled`'s
//!   check) over the two parts below.
//! - [`Registry`] (`registry`): the registered controllers and the resource
//!   types they use.
//! - [`Wiring`] (`wiring`): what running controllers reach through their
//!   [`Host`](crate::controller::Host) ([`ControllerHost`](host::ControllerHost),
//!   `host`): the state, the [`Router`](routing::Router) (`routing`: which
//!   controllers read a kind, and what a change asks of each), the
//!   [`Feeds`](watch::Feeds) (`watch`: one observer or watch task per kind
//!   some controller reads) and the [`Tasks`](tasks::Tasks) (`tasks`: the
//!   tracker, the stop and the [`Pool`](pool::Pool) every controller's loop
//!   runs in). A controller's loop is `reconciler` or `worker`; `publish`
//!   writes definitions and statuses.
//!
//! Nothing below points back up: the registry and the wiring know nothing
//! of the engine, and a controller's host holds the wiring, not the engine.
//!
//! # Lock order
//!
//! Each part owns its locks; where one is taken under another, it is in
//! this order, never the reverse:
//!
//! 1. [`Engine`]'s `run` (the lifecycle): registrations, the start and the
//!    stop are serialized by it.
//! 2. [`Registry`]'s controllers, then its types.
//! 3. A controller's `rerouting` (held across one `update_inputs`).
//! 4. [`Feeds`](watch::Feeds)' map of kinds. [`Wiring::ensure_watch`] opens a kind's
//!    observation under it, and dropping an observation takes the state's
//!    lock of the kind, so the state's locks come after it.
//! 5. The state's locks: a write routes its change under its collection's
//!    lock ([`Observer`](crate::state::Observer)).
//! 6. [`Router`](routing::Router)'s routes, read under the state's locks by every routed
//!    change; nothing holding them may call the state or take the feeds
//!    (`Wiring::stop_unread_watches` takes the feeds first).
//! 7. A controller's own locks (its inputs, its trigger, its queue) and the
//!    pool's queue, taken last by what a change delivers.
//!
//! Every task is spawned on one [`TaskTracker`](tokio_util::task::TaskTracker)
//! and stops on one [`CancellationToken`](tokio_util::sync::CancellationToken),
//! so shutdown cancels them all and waits for each: nothing outlives the
//! runtime. The controllers' loops and queue workers are not tasks of their
//! own but futures of the pool, whose lanes end once they all have.
//! Every wait that shutdown must cut short is the stop token's
//! `run_until_cancelled`, once around each loop. No task ends silently: a
//! panic in one is logged, a kind's watch task opens again after one (its
//! readers resynchronise), and a reconcile's panic restarts it with backoff.

mod host;
mod pool;
mod publish;
mod reconciler;
mod registry;
mod routing;
mod tasks;
mod watch;
mod wiring;
mod worker;

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

use cosi_rules::controller_name;

use crate::controller::{Body, Conflict, Registration, check_declaration, check_declared_inputs, check_runtime_inputs};
use crate::resource::{Kind, ResourceDefinition};
use crate::runtime::registered::RegisteredController;
use crate::runtime::status::RUNTIME_OWNER;
use crate::runtime::{ControllerStats, Graph, RuntimeError, RuntimeOptions};
use crate::state::State;

pub(crate) use routing::reads;

use registry::Registry;
use wiring::Wiring;

// The owner of the statuses is the name the rules keep from controllers.
const _: () = assert!(matches!(controller_name(RUNTIME_OWNER), Err(Conflict::ReservedName { .. })));

pub(crate) struct Engine {
    run: Mutex<Run>,
    registry: Registry,
    wiring: Arc<Wiring>,
}

enum Run {
    Idle { pending: Vec<(Arc<RegisteredController>, Body)> },
    Running,
    Stopped,
}

impl Engine {
    pub(crate) fn new(state: Arc<dyn State>, options: RuntimeOptions) -> Arc<Self> {
        let registry = Registry::new(options.status_namespace.is_some());
        Arc::new(Engine {
            run: Mutex::new(Run::Idle { pending: Vec::new() }),
            registry,
            wiring: Wiring::new(state, options),
        })
    }

    pub(crate) fn state(&self) -> &Arc<dyn State> {
        &self.wiring.state
    }

    pub(crate) fn register(self: &Arc<Self>, registration: Registration) -> Result<(), RuntimeError> {
        let Registration { name, declaration, inputs, body } = registration;
        let invalid = |conflict: Conflict<&str>| RuntimeError::InvalidController(conflict.to_owned());
        check_declaration(declaration).map_err(invalid)?;
        // A registration may rename the controller: its name is checked again.
        controller_name(&name).map_err(invalid)?;
        check_declared_inputs(&name, declaration).map_err(RuntimeError::InvalidController)?;
        let inputs = match inputs {
            Some(inputs) => {
                check_runtime_inputs(&name, declaration, inputs).map_err(RuntimeError::InvalidController)?
            }
            None => declaration.runtime_inputs(),
        };
        let mut run = self.run.lock();
        if matches!(*run, Run::Stopped) {
            return Err(RuntimeError::ShutDown);
        }
        let registered = RegisteredController::new(
            name,
            declaration,
            inputs,
            Arc::clone(&self.wiring.state),
            Arc::clone(&self.wiring.epoch),
        );
        self.registry.add(Arc::clone(&registered))?;
        self.wiring.router.add(&registered, &registered.inputs());
        match &mut *run {
            Run::Idle { pending } => pending.push((registered, body)),
            Run::Running => {
                drop(run);
                self.publish_definitions();
                self.wiring.start_controller(registered, body);
            }
            Run::Stopped => return Err(RuntimeError::ShutDown),
        }
        Ok(())
    }

    /// Adds resource types the program uses beyond its controllers' (see `ResourceTypes`).
    pub(crate) fn register_types(self: &Arc<Self>, definitions: Vec<ResourceDefinition>) -> Result<(), RuntimeError> {
        let run = self.run.lock();
        if matches!(*run, Run::Stopped) {
            return Err(RuntimeError::ShutDown);
        }
        self.registry.add_types(definitions)?;
        if matches!(*run, Run::Running) {
            drop(run);
            self.publish_definitions();
        }
        Ok(())
    }

    pub(crate) fn start(self: &Arc<Self>) -> Result<(), RuntimeError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| RuntimeError::NoTokioRuntime)?;
        let pending = {
            let mut run = self.run.lock();
            match std::mem::replace(&mut *run, Run::Running) {
                Run::Idle { pending } => pending,
                Run::Running => return Err(RuntimeError::AlreadyStarted),
                Run::Stopped => {
                    *run = Run::Stopped;
                    return Err(RuntimeError::ShutDown);
                }
            }
        };
        self.wiring.tasks.start(handle);
        self.publish_definitions();
        for kind in self.wiring.router.kinds() {
            self.wiring.ensure_watch(&kind);
        }
        for (registered, body) in pending {
            self.wiring.start_controller(registered, body);
        }
        if let Some(namespace) = self.wiring.options.status_namespace.clone() {
            let engine = Arc::clone(self);
            self.wiring.tasks.spawn(async move { engine.publish_statuses(namespace).await });
        }
        Ok(())
    }

    /// Stops every task without waiting: what dropping the runtime does.
    pub(crate) fn stop(&self) {
        *self.run.lock() = Run::Stopped;
        self.wiring.tasks.stop();
        self.wiring.stop_watches();
    }

    /// Stops every task and waits until all have ended.
    pub(crate) async fn shutdown(&self) {
        self.stop();
        self.wiring.tasks.wait().await;
    }

    pub(crate) fn is_running(&self) -> bool {
        matches!(*self.run.lock(), Run::Running)
    }

    /// Waits until nothing is pending (see `settle.rs`), or the runtime stops.
    pub(crate) async fn settled(&self) {
        if !self.is_running() {
            return;
        }
        self.wiring.epoch.settle(|| self.quiet(), self.wiring.tasks.stopped()).await;
    }

    fn quiet(&self) -> bool {
        if self.wiring.epoch.in_flight() {
            return false;
        }
        let now = Instant::now();
        self.registry.all_quiet(now) && self.wiring.feeds.caught_up()
    }

    pub(crate) fn graph(&self) -> Graph {
        self.registry.graph()
    }

    pub(crate) fn controller_names(&self) -> Vec<String> {
        self.registry.names()
    }

    pub(crate) fn stats(&self, name: &str) -> Option<ControllerStats> {
        self.registry.stats(name)
    }

    /// The kinds whose watch task is alive.
    pub(crate) fn watched_kinds(&self) -> Vec<Kind> {
        self.wiring.feeds.fed_kinds()
    }
}

/// A panic's message, when it has one.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => (*message).to_owned(),
        (None, Some(message)) => message.clone(),
        (None, None) => "a panic with a non-string payload".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use crate::controller::{
        Conflict, Controller, Declaration, Declared, InputDecl, InputKind, NameRule, Outcome, Register, Registration,
        Requeue,
    };
    use crate::resource::{Kind, Resource};
    use crate::{Ctx, Runtime, RuntimeError};

    #[derive(crate::Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[resource(type = "Specs.engine-test.cosi.dev", namespace = "default")]
    struct Spec {}

    #[crate::controller(inputs = [Weak<Spec>], inventory = false)]
    async fn reader(_ctx: &mut Ctx) {}

    /// The rule the runtime says `registration` breaks when it refuses it.
    fn refusal(registration: Registration) -> Conflict<String> {
        match Runtime::new(crate::state::memory()).register(registration) {
            Err(RuntimeError::InvalidController(conflict)) => conflict,
            other => panic!("expected an invalid controller, got {other:?}"),
        }
    }

    #[test]
    fn a_registration_refuses_a_name_a_state_would_not_take() {
        let whitespace = |name| Conflict::InvalidName { name, reason: NameRule::Whitespace }.to_owned();
        assert_eq!(refusal(reader {}.named(" a")), whitespace(" a"));
        assert_eq!(refusal(reader {}.named("a\tb")), whitespace("a\tb"));
        let long = "a".repeat(1025);
        let too_long = Conflict::InvalidName { name: long.as_str(), reason: NameRule::TooLong };
        assert_eq!(refusal(reader {}.named(long.as_str())), too_long.to_owned());
        assert_eq!(refusal(reader {}.named("runtime")), Conflict::ReservedName { name: "runtime" }.to_owned());
        assert_eq!(refusal(reader {}.named("")), Conflict::<String>::EmptyName);
        Runtime::new(crate::state::memory()).register(reader {}.named("a")).expect("a valid name");
    }

    /// A declaration written by hand, with an input `#[controller]` would refuse.
    struct Hand<const N: usize>;

    const HAND: [Declaration; 3] = [
        Declaration {
            name: "hand",
            inputs: &[InputDecl::of::<Spec>(InputKind::Weak).in_namespace("a b")],
            outputs: &[],
            concurrency: None,
        },
        Declaration {
            name: "hand",
            inputs: &[InputDecl::of::<Spec>(InputKind::Weak).with_id(" x")],
            outputs: &[],
            concurrency: None,
        },
        Declaration {
            name: "hand",
            inputs: &[InputDecl::of::<Spec>(InputKind::Weak).in_namespace("other").with_id("x y")],
            outputs: &[],
            concurrency: None,
        },
    ];

    impl<const N: usize> Declared for Hand<N> {
        const DECLARATION: Declaration = HAND[N];
    }

    impl<const N: usize> Controller for Hand<N> {
        async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> Outcome {
            Outcome::Done(Requeue::default())
        }
    }

    #[test]
    fn a_registration_refuses_declared_inputs_a_state_would_not_take() {
        let invalid = |reason: String| Conflict::InvalidInput { controller: "hand".to_owned(), reason };
        let namespace = Kind::new("a b", Spec::TYPE).validate().expect_err("a namespace with a space");
        assert_eq!(refusal(Registration::controller(Hand::<0>)), invalid(namespace));
        let id = Spec::pointer(" x").validate().expect_err("an ID that starts with a space");
        assert_eq!(refusal(Registration::controller(Hand::<1>)), invalid(id));
        // An ID may have inner spaces.
        Runtime::new(crate::state::memory()).register(Registration::controller(Hand::<2>)).expect("valid inputs");
    }
}
