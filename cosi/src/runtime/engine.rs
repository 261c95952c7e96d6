//! The engine behind [`Runtime`](crate::Runtime): the registry of
//! controllers, the routes from resource kinds to the controllers that read
//! them, one watch task per kind, and one task per controller (a pool of
//! workers per queue controller).
//!
//! Every task is spawned on one [`TaskTracker`] and stops on one
//! [`CancellationToken`], so shutdown cancels them all and waits for each:
//! nothing outlives the runtime.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use parking_lot::{Mutex, RwLock};
// Looked up for every event (kinds) and every queue item (keys); see `queue.rs`.
use rustc_hash::FxHashMap as HashMap;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::controller::{
    Entry, Input, InputKind, Outcome, ReducedMetadata, Requeue, RequeueError, check_declaration, check_pair,
    check_runtime_inputs,
};
use crate::resource::ResourceDefinition;
use crate::resource::{DynamicResource, Kind, Phase};
use crate::runtime::core::Trigger;
use crate::runtime::queue::{Item, Job, Key};
use crate::runtime::settle::{Activity, InFlight};
use crate::runtime::status::{ControllerStatus, RUNTIME_OWNER};
use crate::runtime::types::Types;
use crate::runtime::{
    Body, ControllerStats, Core, ErasedQueue, ErasedReconcile, Graph, GraphController, Registration, RuntimeError,
    RuntimeOptions,
};
use crate::state::{
    Error, Event, ListOptions, META_DESCRIPTION, META_NAMESPACE, Registry, State, StateExt, UpdateOptions,
    WatchKindOptions, WatchProgress,
};

pub(crate) struct Engine {
    state: Arc<dyn State>,
    options: RuntimeOptions,
    controllers: RwLock<Vec<Arc<Core>>>,
    routes: RwLock<HashMap<Kind, Vec<Route>>>,
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
}

struct Route {
    core: Arc<Core>,
    input: Input,
}

/// One kind's runtime watch.
struct KindWatch {
    /// Stops this watch's task: cancelled when no route reads the kind any
    /// more, and with the engine's token at shutdown.
    cancel: CancellationToken,
    /// Whether the watch has been established: controllers reading the kind
    /// start once it is. It stays true while the watch resumes.
    ready: watch::Receiver<bool>,
    /// Whether the watch runs now and has made up for anything it missed.
    established: AtomicBool,
    /// How far the current watch has read, when its state can tell.
    progress: Mutex<Option<Arc<dyn WatchProgress>>>,
    /// How far the current watch had read when it finished routing its last batch.
    routed: AtomicU64,
}

impl KindWatch {
    /// Whether every event the state wrote so far has been routed (exact
    /// when the state reports the watch's progress; otherwise, whether the
    /// watch runs and routed what it received).
    fn caught_up(&self) -> bool {
        if !self.established.load(Ordering::SeqCst) {
            return false;
        }
        match &*self.progress.lock() {
            Some(progress) => self.routed.load(Ordering::SeqCst) >= progress.written(),
            None => true,
        }
    }
}

/// Counts a kind's watch task as alive until the task ends, however it ends.
struct WatchTask {
    engine: Arc<Engine>,
    kind: Kind,
}

impl Drop for WatchTask {
    fn drop(&mut self) {
        {
            let mut tasks = self.engine.watch_tasks.lock();
            if let Some(count) = tasks.get_mut(&self.kind) {
                *count -= 1;
                if *count == 0 {
                    tasks.remove(&self.kind);
                }
            }
        }
        self.engine.activity.bump();
    }
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
            options,
            controllers: RwLock::default(),
            routes: RwLock::default(),
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
        check_declaration(declaration).map_err(|conflict| RuntimeError::InvalidController(conflict.to_string()))?;
        if name.is_empty() || &*name == RUNTIME_OWNER {
            return Err(RuntimeError::InvalidController(format!(
                "the name `{name}` is reserved for the runtime itself"
            )));
        }
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
            let core = Arc::new(Core::new(
                name,
                declaration,
                inputs,
                Arc::clone(&self.state),
                Arc::clone(&self.activity),
                Arc::downgrade(self),
            ));
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

    /// Publishes the definitions not yet published, in the background; the
    /// work counts for `settled`.
    fn publish_definitions(self: &Arc<Self>) {
        let in_flight = self.activity.begin();
        let engine = Arc::clone(self);
        self.spawn(async move {
            let _in_flight = in_flight;
            engine.publish().await;
        });
    }

    /// Writes the `meta` namespace and each unpublished definition, retrying
    /// while the state is unreachable; a definition the state refuses is
    /// logged and left out.
    async fn publish(&self) {
        let definitions = self.types.lock().take_unpublished();
        if definitions.is_empty() {
            return;
        }
        let registry = Registry::new(&*self.state);
        let mut backoff = Backoff::new(self.options.backoff);
        let mut definitions = definitions.into_iter().map(Some).collect::<Vec<_>>();
        definitions.insert(0, None);
        for definition in definitions {
            loop {
                let written = match &definition {
                    None => registry.register_namespace(META_NAMESPACE, META_DESCRIPTION).await,
                    Some(definition) => registry.register_definition(definition.clone()).await,
                };
                let error = match written {
                    Ok(()) => break,
                    Err(error) => error,
                };
                let what = definition.as_ref().map_or(META_NAMESPACE, |definition| definition.r#type.as_str());
                if !matches!(error, Error::Backend(_)) {
                    tracing::warn!(%error, what, "runtime could not publish a resource definition");
                    break;
                }
                tracing::warn!(%error, what, "runtime could not publish a resource definition; retrying");
                tokio::select! {
                    () = self.cancel.cancelled() => return,
                    () = tokio::time::sleep(backoff.next_delay()) => (),
                }
            }
        }
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
        *self.handle.lock() = Some(handle);
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

    pub(crate) async fn shutdown(&self) {
        *self.run.lock() = Run::Stopped;
        self.cancel.cancel();
        self.tasks.close();
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

    fn add_routes(&self, core: &Arc<Core>, inputs: &[Input]) {
        let mut routes = self.routes.write();
        for input in inputs {
            routes.entry(input.kind.clone()).or_default().push(Route { core: Arc::clone(core), input: input.clone() });
        }
    }

    /// Moves `core`'s routes to `inputs` (COSI's `UpdateInputs`); watches
    /// kinds new to the runtime, and wakes the controller once they are
    /// watched, so it sees what they hold already.
    pub(crate) fn reroute(self: &Arc<Self>, core: &Arc<Core>, inputs: &[Input]) {
        {
            let mut routes = self.routes.write();
            for list in routes.values_mut() {
                list.retain(|route| !Arc::ptr_eq(&route.core, core));
            }
            routes.retain(|_, list| !list.is_empty());
        }
        self.add_routes(core, inputs);
        self.stop_unread_watches();
        if let Some(queue) = &core.queue {
            // Items of kinds it no longer reads would fail their access checks forever.
            queue.retain(|key| reads(inputs, key));
            self.activity.bump();
        }
        if !matches!(*self.run.lock(), Run::Running) {
            return;
        }
        let in_flight = self.activity.begin();
        let ready: Vec<watch::Receiver<bool>> = inputs.iter().map(|input| self.ensure_watch(&input.kind)).collect();
        let engine = Arc::clone(self);
        let core = Arc::clone(core);
        let kinds: Vec<Kind> = inputs.iter().map(|input| input.kind.clone()).collect();
        self.spawn(async move {
            let _in_flight = in_flight;
            tokio::select! {
                () = engine.cancel.cancelled() => (),
                () = wait_ready(ready) => match core.queue {
                    Some(_) => {
                        for kind in kinds {
                            engine.resync(&kind, Some(&core)).await;
                        }
                    }
                    None => {
                        core.wake(|| Trigger::Resync);
                    }
                },
            }
        });
    }

    /// Queues every resource of `core`'s primary inputs again (a queue
    /// controller's [`Waker::wake`](crate::controller::Waker::wake)).
    pub(crate) fn requeue_primaries(self: &Arc<Self>, core: &Arc<Core>) {
        let in_flight = self.activity.begin();
        let mut kinds: Vec<Kind> = core
            .inputs()
            .iter()
            .filter(|input| input.dependency == InputKind::Primary)
            .map(|input| input.kind.clone())
            .collect();
        kinds.sort();
        kinds.dedup();
        let engine = Arc::clone(self);
        let core = Arc::clone(core);
        self.spawn(async move {
            let _in_flight = in_flight;
            for kind in kinds {
                engine.resync(&kind, Some(&core)).await;
            }
        });
    }

    /// Stops the watches of kinds no route reads any more. A route added
    /// meanwhile is in `routes` before its `ensure_watch`, and this holds
    /// `routes` while it looks: its watch is either kept or started again.
    fn stop_unread_watches(&self) {
        let routes = self.routes.read();
        let mut watches = self.watches.lock();
        let before = watches.len();
        watches.retain(|kind, watch| {
            let read = routes.contains_key(kind);
            if !read {
                tracing::debug!(%kind, "no controller reads the kind any more; stopping its watch");
                watch.cancel.cancel();
            }
            read
        });
        if watches.len() != before {
            self.activity.bump();
        }
    }

    /// Starts the watch of `kind` unless it runs; returns whether it is established.
    fn ensure_watch(self: &Arc<Self>, kind: &Kind) -> watch::Receiver<bool> {
        let mut watches = self.watches.lock();
        if let Some(watch) = watches.get(kind) {
            return watch.ready.clone();
        }
        let (sender, receiver) = watch::channel(false);
        let state = Arc::new(KindWatch {
            cancel: self.cancel.child_token(),
            ready: receiver.clone(),
            established: AtomicBool::new(false),
            progress: Mutex::new(None),
            routed: AtomicU64::new(0),
        });
        watches.insert(kind.clone(), Arc::clone(&state));
        *self.watch_tasks.lock().entry(kind.clone()).or_default() += 1;
        let alive = WatchTask { engine: Arc::clone(self), kind: kind.clone() };
        let engine = Arc::clone(self);
        let kind = kind.clone();
        self.spawn(async move {
            let _alive = alive;
            // A panic (in the state's watch, say) restarts the watch from
            // scratch after a backoff, and its readers look at everything again.
            let mut backoff = Backoff::new(engine.options.backoff);
            let mut resync = false;
            loop {
                let run =
                    AssertUnwindSafe(Arc::clone(&engine).watch_kind(kind.clone(), &sender, &state, resync));
                let Err(panic) = run.catch_unwind().await else { return };
                // Until it runs again, the watch is not caught up: `settled` waits.
                state.established.store(false, Ordering::SeqCst);
                engine.activity.bump();
                let delay = backoff.next_delay();
                tracing::error!(%kind, panic = %panic_message(&*panic), ?delay, "runtime watch panicked; restarting it");
                resync = true;
                tokio::select! {
                    () = state.cancel.cancelled() => return,
                    () = tokio::time::sleep(delay) => (),
                }
            }
        });
        receiver
    }

    fn spawn_controller(self: &Arc<Self>, core: Arc<Core>, body: Body) {
        let starting = self.activity.begin();
        let ready: Vec<watch::Receiver<bool>> =
            core.inputs().iter().map(|input| self.ensure_watch(&input.kind)).collect();
        let engine = Arc::clone(self);
        let reported = Arc::clone(&core);
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = match body {
            Body::Reconcile(build) => {
                let controller = build(Arc::clone(&core));
                Box::pin(async move { engine.run_reconciler(core, controller, ready, starting).await })
            }
            Body::Queue(build) => {
                let controller = build(Arc::clone(&core));
                Box::pin(async move { engine.run_queue(core, controller, ready, starting).await })
            }
        };
        // Reconciles catch their own panics and restart; a panic in the loop
        // around them ends the controller, which its status then reports.
        self.spawn(async move {
            if let Err(panic) = AssertUnwindSafe(run).catch_unwind().await {
                let message = format!("the controller's task panicked and stopped: {}", panic_message(&*panic));
                tracing::error!(controller = %reported.name, error = %message, "controller stopped");
                reported.stats.record_failure(Duration::ZERO, message, None);
            }
        });
    }

    /// One kind's watch: routes every change, resumes from the last bookmark
    /// when the watch ends, and starts over (waking every reader of the kind)
    /// when the history no longer holds what it missed.
    async fn watch_kind(self: Arc<Self>, kind: Kind, ready: &watch::Sender<bool>, state: &KindWatch, resync: bool) {
        let mut backoff = Backoff::new(self.options.backoff);
        let mut bookmark = None;
        let mut resync = resync;
        loop {
            let options = match bookmark.clone() {
                Some(bookmark) => WatchKindOptions::from_bookmark(bookmark),
                None => WatchKindOptions::default().with_bootstrap_bookmark(),
            };
            let watch = tokio::select! {
                () = state.cancel.cancelled() => return,
                watch = self.state.watch_kind_dynamic(&kind, options) => watch,
            };
            let mut watch = match watch {
                Ok(watch) => watch,
                Err(error) => {
                    tracing::warn!(%kind, %error, "runtime watch failed; retrying");
                    if bookmark.take().is_some() {
                        resync = true;
                        continue;
                    }
                    let delay = backoff.next_delay();
                    tokio::select! {
                        () = state.cancel.cancelled() => return,
                        () = tokio::time::sleep(delay) => continue,
                    }
                }
            };
            backoff.reset();
            let progress = watch.progress();
            state.routed.store(progress.as_ref().map_or(0, |progress| progress.read()), Ordering::SeqCst);
            state.progress.lock().clone_from(&progress);
            ready.send_replace(true);
            if std::mem::take(&mut resync) {
                self.resync(&kind, None).await;
            }
            state.established.store(true, Ordering::SeqCst);
            self.activity.bump();
            'events: loop {
                let batch = tokio::select! {
                    () = state.cancel.cancelled() => return,
                    batch = watch.recv_batch() => batch,
                };
                let Some(batch) = batch else { break };
                for event in &batch {
                    if let Event::Errored { error } = event {
                        tracing::warn!(%kind, %error, "runtime watch fell behind; starting over");
                        bookmark = None;
                        resync = true;
                        break 'events;
                    }
                    if let Some(mark) = event.bookmark() {
                        bookmark = Some(mark.clone());
                    }
                    if let Some(resource) = event.resource() {
                        self.route(&kind, resource);
                    }
                }
                // Everything read so far is routed: the wake-ups and queue
                // items it made are in place before `settled` can see the
                // watch caught up.
                if let Some(progress) = &progress {
                    state.routed.store(progress.read(), Ordering::SeqCst);
                }
                self.activity.bump();
            }
            state.established.store(false, Ordering::SeqCst);
            self.activity.bump();
        }
    }

    /// Delivers one change to the controllers that read its kind.
    fn route(&self, kind: &Kind, resource: &Arc<DynamicResource>) {
        let routes = self.routes.read();
        let Some(routes) = routes.get(kind) else { return };
        let metadata = resource.metadata();
        let destroy_ready = metadata.phase() == Phase::TearingDown && metadata.finalizers().is_empty();
        for route in routes {
            if !route.input.covers(metadata.id()) {
                continue;
            }
            match (route.input.dependency, &route.core.queue) {
                (InputKind::Weak | InputKind::Strong, _) => {
                    route.core.wake(|| Trigger::Input(metadata.pointer().clone()));
                }
                (InputKind::DestroyReady, _) if destroy_ready => {
                    route.core.wake(|| Trigger::Input(metadata.pointer().clone()));
                }
                (InputKind::Primary, Some(queue)) => {
                    queue.put(Key { pointer: metadata.pointer().clone(), job: Job::Reconcile }, None);
                }
                (InputKind::Mapped, Some(queue)) => {
                    let key = Key { pointer: metadata.pointer().clone(), job: Job::Map };
                    queue.put(key, Some(ReducedMetadata::of(resource)));
                }
                (InputKind::MappedDestroyReady, Some(queue)) if destroy_ready => {
                    let key = Key { pointer: metadata.pointer().clone(), job: Job::Map };
                    queue.put(key, Some(ReducedMetadata::of(resource)));
                }
                _ => (),
            }
        }
    }

    /// Makes the readers of `kind` (or only `only`) look at all of it again:
    /// wakes reconcile controllers, queues every resource for queue controllers.
    async fn resync(&self, kind: &Kind, only: Option<&Arc<Core>>) {
        let targets: Vec<(Arc<Core>, Input)> = {
            let routes = self.routes.read();
            routes
                .get(kind)
                .into_iter()
                .flatten()
                .filter(|route| only.is_none_or(|core| Arc::ptr_eq(core, &route.core)))
                .map(|route| (Arc::clone(&route.core), route.input.clone()))
                .collect()
        };
        if targets.iter().all(|(core, _)| core.queue.is_none()) {
            for (core, _) in targets {
                core.wake(|| Trigger::Resync);
            }
            return;
        }
        let mut backoff = Backoff::new(self.options.backoff);
        let resources = loop {
            match self.state.list_dynamic(kind, &ListOptions::default()).await {
                Ok(resources) => break resources,
                Err(error) => {
                    tracing::warn!(%kind, %error, "runtime could not list a kind to resynchronize; retrying");
                    tokio::select! {
                        () = self.cancel.cancelled() => return,
                        () = tokio::time::sleep(backoff.next_delay()) => (),
                    }
                }
            }
        };
        for (core, _) in &targets {
            if core.queue.is_none() {
                core.wake(|| Trigger::Resync);
            }
        }
        for resource in &resources {
            for (core, input) in &targets {
                let Some(queue) = &core.queue else { continue };
                let metadata = resource.metadata();
                if !input.covers(metadata.id()) {
                    continue;
                }
                let destroy_ready = metadata.phase() == Phase::TearingDown && metadata.finalizers().is_empty();
                let job = match input.dependency {
                    InputKind::Primary => Job::Reconcile,
                    InputKind::Mapped => Job::Map,
                    InputKind::MappedDestroyReady if destroy_ready => Job::Map,
                    _ => continue,
                };
                let value = (job == Job::Map).then(|| ReducedMetadata::of(resource));
                queue.put(Key { pointer: metadata.pointer().clone(), job }, value);
            }
        }
    }

    /// A reconcile controller's loop: reconcile when woken, restart with
    /// backoff after a failure or a panic.
    async fn run_reconciler(
        self: Arc<Self>,
        core: Arc<Core>,
        mut controller: Box<dyn ErasedReconcile>,
        ready: Vec<watch::Receiver<bool>>,
        starting: InFlight,
    ) {
        tokio::select! {
            () = self.cancel.cancelled() => return,
            () = wait_ready(ready) => core.wake(|| Trigger::Start),
        };
        drop(starting);
        let mut backoff = Backoff::new(self.options.backoff);
        let mut requeue_at: Option<Instant> = None;
        loop {
            let woken = async {
                match requeue_at {
                    Some(at) => tokio::select! {
                        trigger = core.woken() => trigger,
                        () = tokio::time::sleep_until(at) => {
                            core.begin();
                            Trigger::Requeue
                        }
                    },
                    None => core.woken().await,
                }
            };
            let trigger = tokio::select! {
                () = self.cancel.cancelled() => return,
                trigger = woken => trigger,
            };
            requeue_at = None;
            core.start_reconcile();
            let span = tracing::info_span!("reconcile", controller = %core.name, %trigger);
            let started = Instant::now();
            let outcome = tokio::select! {
                () = self.cancel.cancelled() => return,
                outcome = AssertUnwindSafe(controller.reconcile()).catch_unwind().instrument(span) => outcome,
            };
            let busy = started.elapsed();
            let delay = match read_outcome(outcome) {
                Ok(requeue) => {
                    core.stats.record_success(busy);
                    backoff.reset();
                    if let Requeue::After(after) = requeue {
                        requeue_at = Some(Instant::now() + after);
                    }
                    core.finished();
                    continue;
                }
                Err((message, explicit)) => {
                    let delay = explicit.unwrap_or_else(|| backoff.next_delay());
                    tracing::error!(controller = %core.name, error = %message, ?delay, "reconcile failed; restarting");
                    core.stats.record_failure(busy, message, Some(delay));
                    // A controller waiting out its backoff has nothing pending:
                    // `settled` does not wait for a retry that may fail forever.
                    core.finished();
                    delay
                }
            };
            tokio::select! {
                () = self.cancel.cancelled() => return,
                () = tokio::time::sleep(delay) => {
                    core.wake(|| Trigger::Restart);
                }
            }
        }
    }

    /// A queue controller: lists its primary inputs once watched, then runs
    /// `concurrency` workers over its queue.
    async fn run_queue(
        self: Arc<Self>,
        core: Arc<Core>,
        controller: Arc<dyn ErasedQueue>,
        ready: Vec<watch::Receiver<bool>>,
        starting: InFlight,
    ) {
        tokio::select! {
            () = self.cancel.cancelled() => return,
            () = wait_ready(ready) => (),
        }
        for _ in 0..core.declaration.concurrency.unwrap_or(1).max(1) {
            let engine = Arc::clone(&self);
            let (core, controller) = (Arc::clone(&core), Arc::clone(&controller));
            self.spawn(async move { engine.run_worker(core, controller).await });
        }
        let kinds: Vec<Kind> = core.inputs().iter().map(|input| input.kind.clone()).collect();
        for kind in kinds {
            self.resync(&kind, Some(&core)).await;
        }
        drop(starting);
    }

    async fn run_worker(self: Arc<Self>, core: Arc<Core>, controller: Arc<dyn ErasedQueue>) {
        let Some(queue) = &core.queue else { return };
        loop {
            let item = tokio::select! {
                () = self.cancel.cancelled() => return,
                item = queue.next() => item,
            };
            core.stats.set_queue_depth(queue.len());
            if !reads(&core.inputs(), &item.key) {
                queue.forget_backoff(&item.key);
                queue.release(item, None);
                self.activity.bump();
                continue;
            }
            let span = tracing::info_span!(
                "reconcile",
                controller = %core.name,
                item = %item.key.pointer,
                job = ?item.key.job,
            );
            let started = Instant::now();
            let outcome = tokio::select! {
                () = self.cancel.cancelled() => return,
                outcome = AssertUnwindSafe(self.process(&core, &*controller, &item)).catch_unwind().instrument(span) => outcome,
            };
            let busy = started.elapsed();
            let requeue = match read_outcome(outcome) {
                Ok(requeue) => {
                    core.stats.record_success(busy);
                    queue.forget_backoff(&item.key);
                    match requeue {
                        Requeue::Never => None,
                        Requeue::After(after) => Some(Instant::now() + after),
                    }
                }
                Err((message, explicit)) => {
                    let delay = explicit.unwrap_or_else(|| queue.next_backoff(&item.key, self.options.backoff));
                    tracing::warn!(controller = %core.name, item = %item.key.pointer, error = %message, ?delay, "item failed; retrying");
                    core.stats.record_failure(busy, message, Some(delay));
                    Some(Instant::now() + delay)
                }
            };
            queue.release(item, requeue);
            self.activity.bump();
            core.stats.set_queue_depth(queue.len());
        }
    }

    /// Runs one queue item: a reconcile, or a mapping whose results are queued.
    async fn process(&self, core: &Core, controller: &dyn ErasedQueue, item: &Item) -> Outcome {
        match item.key.job {
            Job::Reconcile => controller.reconcile(&item.key.pointer).await,
            Job::Map => {
                let Some(input) = &item.value else { return Outcome::Done(Requeue::Never) };
                let mapped = match controller.map(input).await {
                    Ok(mapped) => mapped,
                    Err(error) => return Outcome::Failed(error),
                };
                let Some(queue) = &core.queue else { return Outcome::Done(Requeue::Never) };
                let inputs = core.inputs();
                for pointer in mapped {
                    let primary = inputs.iter().any(|input| {
                        input.dependency == InputKind::Primary
                            && input.kind.namespace() == pointer.namespace()
                            && input.kind.r#type() == pointer.r#type()
                    });
                    if !primary {
                        return Outcome::Failed(
                            format!(
                                "controller `{}` mapped {} to {pointer}, which is not of a primary input",
                                core.name, input.pointer
                            )
                            .into(),
                        );
                    }
                    queue.put(Key { pointer, job: Job::Reconcile }, None);
                }
                Outcome::Done(Requeue::Never)
            }
        }
    }

    /// Writes the status of every controller whose statistics changed, at
    /// most once per interval, and once more at shutdown.
    async fn publish_statuses(self: Arc<Self>, namespace: String) {
        loop {
            self.write_statuses(&namespace).await;
            tokio::select! {
                () = self.cancel.cancelled() => break,
                () = tokio::time::sleep(self.options.status_interval) => (),
            }
        }
        self.write_statuses(&namespace).await;
    }

    async fn write_statuses(&self, namespace: &str) {
        let controllers: Vec<Arc<Core>> = self.controllers.read().clone();
        for core in controllers {
            if !core.stats.dirty.swap(false, std::sync::atomic::Ordering::AcqRel) {
                continue;
            }
            let stats = core.stats.snapshot(core.queue.as_ref());
            let graph = GraphController::new(&core.name, core.declaration, &core.inputs());
            let pointer =
                crate::resource::Pointer::new(namespace, <ControllerStatus as crate::Resource>::TYPE, &*core.name);
            let healthy = core.stats.healthy();
            let written = self
                .state
                .modify::<ControllerStatus>(&pointer, UpdateOptions::owner(RUNTIME_OWNER), |status| {
                    status.inputs.clone_from(&graph.inputs);
                    status.outputs.clone_from(&graph.outputs);
                    status.concurrency = core.declaration.concurrency;
                    status.reconciles = stats.reconciles;
                    status.errors = stats.errors;
                    status.restarts = stats.restarts;
                    status.last_error.clone_from(&stats.last_error);
                    status.next_retry_ms = stats.next_retry.and_then(unix_millis);
                    status.healthy = healthy;
                })
                .await;
            if let Err(error) = written {
                tracing::warn!(controller = %core.name, %error, "runtime could not publish a controller status");
                core.stats.dirty.store(true, std::sync::atomic::Ordering::Release);
            }
        }
    }
}

/// Milliseconds since the Unix epoch, for a time after it.
fn unix_millis(time: std::time::SystemTime) -> Option<u64> {
    let since = time.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// Whether a queue controller with `inputs` still reads the item `key`: a
/// reconcile of a primary input's type (as a mapping may name it), or a
/// mapping of a resource its mapped inputs cover.
fn reads(inputs: &[Input], key: &Key) -> bool {
    let pointer = &key.pointer;
    inputs.iter().any(|input| {
        let kind = input.kind.namespace() == pointer.namespace() && input.kind.r#type() == pointer.r#type();
        match key.job {
            Job::Reconcile => kind && input.dependency == InputKind::Primary,
            Job::Map => {
                kind && matches!(input.dependency, InputKind::Mapped | InputKind::MappedDestroyReady)
                    && input.covers(pointer.id())
            }
        }
    })
}

/// Reads a reconcile's result: a requeue, or a failure's message and the
/// delay a [`RequeueError`] asks for.
fn read_outcome(outcome: std::thread::Result<Outcome>) -> Result<Requeue, (String, Option<Duration>)> {
    match outcome {
        Ok(Outcome::Done(requeue)) => Ok(requeue),
        Ok(Outcome::Failed(error)) => {
            let explicit = error.downcast_ref::<RequeueError>().map(RequeueError::after);
            Err((error.to_string(), explicit))
        }
        Err(panic) => Err((format!("panicked: {}", panic_message(&*panic)), None)),
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

async fn wait_ready(ready: Vec<watch::Receiver<bool>>) {
    for mut ready in ready {
        // An error means the watch task ended, which happens only at shutdown.
        let _ = ready.wait_for(|ready| *ready).await;
    }
}
