//! The engine behind [`Runtime`](crate::Runtime): the registry of
//! controllers and the lifecycle of every task. Each job has a file:
//!
//! - `routing`: which controllers read a kind, and what a change asks of each
//!   (a wake-up or a queue item), decided in one place for live changes and
//!   for resynchronisations alike;
//! - `watch`: one watch task per kind some controller reads, resumed from its
//!   bookmark, started over when it falls behind, stopped when nobody reads
//!   the kind;
//! - `pool`: the lanes (tasks) every controller's loop runs in;
//! - `reconciler`: a reconcile controller's loop;
//! - `worker`: a queue controller's workers;
//! - `publish`: resource definitions and controller statuses written to the state.
//!
//! Every task is spawned on one [`TaskTracker`] and stops on one
//! [`CancellationToken`], so shutdown cancels them all and waits for each:
//! nothing outlives the runtime. The controllers' loops and queue workers
//! are not tasks of their own but futures of the pool, whose lanes end once
//! they all have.

mod pool;
mod publish;
mod reconciler;
mod routing;
mod watch;
mod worker;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use parking_lot::{Mutex, RwLock};
// Looked up for every event (kinds) and every queue item (keys); see `queue.rs`.
use rustc_hash::FxHashMap as HashMap;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use cosi_rules::controller_name;

use crate::controller::{
    Body, Conflict, Entry, Host, Registration, check_declaration, check_declared_inputs, check_pair,
    check_runtime_inputs,
};
use crate::resource::{Kind, ResourceDefinition};
use crate::runtime::core::Core;
use crate::runtime::settle::Activity;
use crate::runtime::status::RUNTIME_OWNER;
use crate::runtime::types::Types;
use crate::runtime::{ControllerStats, Graph, GraphController, RuntimeError, RuntimeOptions};
use crate::state::State;

pub(crate) use routing::reads;

use pool::Pool;
use routing::Routes;
use watch::KindWatch;

// The owner of the statuses is the name the rules keep from controllers.
const _: () = assert!(matches!(controller_name(RUNTIME_OWNER), Err(Conflict::ReservedName { .. })));

pub(crate) struct Engine {
    state: Arc<dyn State>,
    options: RuntimeOptions,
    controllers: RwLock<Vec<Arc<Core>>>,
    routes: Arc<Routes>,
    /// The kinds watched: those some route reads.
    watches: Mutex<HashMap<Kind, Arc<KindWatch>>>,
    /// The watch tasks alive per kind: one while the kind is watched, and
    /// the tasks of stopped watches until they have ended.
    watch_tasks: Mutex<HashMap<Kind, usize>>,
    run: Mutex<Run>,
    /// The epoch of pending work, for `settled`.
    activity: Arc<Activity>,
    /// The resource types the controllers use, and those registered by hand.
    types: Mutex<Types>,
    /// The tokio runtime `start` ran on: every task goes there, so a
    /// controller registered later from any thread starts on it too.
    handle: Mutex<Option<tokio::runtime::Handle>>,
    cancel: CancellationToken,
    tasks: TaskTracker,
    /// Runs the controllers' loops, inside the lanes, tasks of the tracker.
    pool: Pool,
}

enum Run {
    Idle { pending: Vec<(Arc<Core>, Body)> },
    Running,
    Stopped,
}

impl Engine {
    pub(crate) fn new(state: Arc<dyn State>, options: RuntimeOptions) -> Arc<Self> {
        let types = Types::with_builtins(options.status_namespace.is_some());
        Arc::new(Engine {
            state,
            pool: Pool::new(options.long_poll),
            options,
            controllers: RwLock::default(),
            routes: Arc::default(),
            watches: Mutex::default(),
            watch_tasks: Mutex::default(),
            run: Mutex::new(Run::Idle { pending: Vec::new() }),
            activity: Arc::default(),
            types: Mutex::new(types),
            handle: Mutex::new(None),
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    pub(crate) fn state(&self) -> &Arc<dyn State> {
        &self.state
    }

    pub(crate) fn register(self: &Arc<Self>, registration: Registration) -> Result<(), RuntimeError> {
        let Registration { name, declaration, inputs, body } = registration;
        let invalid = |conflict: Conflict<'_>| RuntimeError::InvalidController(conflict.to_string());
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
        let core = {
            let mut controllers = self.controllers.write();
            let new = Entry { name: &name, outputs: declaration.outputs };
            for existing in controllers.iter() {
                let old = Entry { name: &existing.name, outputs: existing.declaration.outputs };
                check_pair(old, new).map_err(|conflict| RuntimeError::Conflict(conflict.to_string()))?;
            }
            // The last check: once the types are in, the controller is too.
            self.types.lock().add(declaration.definitions())?;
            let core = Core::new(
                name,
                declaration,
                inputs,
                Arc::clone(&self.state),
                Arc::clone(&self.activity),
                Arc::downgrade(self),
            );
            controllers.push(Arc::clone(&core));
            core
        };
        self.add_routes(&core, &core.inputs());
        match &mut *run {
            Run::Idle { pending } => pending.push((core, body)),
            Run::Running => {
                drop(run);
                self.publish_definitions();
                self.spawn_controller(core, body);
            }
            Run::Stopped => return Err(RuntimeError::ShutDown),
        }
        Ok(())
    }

    /// Adds resource types the program uses beyond its controllers' (see `Types`).
    pub(crate) fn register_types(self: &Arc<Self>, definitions: Vec<ResourceDefinition>) -> Result<(), RuntimeError> {
        let run = self.run.lock();
        if matches!(*run, Run::Stopped) {
            return Err(RuntimeError::ShutDown);
        }
        self.types.lock().add(definitions)?;
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
        let lanes = handle.metrics().num_workers();
        *self.handle.lock() = Some(handle);
        for lane in self.pool.start(lanes, &self.cancel) {
            self.spawn(lane);
        }
        self.publish_definitions();
        let kinds: Vec<Kind> = self.routes.read().keys().cloned().collect();
        for kind in kinds {
            self.ensure_watch(&kind);
        }
        for (core, body) in pending {
            self.spawn_controller(core, body);
        }
        if let Some(namespace) = self.options.status_namespace.clone() {
            let engine = Arc::clone(self);
            self.spawn(async move { engine.publish_statuses(namespace).await });
        }
        Ok(())
    }

    /// Spawns `task` on the tracker; a panic in it is logged, never silent
    /// (the watch and controller tasks also handle theirs, see `ensure_watch`
    /// and `spawn_controller`).
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let task = async move {
            if let Err(panic) = AssertUnwindSafe(task).catch_unwind().await {
                tracing::error!(panic = %panic_message(&*panic), "a runtime task panicked");
            }
        };
        match &*self.handle.lock() {
            Some(handle) => drop(self.tasks.spawn_on(task, handle)),
            None => drop(self.tasks.spawn(task)),
        }
    }

    /// Runs `future` (`core`'s loop, or a queue worker) in the pool.
    fn drive(&self, core: &Arc<Core>, future: impl std::future::Future<Output = ()> + Send + 'static) {
        self.pool.add(Arc::clone(core), future);
    }

    /// Starts a registered controller's loop once the kinds it reads are watched.
    fn spawn_controller(self: &Arc<Self>, core: Arc<Core>, body: Body) {
        let starting = self.activity.begin();
        let ready: Vec<_> = core.inputs().iter().map(|input| self.ensure_watch(&input.kind)).collect();
        let engine = Arc::clone(self);
        let reported = Arc::clone(&core);
        let owner = Arc::clone(&core);
        let host = Arc::clone(&core) as Arc<dyn Host>;
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = match body {
            Body::Reconcile(build) => {
                let controller = build(host);
                Box::pin(async move { engine.run_reconciler(core, controller, ready, starting).await })
            }
            Body::Queue(build) => {
                let controller = build(host);
                Box::pin(async move { engine.run_queue(core, controller, ready, starting).await })
            }
        };
        // Reconciles catch their own panics and restart; a panic in the loop
        // around them ends the controller, which its status then reports.
        self.drive(&owner, async move {
            if let Err(panic) = AssertUnwindSafe(run).catch_unwind().await {
                let message = format!("the controller's task panicked and stopped: {}", panic_message(&*panic));
                tracing::error!(controller = %reported.name, error = %message, "controller stopped");
                reported.stats.record_failure(Duration::ZERO, message, None);
            }
        });
    }

    /// Stops every task without waiting: what dropping the runtime does.
    pub(crate) fn stop(&self) {
        *self.run.lock() = Run::Stopped;
        self.cancel.cancel();
        self.stop_watches();
        self.tasks.close();
    }

    /// Stops every task and waits until all have ended.
    pub(crate) async fn shutdown(&self) {
        self.stop();
        self.tasks.wait().await;
    }

    pub(crate) fn is_running(&self) -> bool {
        matches!(*self.run.lock(), Run::Running)
    }

    /// Waits until nothing is pending (see `settle.rs`), or the runtime stops.
    pub(crate) async fn settled(&self) {
        if !self.is_running() {
            return;
        }
        self.activity.settle(|| self.quiet(), self.cancel.cancelled()).await;
    }

    fn quiet(&self) -> bool {
        if self.activity.in_flight() {
            return false;
        }
        let now = Instant::now();
        if !self.controllers.read().iter().all(|core| core.is_quiet(now)) {
            return false;
        }
        // A stopped watch whose task has not ended yet is still pending.
        let watches = self.watches.lock();
        watches.values().all(|watch| watch.caught_up())
            && self.watch_tasks.lock().values().sum::<usize>() == watches.len()
    }

    pub(crate) fn graph(&self) -> Graph {
        let controllers = self.controllers.read();
        let mut graph = Graph {
            controllers: controllers
                .iter()
                .map(|core| GraphController::new(&core.name, core.declaration, &core.inputs()))
                .collect(),
        };
        graph.controllers.sort_by(|a, b| a.name.cmp(&b.name));
        graph
    }

    pub(crate) fn controller_names(&self) -> Vec<String> {
        self.controllers.read().iter().map(|core| core.name.to_string()).collect()
    }

    pub(crate) fn stats(&self, name: &str) -> Option<ControllerStats> {
        let controllers = self.controllers.read();
        let core = controllers.iter().find(|core| &*core.name == name)?;
        Some(core.stats.snapshot(core.queue.as_ref()))
    }

    /// The kinds whose watch task is alive.
    pub(crate) fn watched_kinds(&self) -> Vec<Kind> {
        let mut kinds: Vec<Kind> = self.watch_tasks.lock().keys().cloned().collect();
        kinds.sort();
        kinds
    }

    /// Sleeps for `delay`; `false` when the runtime stopped first.
    async fn pause(&self, delay: Duration) -> bool {
        self.cancel.run_until_cancelled(tokio::time::sleep(delay)).await.is_some()
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

    /// What the runtime says when it refuses `registration`.
    fn refusal(registration: Registration) -> String {
        match Runtime::new(crate::state::memory()).register(registration) {
            Err(RuntimeError::InvalidController(message)) => message,
            other => panic!("expected an invalid controller, got {other:?}"),
        }
    }

    #[test]
    fn a_registration_refuses_a_name_a_state_would_not_take() {
        let whitespace = |name| Conflict::InvalidName { name, reason: NameRule::Whitespace }.to_string();
        assert_eq!(refusal(reader {}.named(" a")), whitespace(" a"));
        assert_eq!(refusal(reader {}.named("a\tb")), whitespace("a\tb"));
        let long = "a".repeat(1025);
        let too_long = Conflict::InvalidName { name: &long, reason: NameRule::TooLong };
        assert_eq!(refusal(reader {}.named(long.as_str())), too_long.to_string());
        assert_eq!(refusal(reader {}.named("runtime")), Conflict::ReservedName { name: "runtime" }.to_string());
        assert_eq!(refusal(reader {}.named("")), Conflict::EmptyName.to_string());
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
        let invalid = |reason: String| Conflict::InvalidInput { controller: "hand", reason: &reason }.to_string();
        let namespace = Kind::new("a b", Spec::TYPE).validate().expect_err("a namespace with a space");
        assert_eq!(refusal(Registration::controller(Hand::<0>)), invalid(namespace));
        let id = Spec::pointer(" x").validate().expect_err("an ID that starts with a space");
        assert_eq!(refusal(Registration::controller(Hand::<1>)), invalid(id));
        // An ID may have inner spaces.
        Runtime::new(crate::state::memory()).register(Registration::controller(Hand::<2>)).expect("valid inputs");
    }
}
