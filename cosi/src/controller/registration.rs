//! A controller ready to register, and the type-erased controller the
//! runtime drives: the controller's side of registration.

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::controller::{
    BoxError, Controller, Ctx, Declaration, DynCtx, Host, Input, IntoOutcome, Outcome, QueueController, ReducedMetadata,
};
use crate::resource::Pointer;

/// A controller ready to be registered: its name, its declaration, its
/// inputs if they are not the declared ones, and how to build its task.
/// Every `#[controller]` converts into one ([`Register`](crate::controller::Register)).
pub struct Registration {
    pub(crate) name: Arc<str>,
    pub(crate) declaration: &'static Declaration,
    pub(crate) inputs: Option<Vec<Input>>,
    pub(crate) body: Body,
}

/// How to build a registered controller's task, once the runtime has its [`Host`].
pub(crate) enum Body {
    Reconcile(Build<(Box<dyn ErasedReconcile>, Option<Shutdown>)>),
    Queue(Build<Arc<dyn ErasedQueue>>),
}

/// What a controller runs once the runtime stops.
pub(crate) type Shutdown = BoxFuture<'static, ()>;

/// Builds a type-erased controller around its host.
pub(crate) type Build<T> = Box<dyn FnOnce(Arc<dyn Host>) -> T + Send>;

impl Registration {
    /// A reconcile controller.
    pub fn controller<C: Controller>(controller: C) -> Self {
        Registration {
            name: name_of(controller.name()),
            declaration: const { &C::DECLARATION },
            inputs: None,
            body: Body::Reconcile(Box::new(move |host| {
                (Box::new(Holder { controller, ctx: Ctx::new(host) }) as Box<dyn ErasedReconcile>, None)
            })),
        }
    }

    /// A queue controller.
    pub fn queue<C: QueueController>(controller: C) -> Self {
        Registration {
            name: name_of(controller.name()),
            declaration: const { &C::DECLARATION },
            inputs: None,
            body: Body::Queue(Box::new(move |host| {
                Arc::new(Holder { controller, ctx: Ctx::new(host) }) as Arc<dyn ErasedQueue>
            })),
        }
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same controller under another name.
    pub fn with_name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = name.into();
        self
    }

    /// The controller's declaration.
    pub fn declaration(&self) -> &'static Declaration {
        self.declaration
    }

    /// The same controller with another declaration: a generic controller's,
    /// built from its options. The runtime checks it as any other.
    pub(crate) fn with_declaration(mut self, declaration: &'static Declaration) -> Self {
        self.declaration = declaration;
        self
    }

    /// The same reconcile controller with `hook` run once the runtime stops,
    /// with the controller's context (a queue controller has
    /// [`QueueController::on_shutdown`] instead).
    pub(crate) fn on_shutdown(mut self, hook: impl FnOnce(DynCtx) -> Shutdown + Send + 'static) -> Self {
        if let Body::Reconcile(build) = self.body {
            self.body = Body::Reconcile(Box::new(move |host: Arc<dyn Host>| {
                let (controller, _) = build(Arc::clone(&host));
                (controller, Some(hook(DynCtx::new(host))))
            }));
        }
        self
    }

    /// The same controller starting with `inputs` instead of its declared
    /// ones: what Go COSI's `Inputs()` returns for one instance. An instance
    /// registered for one namespace or one ID reads and is woken by just
    /// that, from its first reconcile on, and the graph shows it.
    ///
    /// [`Runtime::register`](crate::RuntimeHandle::register) checks them with the rules of
    /// [`Ctx::update_inputs`](crate::Ctx::update_inputs): each must be of a
    /// type the declaration names as an input, with a kind of the same shape
    /// (queue or not), and none twice; as in a declaration, a namespace named
    /// here may hold the controller's output type (a merge reads its layers
    /// there). The controller may still change them while it runs.
    ///
    /// ```
    /// use cosi::prelude::*;
    ///
    /// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// #[resource(type = "LinkStatuses.net.example.org", namespace = "network")]
    /// pub struct LinkStatus {
    ///     pub up: bool,
    /// }
    ///
    /// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// #[resource(type = "LinkReports.net.example.org", namespace = "network")]
    /// pub struct LinkReport {
    ///     pub up: bool,
    /// }
    ///
    /// /// Reports on whichever links its registration gives it.
    /// #[controller(inputs = [Weak<LinkStatus>], outputs = [Shared<LinkReport>], inventory = false)]
    /// async fn link(ctx: &mut Ctx) -> cosi::Result<()> {
    ///     let inputs = ctx.dynamic().inputs();
    ///     for input in inputs.iter() {
    ///         let Some(id) = &input.id else { continue };
    ///         let up = ctx.get::<LinkStatus>(&**id).await.is_ok_and(|link| link.up);
    ///         ctx.modify::<LinkReport>(&**id, |report| report.up = up).await?;
    ///     }
    ///     Ok(())
    /// }
    ///
    /// let runtime = Runtime::new(cosi::state::memory());
    /// for name in ["eth0", "eth1"] {
    ///     let inputs = [Input::of::<LinkStatus>(InputKind::Weak).with_id(name)];
    ///     runtime.register(link {}.named(format!("link-{name}")).with_inputs(inputs))?;
    /// }
    /// let graph = runtime.graph();
    /// assert_eq!(graph.controllers[0].inputs[0].id.as_deref(), Some("eth0"));
    ///
    /// // Refused: the declaration reads no `LinkReport`.
    /// let error = runtime.register(link {}.named("wrong").with_inputs([Input::of::<LinkReport>(InputKind::Weak)]));
    /// assert!(error.is_err());
    /// # Ok::<(), cosi::RuntimeError>(())
    /// ```
    #[must_use]
    pub fn with_inputs(mut self, inputs: impl IntoIterator<Item = Input>) -> Self {
        self.inputs = Some(inputs.into_iter().collect());
        self
    }

    /// The inputs the controller starts with: those given to
    /// [`with_inputs`](Registration::with_inputs), else the declared ones.
    pub fn inputs(&self) -> Vec<Input> {
        match &self.inputs {
            Some(inputs) => inputs.clone(),
            None => self.declaration.runtime_inputs(),
        }
    }
}

fn name_of(name: Cow<'static, str>) -> Arc<str> {
    match name {
        Cow::Borrowed(name) => Arc::from(name),
        Cow::Owned(name) => Arc::from(name),
    }
}

/// A controller `#[controller]` collected for [`Runtime::from_inventory`](crate::Runtime::from_inventory).
#[derive(Debug)]
pub struct Collected {
    /// Its declaration.
    pub declaration: &'static Declaration,
    /// Builds it (with `Default`).
    pub build: fn() -> Registration,
    /// The module that declared it.
    pub module: &'static str,
}

inventory::collect!(Collected);

impl Collected {
    /// Every collected controller, by name (then module), so that runtimes
    /// and graphs built from the inventory are the same in every run.
    pub fn sorted() -> Vec<&'static Collected> {
        let mut all: Vec<&'static Collected> = inventory::iter::<Collected>.into_iter().collect();
        all.sort_by_key(|collected| (collected.declaration.name, collected.module));
        all
    }
}

struct Holder<C> {
    controller: C,
    ctx: Ctx<C>,
}

/// A reconcile controller with its context, types erased.
pub(crate) trait ErasedReconcile: Send {
    fn reconcile(&mut self) -> BoxFuture<'_, Outcome>;
}

impl<C: Controller> ErasedReconcile for Holder<C> {
    fn reconcile(&mut self) -> BoxFuture<'_, Outcome> {
        // What `cleanup_outputs` keeps is what this reconcile writes.
        self.ctx.dynamic().forget_touched();
        Box::pin(self.controller.reconcile(&mut self.ctx))
    }
}

/// A queue controller with its context, types erased.
pub(crate) trait ErasedQueue: Send + Sync {
    fn reconcile<'a>(&'a self, item: &'a Pointer) -> BoxFuture<'a, Outcome>;
    fn map<'a>(&'a self, input: &'a ReducedMetadata) -> BoxFuture<'a, Result<Vec<Pointer>, BoxError>>;
    fn on_start(&self) -> BoxFuture<'_, Outcome>;
    fn on_shutdown(&self) -> BoxFuture<'_, ()>;
}

impl<C: QueueController> ErasedQueue for Holder<C> {
    fn reconcile<'a>(&'a self, item: &'a Pointer) -> BoxFuture<'a, Outcome> {
        Box::pin(self.controller.reconcile(&self.ctx, item))
    }

    fn map<'a>(&'a self, input: &'a ReducedMetadata) -> BoxFuture<'a, Result<Vec<Pointer>, BoxError>> {
        Box::pin(self.controller.map(&self.ctx, input))
    }

    fn on_start(&self) -> BoxFuture<'_, Outcome> {
        Box::pin(async move { self.controller.on_start(&self.ctx).await.into_outcome() })
    }

    fn on_shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.controller.on_shutdown(&self.ctx))
    }
}
