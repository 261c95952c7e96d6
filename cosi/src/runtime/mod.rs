//! The runtime: wires controllers into a graph over one state and decides who
//! wakes up when.
//!
//! ```
//! use cosi::prelude::*;
//!
//! #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
//! #[resource(type = "Greetings.example.org", namespace = "default")]
//! pub struct Greeting {
//!     pub text: String,
//! }
//!
//! #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
//! #[resource(type = "Shouts.example.org", namespace = "default")]
//! pub struct Shout {
//!     pub text: String,
//! }
//!
//! #[controller(inputs = [Weak<Greeting>], outputs = [Exclusive<Shout>], inventory = false)]
//! async fn shout(ctx: &mut Ctx) -> cosi::Result<()> {
//!     for greeting in ctx.list::<Greeting>(&ListOptions::default()).await? {
//!         ctx.modify::<Shout>(greeting.id(), |shout| shout.text = greeting.text.to_uppercase()).await?;
//!     }
//!     ctx.cleanup_outputs::<Shout>().await
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> cosi::Result<()> {
//! let state = cosi::state::memory();
//! let runtime = Runtime::new(state.clone());
//! runtime.register(shout {})?;
//! runtime.start()?;
//!
//! state.create(Typed::new("hello", Greeting { text: "hello".into() }), CreateOptions::default()).await?;
//! // Until every controller has caught up.
//! runtime.settled().await;
//! assert_eq!(state.get::<Shout>("hello").await?.text, "HELLO");
//! runtime.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # How it works
//!
//! - **One feed per (namespace, type)** that any controller reads, stopped
//!   when no controller reads the kind any more
//!   ([`RuntimeHandle::watched_kinds`]). On an in-process state it is an
//!   [`Observer`](crate::state::Observer): the write itself routes the change
//!   to the controllers that read it, before it returns. On a remote state it
//!   is a watch, resumed from its last bookmark when it drops; a watch that
//!   fell behind the state's history starts over and wakes every controller
//!   that reads the kind (queue controllers: re-queues every resource), so no
//!   change is lost.
//! - **Controllers run in a pool of lanes, one per worker thread.** Every
//!   controller's loop (and every queue worker) is a future of the
//!   runtime's pool, polled by one lane (a task) at a time. A change that
//!   ripples through a chain of controllers goes from one to the next inside
//!   one lane, without tokio's scheduler or another thread; a controller
//!   whose reconcile holds its thread holds one lane, and the other lanes
//!   run everything else. A reconcile should still await rather than block:
//!   a poll longer than [`RuntimeOptions::long_poll`] is reported, naming
//!   the controller, so that its CPU-heavy or blocking work moves to
//!   `tokio::task::spawn_blocking`.
//! - **Coalesced triggers.** A reconcile controller has one pending wake-up at
//!   most: a burst of changes while it is busy makes one more reconcile, never
//!   none after the last change. Every controller reconciles once at start.
//! - **Failures restart with backoff.** A reconcile that fails or panics is
//!   retried after a capped exponential backoff with jitter
//!   ([`BackoffOptions`]); the other controllers keep running. Queue
//!   controllers keep a backoff per item.
//! - **Observability.** A tracing span per reconcile; counters through the
//!   `metrics` facade (`cosi_controller_reconciles_total`,
//!   `cosi_controller_errors_total`, `cosi_controller_restarts_total`,
//!   `cosi_controller_busy_seconds`, `cosi_controller_queue_depth`,
//!   `cosi_controller_long_polls_total`, labelled
//!   by controller; install the recorder before building the runtime); one
//!   [`ControllerStatus`] resource per controller in the `runtime` namespace.

mod engine;
mod graph;
mod queue;
mod registered;
mod resource_types;
mod settle;
mod signal;
mod status;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::controller::{Collected, Register};
use crate::resource::Kind;
use crate::state::State;

pub use crate::backoff::BackoffOptions;
pub use crate::controller::Conflict;
pub use graph::{Graph, GraphController, GraphInput, GraphOutput};
pub use registered::ControllerStats;
pub use signal::shutdown_signal;
pub use status::{ControllerStatus, RUNTIME_NAMESPACE, RUNTIME_OWNER};

use engine::Engine;

/// The controller runtime: it owns every task it starts, and dropping it
/// stops them all (a reconcile in progress is dropped at its next await).
///
/// It is not `Clone`: [`handle`](Runtime::handle) gives a [`RuntimeHandle`],
/// cheap to clone, for anything that registers controllers, reads statistics
/// and the graph, waits for [`settled`](RuntimeHandle::settled) or shuts the
/// runtime down while the owner lives elsewhere. The owner has each of the
/// handle's methods too; starting ([`start`](Runtime::start),
/// [`run_until`](Runtime::run_until)) is the owner's alone.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// # pub struct HostnameStatus { pub hostname: String }
///
/// #[controller(inputs = [Weak<HostnameSpec>], outputs = [Exclusive<HostnameStatus>])]
/// async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
///     for spec in ctx.list::<HostnameSpec>(&ListOptions::default()).await? {
///         ctx.modify::<HostnameStatus>(spec.id(), |status| status.hostname = spec.hostname.clone()).await?;
///     }
///     ctx.cleanup_outputs::<HostnameStatus>().await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// let runtime = Runtime::new(state.clone());
/// runtime.register(hostname {})?;
/// runtime.start()?;
/// state.modify::<HostnameSpec>("default", UpdateOptions::default(), |spec| spec.hostname = "talos".into()).await?;
/// runtime.settled().await;
/// assert_eq!(state.get::<HostnameStatus>("default").await?.hostname, "talos");
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Runtime {
    handle: RuntimeHandle,
}

/// A handle to a [`Runtime`], cheap to clone: registers controllers and
/// types, reads statistics and the graph, waits for the runtime to settle,
/// and shuts it down. A handle does not keep the runtime alive: once its
/// owner is dropped, the runtime is shut down, and a handle's registrations
/// are refused with [`RuntimeError::ShutDown`].
///
/// ```
/// use cosi::prelude::*;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let runtime = Runtime::new(cosi::state::memory());
/// runtime.start()?;
/// let handle = runtime.handle();
/// // A task elsewhere shuts the runtime down through its handle.
/// tokio::spawn(async move { handle.shutdown().await }).await.expect("the task");
/// assert!(!runtime.is_running());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RuntimeHandle {
    engine: Arc<Engine>,
}

/// How a runtime behaves.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuntimeOptions {
    /// The backoff of failing controllers, failing queue items and watches.
    pub backoff: BackoffOptions,
    /// Where controller statuses are published; `None` publishes none.
    pub status_namespace: Option<String>,
    /// How often changed controller statuses are written, at most.
    pub status_interval: Duration,
    /// How long one poll of a controller (the code of a reconcile between
    /// two awaits that wait) may hold its thread before the runtime reports
    /// it: a warning naming the controller and the time, the counter
    /// `cosi_controller_long_polls_total`, and [`ControllerStats::long_polls`]
    /// (also in the controller's [`ControllerStatus`]). Such a controller
    /// keeps one of the runtime's lanes, and one thread, from every other
    /// controller meanwhile: its CPU-heavy or blocking work belongs in
    /// `tokio::task::spawn_blocking`.
    pub long_poll: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            backoff: BackoffOptions::default(),
            status_namespace: Some(RUNTIME_NAMESPACE.to_owned()),
            status_interval: Duration::from_secs(1),
            long_poll: Duration::from_millis(5),
        }
    }
}

/// Why a runtime refused a controller or a start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// Two controllers conflict: the rule they break, naming both
    /// (`Conflict::DuplicateName` or `Conflict::OutputConflict`).
    #[error("{0}")]
    Conflict(Conflict<String>),
    /// A controller breaks a rule alone: its declaration, its name, or the
    /// inputs its registration gives it.
    #[error("invalid controller: {0}")]
    InvalidController(Conflict<String>),
    /// `system!`'s `runtime()` was given a controller that registers under
    /// another name than the one the system lists it with (and checked its
    /// graph under).
    #[error(
        "`system!` lists a controller as `{listed}`, but the one given to `runtime()` registers as `{registered}`: give the instance the listed name, or list it under its own"
    )]
    NotAsListed {
        /// The name in the system's list.
        listed: String,
        /// The name the given controller registers under.
        registered: String,
    },
    /// `start` was called twice.
    #[error("the runtime has already been started")]
    AlreadyStarted,
    /// The runtime was shut down; it cannot be started or given controllers again.
    #[error("the runtime has been shut down")]
    ShutDown,
    /// `start` ran outside a tokio runtime.
    #[error("the runtime must be started from within a tokio runtime")]
    NoTokioRuntime,
    /// Two resource types answer to one name on a command line, and it is
    /// not an alias both derive automatically (which COSI allows: see
    /// [`RuntimeHandle::register_type`]).
    #[error(
        "resource types `{first}` and `{second}` both answer to `{alias}`: a type name or an explicit alias must name one type (only automatically derived aliases may be shared)"
    )]
    AliasConflict {
        /// The name both answer to.
        alias: String,
        /// The type registered first.
        first: String,
        /// The type being registered.
        second: String,
    },
    /// One resource type with two different definitions: two Rust types
    /// declare it, with different aliases, columns or default namespaces.
    #[error("resource type `{0}` has two different definitions in this program")]
    DefinitionConflict(String),
}

/// A runtime's refusal as a `cosi::Error` ([`Error::Other`](crate::Error::Other)),
/// so that `?` works on runtime and state errors alike in a function
/// returning `cosi::Result`; [`Error::downcast_ref`](crate::Error::downcast_ref)
/// gives the `RuntimeError` back.
///
/// The conversion lives here, beside the runtime, so that the state knows
/// nothing about the runtime.
///
/// ```
/// use cosi::prelude::*;
/// use cosi::RuntimeError;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// async fn run() -> cosi::Result<()> {
///     let runtime = Runtime::new(cosi::state::memory());
///     runtime.start()?;
///     runtime.start()?; // refused: started already
///     Ok(())
/// }
///
/// let error = run().await.unwrap_err();
/// assert_eq!(error.downcast_ref::<RuntimeError>(), Some(&RuntimeError::AlreadyStarted));
/// # }
/// ```
impl From<RuntimeError> for crate::Error {
    fn from(error: RuntimeError) -> Self {
        crate::Error::other(error)
    }
}

impl Runtime {
    /// A runtime over `state` with default options.
    pub fn new(state: impl State) -> Self {
        Runtime::with_options(state, RuntimeOptions::default())
    }

    /// A runtime over `state`.
    pub fn with_options(state: impl State, options: RuntimeOptions) -> Self {
        Runtime { handle: RuntimeHandle { engine: Engine::new(shared(state), options) } }
    }

    /// A runtime with every controller `#[controller]` collected from the
    /// crates linked into the program, validated as a graph: an error names
    /// both sides of any conflict, and nothing has run.
    ///
    /// A crate that nothing in the program names is not linked, and its
    /// controllers are not collected: name it (`use my_controllers as _;`) in
    /// the binary, and in each integration test that needs it. Controllers
    /// declared with `inventory = false` are registered by hand with
    /// [`register`](RuntimeHandle::register).
    pub fn from_inventory(state: impl State) -> Result<Self, RuntimeError> {
        let runtime = Runtime::new(state);
        for collected in Collected::sorted() {
            runtime.register((collected.build)())?;
        }
        Ok(runtime)
    }

    /// Starts the watches and every controller in the background, on the
    /// tokio runtime this is called from (inside an async function, or under
    /// [`Handle::enter`](tokio::runtime::Handle::enter)). Controllers
    /// registered later start at once, on the same tokio runtime.
    ///
    /// The runtime runs until [`shutdown`](RuntimeHandle::shutdown) or until
    /// this owner is dropped; [`run_until`](Runtime::run_until) does both for
    /// a program's `main`.
    pub fn start(&self) -> Result<(), RuntimeError> {
        self.handle.engine.start()
    }

    /// A handle to this runtime, for tasks and threads the owner does not go to.
    pub fn handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Starts (unless it runs already), runs until `signal` completes, then
    /// shuts down: the last line of a program's `main`.
    ///
    /// It returns a `cosi::Result` so that `main` can end with it.
    ///
    /// ```no_run
    /// use cosi::prelude::*;
    ///
    /// #[tokio::main]
    /// async fn main() -> cosi::Result<()> {
    ///     let state = cosi::state::memory();
    ///     let runtime = Runtime::from_inventory(state.clone())?;
    ///     println!("{}", runtime.graph().to_mermaid());
    ///     // Until Ctrl-C or SIGTERM.
    ///     runtime.run_until(cosi::runtime::shutdown_signal()).await
    /// }
    /// ```
    pub async fn run_until(&self, signal: impl Future) -> crate::Result<()> {
        match self.start() {
            Ok(()) | Err(RuntimeError::AlreadyStarted) => (),
            Err(error) => return Err(error.into()),
        }
        signal.await;
        self.shutdown().await;
        Ok(())
    }
}

/// The handle's methods, on the owner: what a program calls on the runtime it
/// holds. Each does what the handle's method of the same name does.
impl Runtime {
    /// See [`RuntimeHandle::register`].
    pub fn register(&self, controller: impl Register) -> Result<(), RuntimeError> {
        self.handle.register(controller)
    }

    /// See [`RuntimeHandle::register_type`].
    pub fn register_type<T: crate::Resource>(&self) -> Result<(), RuntimeError> {
        self.handle.register_type::<T>()
    }

    /// See [`RuntimeHandle::state`].
    pub fn state(&self) -> &Arc<dyn State> {
        self.handle.state()
    }

    /// See [`RuntimeHandle::graph`].
    pub fn graph(&self) -> Graph {
        self.handle.graph()
    }

    /// See [`RuntimeHandle::is_running`].
    pub fn is_running(&self) -> bool {
        self.handle.is_running()
    }

    /// See [`RuntimeHandle::controllers`].
    pub fn controllers(&self) -> Vec<String> {
        self.handle.controllers()
    }

    /// See [`RuntimeHandle::stats`].
    pub fn stats(&self, name: &str) -> Option<ControllerStats> {
        self.handle.stats(name)
    }

    /// See [`RuntimeHandle::watched_kinds`].
    pub fn watched_kinds(&self) -> Vec<Kind> {
        self.handle.watched_kinds()
    }

    /// See [`RuntimeHandle::settled`].
    pub async fn settled(&self) {
        self.handle.settled().await;
    }

    /// See [`RuntimeHandle::shutdown`].
    pub async fn shutdown(&self) {
        self.handle.shutdown().await;
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.handle.engine.stop();
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.handle, f)
    }
}

impl fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("controllers", &self.controllers())
            .field("running", &self.is_running())
            .finish_non_exhaustive()
    }
}

impl RuntimeHandle {
    /// Registers a controller, before or after the start. Refused when its
    /// declaration (or the inputs its registration gives it) breaks a rule,
    /// it conflicts with a registered controller, or one of its types
    /// collides with a known type by name (see [`register_type`](RuntimeHandle::register_type)).
    pub fn register(&self, controller: impl Register) -> Result<(), RuntimeError> {
        self.engine.register(controller.registration())
    }

    /// Adds a resource type the program uses beyond its controllers' inputs
    /// and outputs (one only clients write, say), so its definition is
    /// published with theirs.
    ///
    /// When the runtime starts, it publishes in the state's `meta` namespace
    /// the `meta` namespace itself and the definition of every type it knows:
    /// those of `meta` (`ResourceDefinition`, `Namespace`), `ControllerStatus`
    /// (when it publishes statuses), every type in a registered controller's
    /// inputs and outputs, and those registered here. Clients list them and
    /// resolve aliases through them (`cosictl get rd`, `cosictl get hostname`).
    /// Types registered after the start are published at once.
    ///
    /// # Names that collide
    ///
    /// Each type answers to its type, its plural and the plural's dotted
    /// prefixes (`hostnamestatuses`, `hostnamestatuses.net`), its explicit
    /// aliases, and the aliases COSI derives (the singular, the initials).
    /// Derived aliases may collide: `HostnameSpecs` and `HostnameStatuses`
    /// both derive `hs`, as in Talos, and a client asked for `hs` says it is
    /// ambiguous. Any other collision (an explicit alias or a type name that
    /// another type also answers to) is a [`RuntimeError::AliasConflict`]
    /// naming both types, here and in [`register`](RuntimeHandle::register); so is
    /// one type with two different definitions. An explicit alias the type
    /// would derive anyway counts as derived.
    ///
    /// ```
    /// use cosi::prelude::*;
    /// use cosi::RuntimeError;
    ///
    /// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
    /// pub struct HostnameSpec {
    ///     pub hostname: String,
    /// }
    ///
    /// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// #[resource(type = "HostnameStatuses.net.example.org", namespace = "network", aliases = ["hostname"])]
    /// pub struct HostnameStatus {
    ///     pub hostname: String,
    /// }
    ///
    /// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// #[resource(type = "Hostnames.other.example.org", namespace = "other", aliases = ["hn"])]
    /// pub struct Hostname {
    ///     pub hostname: String,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> cosi::Result<()> {
    /// let state = cosi::state::memory();
    /// let runtime = Runtime::new(state.clone());
    /// // Both derive `hs`: allowed.
    /// runtime.register_type::<HostnameSpec>()?;
    /// runtime.register_type::<HostnameStatus>()?;
    /// // `Hostnames` derives `hostname`, which `HostnameStatuses` names explicitly: refused.
    /// let error = runtime.register_type::<Hostname>().unwrap_err();
    /// assert!(matches!(&error, RuntimeError::AliasConflict { alias, .. } if alias == "hostname"));
    ///
    /// runtime.start()?;
    /// runtime.settled().await;
    /// let definition = state.get::<cosi::ResourceDefinition>("hostnamespecs.net.example.org").await?;
    /// assert_eq!(definition.aliases, ["hostnamespec", "hs"]);
    /// # runtime.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn register_type<T: crate::Resource>(&self) -> Result<(), RuntimeError> {
        self.engine.register_types(vec![T::definition()])
    }

    /// The state the controllers work on.
    pub fn state(&self) -> &Arc<dyn State> {
        self.engine.state()
    }

    /// The dependency graph of the registered controllers, with their current inputs.
    pub fn graph(&self) -> Graph {
        self.engine.graph()
    }

    /// Whether the runtime has started and not been shut down.
    pub fn is_running(&self) -> bool {
        self.engine.is_running()
    }

    /// The names of the registered controllers, in registration order.
    pub fn controllers(&self) -> Vec<String> {
        self.engine.controller_names()
    }

    /// What the runtime counted for the controller `name`.
    pub fn stats(&self, name: &str) -> Option<ControllerStats> {
        self.engine.stats(name)
    }

    /// The kinds the runtime watches now, sorted: one watch task each, for
    /// as long as a controller reads the kind. A kind no controller reads
    /// any more (its readers moved their inputs away with
    /// [`Ctx::update_inputs`](crate::Ctx::update_inputs)) has its watch
    /// stopped; [`settled`](RuntimeHandle::settled) waits for that.
    pub fn watched_kinds(&self) -> Vec<Kind> {
        self.engine.watched_kinds()
    }

    /// Resolves when the runtime has no pending work: every controller is
    /// idle, with no wake-up pending and no reconcile running, every queue
    /// is empty, and every watch has routed every change its state made so
    /// far. So every write that returned before the call, and every write the
    /// reconciles it set off made in turn, has been seen by the controllers
    /// that read it, and their reconciles have finished.
    ///
    /// What it does not wait for, by design:
    ///
    /// - **Work scheduled for later**: a controller or queue item waiting out
    ///   a requeue delay or a retry in backoff counts as settled, so a
    ///   controller that keeps failing does not keep `settled` waiting; check
    ///   [`stats`](RuntimeHandle::stats) to tell success from failure.
    /// - **Writes that race with the call** from outside the runtime.
    /// - **The published controller statuses**, which are written on a timer.
    ///
    /// # Exact for in-process states, best effort for remote ones
    ///
    /// Watches of the in-memory state and of the states built on it
    /// ([`NamespacedState`](crate::state::NamespacedState) over them, the
    /// redb state) report how far they have read
    /// ([`WatchProgress`](crate::state::WatchProgress)), and the runtime notes
    /// it after routing each batch: a watch is caught up when it has routed
    /// every event the state has written. That is exact, with no timer
    /// involved.
    ///
    /// A remote state (over gRPC, etcd) cannot tell what is still on the
    /// wire: for its watches, caught up means established and done routing
    /// what arrived. A write's event still in flight is then not waited for;
    /// wait for the result itself ([`StateExt::watch_for`](crate::StateExt::watch_for)).
    ///
    /// A runtime that is not running has nothing pending: `settled` returns
    /// at once before [`start`](Runtime::start), and when the runtime shuts
    /// down while it waits.
    ///
    /// ```
    /// use cosi::prelude::*;
    ///
    /// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// #[resource(type = "Greetings.example.org", namespace = "default")]
    /// pub struct Greeting {
    ///     pub text: String,
    /// }
    ///
    /// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// #[resource(type = "Shouts.example.org", namespace = "default")]
    /// pub struct Shout {
    ///     pub text: String,
    /// }
    ///
    /// #[controller(inputs = [Weak<Greeting>], outputs = [Exclusive<Shout>], inventory = false)]
    /// async fn shout(ctx: &mut Ctx) -> cosi::Result<()> {
    ///     for greeting in ctx.list::<Greeting>(&ListOptions::default()).await? {
    ///         ctx.modify::<Shout>(greeting.id(), |shout| shout.text = greeting.text.to_uppercase()).await?;
    ///     }
    ///     Ok(())
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> cosi::Result<()> {
    /// let state = cosi::state::memory();
    /// let runtime = Runtime::new(state.clone());
    /// runtime.register(shout {})?;
    /// runtime.start()?;
    ///
    /// state.modify::<Greeting>("hello", UpdateOptions::default(), |greeting| greeting.text = "hello".into()).await?;
    /// runtime.settled().await;
    /// assert_eq!(state.get::<Shout>("hello").await?.text, "HELLO");
    /// runtime.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settled(&self) {
        self.engine.settled().await;
    }

    /// Stops every controller and watch and waits until all have stopped.
    /// A reconcile in progress is dropped at its next await.
    pub async fn shutdown(&self) {
        self.engine.shutdown().await;
    }
}

/// Shares `state`, without wrapping it again when it is shared already.
fn shared<S: State>(state: S) -> Arc<dyn State> {
    match (&state as &dyn Any).downcast_ref::<Arc<dyn State>>() {
        Some(shared) => Arc::clone(shared),
        None => Arc::new(state),
    }
}
