//! Controllers: single-writer loops that read some resources (inputs) and
//! write others (outputs).
//!
//! A controller is declared with `#[controller]`, on an async function or on a
//! struct with state of its own:
//!
//! ```
//! use cosi::prelude::*;
//!
//! #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
//! #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
//! pub struct HostnameSpec {
//!     pub hostname: String,
//! }
//!
//! #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
//! #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
//! pub struct HostnameStatus {
//!     pub hostname: String,
//! }
//!
//! /// Its declaration is its contract: it reads specs and is the one writer of statuses.
//! #[controller(inputs = [Weak<HostnameSpec>], outputs = [Exclusive<HostnameStatus>])]
//! async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
//!     for spec in ctx.list::<HostnameSpec>(&ListOptions::default()).await? {
//!         ctx.modify::<HostnameStatus>(spec.id(), |status| status.hostname = spec.hostname.clone()).await?;
//!     }
//!     ctx.cleanup_outputs::<HostnameStatus>().await
//! }
//! ```
//!
//! [`Ctx`] is typed by the declaration: reading a type that is neither an
//! input nor an output, writing one that is not an output, or touching the
//! finalizers of anything but a strong input does not compile (see
//! [`Reads`], [`Writes`], [`Finalizes`]).
//!
//! Two shapes of controller exist, as in COSI:
//!
//! - **Reconcile controllers** ([`Controller`]) are woken, coalesced, whenever
//!   any input changes, and reconcile everything each time.
//! - **Queue controllers** ([`QueueController`]) reconcile one item at a time:
//!   each changed primary input is an item, mapped inputs are mapped to the
//!   items they affect, up to `concurrency` items run at once, never the same
//!   item twice at once, each with its own backoff.

mod access;
mod ctx;
mod declaration;
mod generic;
mod host;
mod outcome;
mod registration;
mod waker;

use std::borrow::Cow;
use std::future::Future;

pub use access::{Finalizes, Reads, Writes};
pub use ctx::{Ctx, CtxFuture, DynCtx, TeardownSignal};
pub use declaration::{
    Conflict, Declaration, Entry, Input, InputDecl, InputKind, InputRef, OutputDecl, OutputKind, check_declaration,
    check_graph, check_inputs, check_pair,
};
pub use declaration::{NameRule, OutputRef, QueueRule};
pub(crate) use declaration::{check_declared_inputs, check_runtime_inputs, intern};
pub use generic::{Cleanup, Destroy, MERGE_SOURCE, Merge, QueueTransform, Transform};
pub use outcome::{BoxError, IntoMapped, IntoOutcome, Outcome, Requeue, RequeueError};
pub use registration::{Collected, Registration};
pub use waker::Waker;

#[doc(hidden)]
pub use declaration::assert_system;

pub(crate) use host::Host;
pub(crate) use registration::{Body, ErasedQueue, ErasedReconcile, Shutdown};

use crate::resource::{Labels, Phase, Pointer};

/// A reconcile controller. `#[controller]` implements it; implement it by hand
/// only for controllers the macro cannot express (generic ones).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a reconcile controller",
    note = "a queue controller runs an item again by returning `Requeue::After` from its reconcile, and queues every item again with `ctx.waker().wake()`"
)]
pub trait Controller: Declared + Send + Sized + 'static {
    /// The name of this instance: the owner of everything it writes.
    /// Defaults to the declared name.
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(Self::DECLARATION.name)
    }

    /// Brings the outputs in line with the inputs. Runs once at start, then
    /// whenever an input changed (many changes may wake it once), and again
    /// after a failure, with backoff.
    fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> impl Future<Output = Outcome> + Send;
}

/// A queue controller. `#[controller]` implements it when the inputs are
/// `Primary`/`Mapped` ones.
pub trait QueueController: Declared + Send + Sync + Sized + 'static {
    /// The name of this instance. Defaults to the declared name.
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(Self::DECLARATION.name)
    }

    /// Reconciles one item: a resource of a primary input.
    fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> impl Future<Output = Outcome> + Send;

    /// Maps a changed resource of a mapped input to the items it affects.
    fn map(
        &self,
        ctx: &Ctx<Self>,
        input: &ReducedMetadata,
    ) -> impl Future<Output = Result<Vec<Pointer>, BoxError>> + Send {
        let _ = (ctx, input);
        async move { Err(format!("controller `{}` declares mapped inputs but no `map`", Self::DECLARATION.name).into()) }
    }

    /// Runs once the controller starts, beside its workers (COSI's run
    /// hook): for work that is not one item's, such as watching something
    /// outside the state and queueing the items it affects with
    /// [`Ctx::waker`]. An error runs it again after a backoff; `Ok` ends it.
    /// Does nothing by default.
    fn on_start(&self, ctx: &Ctx<Self>) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = ctx;
        async { Ok(()) }
    }

    /// Runs once the runtime stops (COSI's shutdown hook): to release what
    /// [`on_start`](QueueController::on_start) or the reconciles hold
    /// outside the state. Does nothing by default.
    fn on_shutdown(&self, ctx: &Ctx<Self>) -> impl Future<Output = ()> + Send {
        let _ = ctx;
        async {}
    }
}

/// Anything the runtime can register: every `#[controller]`, and
/// [`Registration`] itself.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// # pub struct HostnameStatus { pub hostname: String }
///
/// #[controller(outputs = [Exclusive<HostnameStatus>])]
/// async fn hostname(_ctx: &mut Ctx) {}
///
/// let runtime = Runtime::new(cosi::state::memory());
/// // A controller declared on a function registers as the struct of the same name.
/// runtime.register(hostname {})?;
/// // A second controller of the same name is refused.
/// assert!(runtime.register(hostname {}).is_err());
/// # Ok::<(), cosi::RuntimeError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a controller the runtime can register",
    label = "not a controller",
    note = "declare it with `#[controller(...)]`; for a controller declared on a function `f`, register `f {{}}`"
)]
pub trait Register: Sized {
    /// The registration of this controller instance.
    fn registration(self) -> Registration;

    /// The registration under another name: for several instances of one
    /// controller type, each the owner of its own outputs.
    fn named(self, name: impl Into<std::sync::Arc<str>>) -> Registration {
        self.registration().with_name(name)
    }

    /// The registration with these inputs instead of the declared ones:
    /// see [`Registration::with_inputs`].
    fn with_inputs(self, inputs: impl IntoIterator<Item = Input>) -> Registration {
        self.registration().with_inputs(inputs)
    }
}

impl Register for Registration {
    fn registration(self) -> Registration {
        self
    }
}

/// A controller type's declaration, whatever its shape: what the runtime and
/// `cosi::system!` check.
pub trait Declared {
    /// The name, inputs, outputs and (queue controllers) concurrency.
    const DECLARATION: Declaration;
}

/// What a mapper sees of a changed resource: enough to find the items it
/// affects, without its spec.
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
/// /// One spec at a time; a change of a status queues the spec of the same ID.
/// #[controller(inputs = [Primary<HostnameSpec>, Mapped<HostnameStatus>])]
/// #[derive(Default)]
/// pub struct Specs;
///
/// impl Specs {
///     async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) {}
///
///     async fn map(&self, _ctx: &Ctx<Self>, status: &ReducedMetadata) -> Vec<Pointer> {
///         vec![HostnameSpec::pointer(status.pointer.id())]
///     }
/// }
///
/// Runtime::new(cosi::state::memory()).register(Specs)?;
/// # Ok::<(), cosi::RuntimeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReducedMetadata {
    /// The resource.
    pub pointer: Pointer,
    /// Its phase.
    pub phase: Phase,
    /// Its labels.
    pub labels: Labels,
    /// Whether it has no finalizers.
    pub finalizers_empty: bool,
}

impl ReducedMetadata {
    pub(crate) fn of(resource: &crate::DynamicResource) -> Self {
        let metadata = resource.metadata();
        ReducedMetadata {
            pointer: metadata.pointer().clone(),
            phase: metadata.phase(),
            labels: metadata.labels().clone(),
            finalizers_empty: metadata.finalizers().is_empty(),
        }
    }
}
