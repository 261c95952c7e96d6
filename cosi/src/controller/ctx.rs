//! The context a controller works through: reads, writes and finalizer edits,
//! checked against its declaration.
//!
//! [`Ctx<C>`] checks the resource *type* of every call at compile time,
//! through the bounds [`Reads`], [`Writes`] and [`Finalizes`] that
//! `#[controller]` implements for `C`. [`DynCtx`] does the same operations
//! with the type checked at run time only, for controllers generic over their
//! types. Both check the namespace and ID at run time, against the inputs the
//! controller has now, and both write as the controller: its name is the owner
//! of everything it creates, and the state refuses its writes to resources
//! another controller owns.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::controller::{Controller, Finalizes, Host, Input, InputKind, QueueController, Reads, Waker, Writes};
use crate::resource::{At, DynamicResource, Kind, Phase, Pointer, Resource, Typed};
use crate::state::{
    CreateOptions, DestroyOptions, Error, Event, Immediate, ListOptions, Result, ResultExt, State, TeardownOptions,
    UpdateOptions, WatchOptions,
};

/// The context of controller `C`: its view of the state.
///
/// Reconcile controllers get `&mut Ctx<Self>`, queue controllers `&Ctx<Self>`.
/// In a `#[controller]` function, write `ctx: &mut Ctx`: the macro fills in
/// the controller type.
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
/// /// Reads specs, writes statuses: `ctx` compiles only for what the declaration names.
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
pub struct Ctx<C: ?Sized> {
    dynamic: DynCtx,
    _controller: PhantomData<fn() -> C>,
}

/// What the methods of [`Ctx`] return: a boxed future, so that a broken access
/// rule is reported once, at the call, rather than again at each use of an
/// opaque future type that carries the rule.
pub type CtxFuture<'a, T, E = Error> = std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// Resolves once a resource is tearing down or gone: [`Ctx::until_teardown`].
pub type TeardownSignal = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

impl<C: ?Sized> Ctx<C> {
    pub(crate) fn new(host: Arc<dyn Host>) -> Self {
        Ctx { dynamic: DynCtx::new(host), _controller: PhantomData }
    }

    /// The controller's name: the owner of what it writes.
    pub fn name(&self) -> &str {
        self.dynamic.name()
    }

    /// The same operations with resource types checked at run time only.
    pub fn dynamic(&self) -> &DynCtx {
        &self.dynamic
    }

    /// The resource of type `T` at `at`.
    pub fn get<T: Resource + Reads<C>>(&self, at: impl At<T>) -> CtxFuture<'_, Typed<T>> {
        let pointer = at.pointer();
        Box::pin(async move { self.dynamic.get::<T>(pointer).await })
    }

    /// The resources of type `T` in its default namespace that match `options`, sorted by ID.
    pub fn list<'a, T: Resource + Reads<C>>(&'a self, options: &'a ListOptions) -> CtxFuture<'a, Vec<Typed<T>>> {
        Box::pin(async move { self.dynamic.list::<T>(options).await })
    }

    /// The resources of type `T` in `namespace` that match `options`, sorted by ID.
    pub fn list_in<'a, T: Resource + Reads<C>>(
        &'a self,
        namespace: &'a str,
        options: &'a ListOptions,
    ) -> CtxFuture<'a, Vec<Typed<T>>> {
        Box::pin(async move { self.dynamic.list_in::<T>(namespace, options).await })
    }

    /// Creates the resource from `T::default()` with `edit` applied, or updates
    /// it with `edit`; retried on conflicts, and not written at all when
    /// `edit` changes nothing. Returns the resource as stored.
    pub fn modify<'a, T: Resource + Default + Writes<C>>(
        &'a self,
        at: impl At<T>,
        mut edit: impl FnMut(&mut Typed<T>) + Send + 'a,
    ) -> CtxFuture<'a, Typed<T>> {
        let pointer = at.pointer();
        Box::pin(async move {
            self.dynamic
                .try_modify::<T, Error>(pointer, move |resource| {
                    edit(resource);
                    Ok(())
                })
                .await
        })
    }

    /// [`modify`](Ctx::modify) with an edit that can fail; its error is returned as it is.
    pub fn try_modify<'a, T, E>(
        &'a self,
        at: impl At<T>,
        edit: impl FnMut(&mut Typed<T>) -> Result<(), E> + Send + 'a,
    ) -> CtxFuture<'a, Typed<T>, E>
    where
        T: Resource + Default + Writes<C>,
        E: From<Error> + Send + 'a,
    {
        let pointer = at.pointer();
        Box::pin(async move { self.dynamic.try_modify(pointer, edit).await })
    }

    /// Creates a resource.
    pub fn create<T: Resource + Writes<C>>(&self, resource: Typed<T>) -> CtxFuture<'_, Typed<T>> {
        Box::pin(async move { self.dynamic.create(resource).await })
    }

    /// Updates a resource; it must carry the stored version.
    pub fn update<T: Resource + Writes<C>>(&self, resource: Typed<T>) -> CtxFuture<'_, Typed<T>> {
        Box::pin(async move { self.dynamic.update(resource).await })
    }

    /// Moves a resource to the tearing-down phase; returns whether it has no
    /// finalizers left, so can be destroyed now.
    pub fn teardown<T: Resource + Writes<C>>(&self, at: impl At<T>) -> CtxFuture<'_, bool> {
        let pointer = at.pointer();
        Box::pin(async move { self.dynamic.teardown::<T>(pointer).await })
    }

    /// Destroys a resource that has no finalizers left.
    pub fn destroy<T: Resource + Writes<C>>(&self, at: impl At<T>) -> CtxFuture<'_, ()> {
        let pointer = at.pointer();
        Box::pin(async move { self.dynamic.destroy::<T>(pointer).await })
    }

    /// Puts `finalizers` on an input: each stays until this controller removes
    /// it, and the resource cannot be destroyed meanwhile.
    pub fn add_finalizers<'a, T: Resource + Finalizes<C>>(
        &'a self,
        at: impl At<T>,
        finalizers: &'a [&'a str],
    ) -> CtxFuture<'a, ()> {
        let pointer = at.pointer();
        Box::pin(async move { self.dynamic.add_finalizers::<T>(pointer, finalizers).await })
    }

    /// Removes `finalizers` from an input; succeeds when the resource is gone.
    pub fn remove_finalizers<'a, T: Resource + Finalizes<C>>(
        &'a self,
        at: impl At<T>,
        finalizers: &'a [&'a str],
    ) -> CtxFuture<'a, ()> {
        let pointer = at.pointer();
        Box::pin(async move { self.dynamic.remove_finalizers::<T>(pointer, finalizers).await })
    }

    /// Removes the outputs of type `T` (in its default namespace) that this
    /// controller owns and did not write in this reconcile: destroys those
    /// without finalizers, tears down the others (to be destroyed by a later
    /// reconcile once their finalizers are gone; declare `DestroyReady<T>` to
    /// be woken then). An output already tearing down is destroyed once it has
    /// no finalizers, even if this reconcile tried to write its ID (the write
    /// failed on the phase): a later reconcile creates it anew.
    pub fn cleanup_outputs<T: Resource + Writes<C>>(&self) -> CtxFuture<'_, ()> {
        Box::pin(async move { self.dynamic.cleanup_outputs::<T>().await })
    }

    /// [`cleanup_outputs`](Ctx::cleanup_outputs) in `namespace`.
    pub fn cleanup_outputs_in<'a, T: Resource + Writes<C>>(&'a self, namespace: &'a str) -> CtxFuture<'a, ()> {
        Box::pin(async move { self.dynamic.cleanup_outputs_in::<T>(namespace).await })
    }

    /// Replaces the controller's inputs (COSI's `UpdateInputs`): it is woken by
    /// these from now on, and may read only these (and its outputs). New
    /// inputs wake it once, when their kinds are watched, so that it sees what
    /// they hold; the same inputs again change nothing, so a reconcile may set
    /// them every time.
    ///
    /// Every input must be of a type the declaration names as an input, with
    /// a kind of the same shape (queue or not).
    pub fn update_inputs(&self, inputs: impl IntoIterator<Item = Input>) -> Result<()> {
        self.dynamic.update_inputs(inputs)
    }

    /// Asks for another reconcile after this one, even if no input changes.
    ///
    /// Reconcile controllers only: a queue controller runs an item again by
    /// returning [`Requeue::After`](crate::controller::Requeue::After) from
    /// its reconcile, and every item with [`waker`](Ctx::waker)`().wake()`.
    pub fn requeue(&self)
    where
        C: Controller,
    {
        self.dynamic.requeue();
    }

    /// Forgets the backoff of `item`, so that its next failure is retried
    /// after the first delay again (COSI's `ResetRestartBackoff`): for a
    /// reconcile that made progress before it failed.
    pub fn reset_backoff(&self, item: &Pointer)
    where
        C: QueueController,
    {
        self.dynamic.reset_backoff(item);
    }

    /// A handle that wakes this controller from outside the state: from a
    /// file watcher thread, a timer, an operator task it started. See
    /// [`Waker`].
    pub fn waker(&self) -> Waker {
        self.dynamic.waker()
    }

    /// A future that resolves once the resource at `at` is tearing down or
    /// gone (at once if it is already): a way to stop long work on an item
    /// that is going away (COSI's `ContextWithTeardown`).
    pub fn until_teardown<T: Resource + Reads<C>>(&self, at: impl At<T>) -> CtxFuture<'_, TeardownSignal> {
        let pointer = at.pointer();
        Box::pin(async move { self.dynamic.until_teardown::<T>(pointer).await })
    }
}

impl<C: ?Sized> fmt::Debug for Ctx<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx").field("controller", &self.name()).finish_non_exhaustive()
    }
}

/// A controller's context with resource types checked at run time only: what
/// [`Ctx::dynamic`] returns.
pub struct DynCtx {
    host: Arc<dyn Host>,
    /// The outputs written since the reconcile started, for `cleanup_outputs`:
    /// a list (duplicates and all), since a push is much cheaper than hashing
    /// three strings, and only `cleanup_outputs` needs a set.
    touched: Mutex<Vec<Pointer>>,
    /// What every update writes with: the controller as the owner.
    writes: UpdateOptions,
    /// What every create writes with: the controller as the owner.
    creates: CreateOptions,
}

/// The two writes that put a whole resource.
#[derive(Clone, Copy)]
enum Write {
    Create,
    Update,
}

impl DynCtx {
    pub(crate) fn new(host: Arc<dyn Host>) -> Self {
        let (writes, creates) = (UpdateOptions::owner(host.name()), CreateOptions::owner(host.name()));
        DynCtx { host, touched: Mutex::default(), writes, creates }
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        self.host.name()
    }

    fn state(&self) -> &dyn State {
        self.host.state()
    }

    fn is_queue(&self) -> bool {
        self.host.declaration().is_queue()
    }

    /// Starts the output tracking of a new reconcile.
    pub(crate) fn forget_touched(&self) {
        self.touched.lock().clear();
    }

    /// Notes an output written in this reconcile (reconcile controllers only).
    pub(crate) fn touch(&self, pointer: &Pointer) {
        if !self.is_queue() {
            self.touched.lock().push(pointer.clone());
        }
    }

    fn is_output(&self, r#type: &str) -> bool {
        self.host.declaration().outputs.iter().any(|output| output.r#type == r#type)
    }

    /// An input of the controller's now reads `pointer`, and passes `also`.
    fn input_covers(&self, pointer: &Pointer, also: impl Fn(&Input) -> bool) -> bool {
        self.host.inputs().iter().any(|input| input.reads(pointer) && also(input))
    }

    fn check_read(&self, pointer: &Pointer) -> Result<()> {
        match self.is_output(pointer.r#type()) || self.input_covers(pointer, |_| true) {
            true => Ok(()),
            false => Err(self.denied(format_args!("cannot read {pointer}: it is neither an input nor an output"))),
        }
    }

    fn check_list(&self, kind: &Kind) -> Result<()> {
        let allowed = self.is_output(kind.r#type())
            || self.host.inputs().iter().any(|input| &input.kind == kind && input.id.is_none());
        match allowed {
            true => Ok(()),
            false => {
                Err(self.denied(format_args!("cannot list {kind}: it is neither an output nor an input of every ID")))
            }
        }
    }

    fn check_write(&self, pointer: &Pointer, operation: &str) -> Result<()> {
        match self.is_output(pointer.r#type()) {
            true => Ok(()),
            false => Err(self.denied(format_args!("cannot {operation} {pointer}: it is not an output"))),
        }
    }

    fn check_finalizers(&self, pointer: &Pointer) -> Result<()> {
        match self.input_covers(pointer, |input| input.dependency.grants_finalizers()) {
            true => Ok(()),
            false => {
                Err(self.denied(format_args!("cannot change the finalizers of {pointer}: it is not a strong input")))
            }
        }
    }

    fn denied(&self, reason: fmt::Arguments<'_>) -> Error {
        Error::AccessDenied(format!("controller `{}` {reason}", self.name()))
    }

    /// The resource of type `T` at `at`.
    pub async fn get<T: Resource>(&self, at: impl At<T>) -> Result<Typed<T>> {
        Typed::try_from(self.get_dynamic(&expect_type::<T>(at)?).await?)
    }

    /// The resource at `pointer`, whatever its type.
    pub async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource> {
        self.check_read(pointer)?;
        self.host.count_read();
        match crate::state::get_now(self.state(), pointer) {
            Some(found) => found,
            None => self.state().get_dynamic(pointer).await,
        }
    }

    /// As [`Ctx::list`].
    pub async fn list<T: Resource>(&self, options: &ListOptions) -> Result<Vec<Typed<T>>> {
        self.list_in::<T>(T::NAMESPACE, options).await
    }

    /// As [`Ctx::list_in`].
    pub async fn list_in<T: Resource>(&self, namespace: &str, options: &ListOptions) -> Result<Vec<Typed<T>>> {
        let kind = Kind::of::<T>(namespace);
        self.list_dynamic(&kind, options).await?.into_iter().map(Typed::try_from).collect()
    }

    /// The resources of `kind` that match `options`, whatever their type.
    pub async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>> {
        self.check_list(kind)?;
        self.host.count_read();
        match crate::state::list_now(self.state(), kind, options) {
            Some(listed) => listed,
            None => self.state().list_dynamic(kind, options).await,
        }
    }

    /// As [`Ctx::modify`].
    pub async fn modify<T: Resource + Default>(
        &self,
        at: impl At<T>,
        mut edit: impl FnMut(&mut Typed<T>) + Send,
    ) -> Result<Typed<T>> {
        self.try_modify::<T, Error>(at, move |resource| {
            edit(resource);
            Ok(())
        })
        .await
    }

    /// As [`Ctx::try_modify`].
    pub async fn try_modify<T, E>(
        &self,
        at: impl At<T>,
        edit: impl FnMut(&mut Typed<T>) -> Result<(), E> + Send,
    ) -> Result<Typed<T>, E>
    where
        T: Resource + Default,
        E: From<Error> + Send,
    {
        let pointer = expect_type::<T>(at)?;
        self.check_write(&pointer, "modify")?;
        self.touch(&pointer);
        self.host.count_write();
        crate::state::modify(self.state(), &pointer, &self.writes, edit).await
    }

    /// As [`Ctx::create`].
    pub async fn create<T: Resource>(&self, resource: Typed<T>) -> Result<Typed<T>> {
        Typed::try_from(self.write(resource.into_stored(), Write::Create).await?)
    }

    /// Creates a resource of any type.
    pub async fn create_dynamic(&self, resource: DynamicResource) -> Result<DynamicResource> {
        self.write(resource, Write::Create).await
    }

    /// As [`Ctx::update`].
    pub async fn update<T: Resource>(&self, resource: Typed<T>) -> Result<Typed<T>> {
        Typed::try_from(self.write(resource.into_stored(), Write::Update).await?)
    }

    /// Updates a resource of any type.
    pub async fn update_dynamic(&self, resource: DynamicResource) -> Result<DynamicResource> {
        self.write(resource, Write::Update).await
    }

    /// A create or an update as the controller, through the state's
    /// immediate path when it has one.
    async fn write(&self, resource: DynamicResource, write: Write) -> Result<DynamicResource> {
        let pointer = resource.metadata().pointer();
        let operation = match write {
            Write::Create => "create",
            Write::Update => "update",
        };
        self.check_write(pointer, operation)?;
        self.touch(pointer);
        self.host.count_write();
        let state = self.state();
        let immediate = match write {
            Write::Create => crate::state::create_now(state, resource, &self.creates),
            Write::Update => crate::state::update_now(state, resource, &self.writes),
        };
        let resource = match immediate {
            Immediate::Done(result) => return result,
            Immediate::Deferred(resource) => resource,
        };
        match write {
            Write::Create => state.create_dynamic(resource, self.creates.clone()).await,
            Write::Update => state.update_dynamic(resource, self.writes.clone()).await,
        }
    }

    /// As [`Ctx::teardown`].
    pub async fn teardown<T: Resource>(&self, at: impl At<T>) -> Result<bool> {
        self.teardown_dynamic(&expect_type::<T>(at)?).await
    }

    /// Tears down a resource of any type.
    pub async fn teardown_dynamic(&self, pointer: &Pointer) -> Result<bool> {
        self.check_write(pointer, "teardown")?;
        self.host.count_write();
        self.state().teardown_dynamic(pointer, TeardownOptions::owner(self.name())).await
    }

    /// As [`Ctx::destroy`].
    pub async fn destroy<T: Resource>(&self, at: impl At<T>) -> Result<()> {
        self.destroy_dynamic(&expect_type::<T>(at)?).await
    }

    /// Destroys a resource of any type.
    pub async fn destroy_dynamic(&self, pointer: &Pointer) -> Result<()> {
        self.check_write(pointer, "destroy")?;
        self.host.count_write();
        self.state().destroy_dynamic(pointer, DestroyOptions::owner(self.name())).await
    }

    /// Tears down an output of another owner, or of none (`None`): for the
    /// generic controllers that remove what nobody owns (COSI's `WithOwner`).
    pub(crate) async fn teardown_as(&self, pointer: &Pointer, owner: Option<&str>) -> Result<bool> {
        self.check_write(pointer, "teardown")?;
        self.host.count_write();
        let options = TeardownOptions { owner: owner.map(Into::into) };
        self.state().teardown_dynamic(pointer, options).await
    }

    /// Destroys an output of another owner, or of none: see [`DynCtx::teardown_as`].
    pub(crate) async fn destroy_as(&self, pointer: &Pointer, owner: Option<&str>) -> Result<()> {
        self.check_write(pointer, "destroy")?;
        self.host.count_write();
        self.state().destroy_dynamic(pointer, DestroyOptions { owner: owner.map(Into::into) }).await
    }

    /// As [`Ctx::add_finalizers`].
    pub async fn add_finalizers<T: Resource>(&self, at: impl At<T>, finalizers: &[&str]) -> Result<()> {
        self.add_finalizers_dynamic(&expect_type::<T>(at)?, finalizers).await
    }

    /// Adds finalizers to an input of any type.
    pub async fn add_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<()> {
        self.check_finalizers(pointer)?;
        self.host.count_write();
        self.state().add_finalizers_dynamic(pointer, finalizers).await.map(drop)
    }

    /// As [`Ctx::remove_finalizers`].
    pub async fn remove_finalizers<T: Resource>(&self, at: impl At<T>, finalizers: &[&str]) -> Result<()> {
        self.remove_finalizers_dynamic(&expect_type::<T>(at)?, finalizers).await
    }

    /// Removes finalizers from an input of any type; succeeds when the resource is gone.
    pub async fn remove_finalizers_dynamic(&self, pointer: &Pointer, finalizers: &[&str]) -> Result<()> {
        self.check_finalizers(pointer)?;
        self.host.count_write();
        self.state().remove_finalizers_dynamic(pointer, finalizers).await.ignore_not_found()?;
        Ok(())
    }

    /// As [`Ctx::cleanup_outputs`].
    pub async fn cleanup_outputs<T: Resource>(&self) -> Result<()> {
        self.cleanup_outputs_in::<T>(T::NAMESPACE).await
    }

    /// As [`Ctx::cleanup_outputs_in`].
    pub async fn cleanup_outputs_in<T: Resource>(&self, namespace: &str) -> Result<()> {
        self.cleanup_outputs_dynamic(&Kind::new(namespace, T::TYPE)).await
    }

    /// Removes the outputs of `kind` this controller owns and did not write in this reconcile.
    pub async fn cleanup_outputs_dynamic(&self, kind: &Kind) -> Result<()> {
        self.check_write(&kind.pointer("*"), "clean up")?;
        if self.is_queue() {
            return Err(Error::invalid_argument(format!(
                "controller `{}` cannot clean up outputs: output tracking is for reconcile controllers, \
                 which write all their outputs in each reconcile",
                self.name()
            )));
        }
        let touched: HashSet<Pointer> = self.touched.lock().iter().cloned().collect();
        for resource in self.list_dynamic(kind, &ListOptions::default()).await? {
            let metadata = resource.metadata();
            if metadata.owner() != Some(self.name()) {
                continue;
            }
            // An output tearing down is a previous generation even when its ID
            // was written in this reconcile: that write failed on its phase.
            let ready = match metadata.phase() {
                Phase::Running if touched.contains(metadata.pointer()) => continue,
                Phase::Running => self.teardown_dynamic(metadata.pointer()).await?,
                Phase::TearingDown => metadata.finalizers().is_empty(),
            };
            if ready {
                self.destroy_dynamic(metadata.pointer()).await.ignore_not_found()?;
            }
        }
        Ok(())
    }

    /// As [`Ctx::until_teardown`].
    pub async fn until_teardown<T: Resource>(&self, at: impl At<T>) -> Result<TeardownSignal> {
        self.until_teardown_dynamic(&expect_type::<T>(at)?).await
    }

    /// Resolves once a resource of any type is tearing down or gone.
    pub async fn until_teardown_dynamic(&self, pointer: &Pointer) -> Result<TeardownSignal> {
        self.check_read(pointer)?;
        let mut watch = self.state().watch_dynamic(pointer, WatchOptions::default()).await?;
        Ok(Box::pin(async move {
            while let Some(event) = watch.recv().await {
                match event {
                    Event::Created { resource, .. } | Event::Updated { resource, .. }
                        if resource.metadata().phase() == Phase::Running => {}
                    _ => return,
                }
            }
        }))
    }

    /// As [`Ctx::update_inputs`].
    pub fn update_inputs(&self, inputs: impl IntoIterator<Item = Input>) -> Result<()> {
        self.host.update_inputs(inputs.into_iter().collect())
    }

    /// As [`Ctx::requeue`]; for a queue controller, queues every item of its
    /// primary inputs again, as [`Waker::wake`] does.
    pub fn requeue(&self) {
        self.host.requeue();
    }

    /// As [`Ctx::reset_backoff`]; nothing for a reconcile controller, whose
    /// backoff starts again after each reconcile that succeeds.
    pub fn reset_backoff(&self, item: &Pointer) {
        self.host.reset_backoff(item);
    }

    /// As [`Ctx::waker`].
    pub fn waker(&self) -> Waker {
        Waker::new(&self.host)
    }

    /// The inputs the controller has now.
    pub fn inputs(&self) -> Arc<[Input]> {
        self.host.inputs()
    }

    /// Whether `kind` is one of the controller's input kinds of the given dependency.
    pub fn has_input(&self, kind: &Kind, dependency: InputKind) -> bool {
        self.host.inputs().iter().any(|input| &input.kind == kind && input.dependency == dependency)
    }
}

fn expect_type<T: Resource>(at: impl At<T>) -> Result<Pointer> {
    let pointer = at.pointer();
    if pointer.r#type() == T::TYPE {
        return Ok(pointer);
    }
    Err(Error::invalid_argument(format!("resource {pointer} is not of type {:?}", T::TYPE)))
}
