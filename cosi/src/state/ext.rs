//! Typed helpers on top of [`State`], and the default implementations of its
//! compound operations (teardown, finalizers), written against the primitive ones.

use std::future::Future;

use crate::resource::{At, DynamicResource, Kind, Phase, Pointer, Resource, Typed};
use crate::state::{
    CreateOptions, DestroyOptions, Error, Event, EventType, Immediate, ListOptions, Result, ResultExt, State,
    TeardownOptions, TypedWatch, UpdateOptions, WatchKindOptions, WatchOptions, create_now, get_now, list_now,
    phase_matches, update_now,
};

/// The typed face of every [`State`]: `use cosi::StateExt;` (or the prelude).
///
/// The naming rule of the whole API: a method with a plain name is typed (the
/// caller names the spec type, `state.get::<HostnameSpec>("default")`), and
/// its erased counterpart on [`State`], working with [`DynamicResource`]s,
/// [`Pointer`]s and [`Kind`]s, has the same name ending in `_dynamic`.
/// [`Ctx`](crate::Ctx) and [`DynCtx`](crate::controller::DynCtx) follow the same rule.
///
/// Where a resource is can be given as an ID (in the type's default
/// namespace), a [`Pointer`], or a resource read before: see [`At`].
/// Reads share the stored specs; nothing is deep-copied.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// state.create(Typed::new("default", HostnameSpec { hostname: "talos".into() }), CreateOptions::default()).await?;
/// assert_eq!(state.get::<HostnameSpec>("default").await?.hostname, "talos");
/// assert_eq!(state.list::<HostnameSpec>(&ListOptions::default()).await?.len(), 1);
/// # Ok(())
/// # }
/// ```
pub trait StateExt: State {
    /// The resource of type `T` at `at`.
    fn get<T: Resource>(&self, at: impl At<T>) -> impl Future<Output = Result<Typed<T>>> + Send {
        let pointer = at.pointer();
        async move {
            // In-process states answer at once, without a boxed future. The
            // answer is not a temporary of a `match` around the `await`, which
            // the future would keep (and every caller move) for nothing.
            if let Some(found) = get_now(self, &pointer) {
                return Typed::try_from(found?);
            }
            Typed::try_from(self.get_dynamic(&pointer).await?)
        }
    }

    /// The resources of type `T` in `T`'s default namespace that match `options`, sorted by ID.
    fn list<T: Resource>(&self, options: &ListOptions) -> impl Future<Output = Result<Vec<Typed<T>>>> + Send {
        self.list_in(T::NAMESPACE, options)
    }

    /// The resources of type `T` in `namespace` that match `options`, sorted by ID.
    fn list_in<T: Resource>(
        &self,
        namespace: &str,
        options: &ListOptions,
    ) -> impl Future<Output = Result<Vec<Typed<T>>>> + Send {
        let kind = Kind::of::<T>(namespace);
        async move {
            let resources = match list_now(self, &kind, options) {
                Some(listed) => listed?,
                None => self.list_dynamic(&kind, options).await?,
            };
            resources.into_iter().map(Typed::try_from).collect()
        }
    }

    /// Creates a resource; returns it as stored.
    fn create<T: Resource>(
        &self,
        resource: Typed<T>,
        options: CreateOptions,
    ) -> impl Future<Output = Result<Typed<T>>> + Send {
        write_typed(
            resource,
            options,
            |resource, options| create_now(self, resource, options),
            |resource, options| self.create_dynamic(resource, options),
        )
    }

    /// Replaces a resource (it must carry the stored version); returns it as stored.
    fn update<T: Resource>(
        &self,
        resource: Typed<T>,
        options: UpdateOptions,
    ) -> impl Future<Output = Result<Typed<T>>> + Send {
        write_typed(
            resource,
            options,
            |resource, options| update_now(self, resource, options),
            |resource, options| self.update_dynamic(resource, options),
        )
    }

    /// Removes the resource of type `T` at `at`, which must have no finalizers left.
    fn destroy<T: Resource>(&self, at: impl At<T>, options: DestroyOptions) -> impl Future<Output = Result<()>> + Send {
        let pointer = at.pointer();
        async move { self.destroy_dynamic(&pointer, options).await }
    }

    /// Moves the resource to the tearing-down phase; returns whether it has no
    /// finalizers left, that is whether it can be destroyed now.
    fn teardown<T: Resource>(
        &self,
        at: impl At<T>,
        options: TeardownOptions,
    ) -> impl Future<Output = Result<bool>> + Send {
        let pointer = at.pointer();
        async move { self.teardown_dynamic(&pointer, options).await }
    }

    /// Tears the resource down, waits until its finalizers are gone, then destroys it.
    fn teardown_and_destroy<T: Resource>(
        &self,
        at: impl At<T>,
        options: TeardownOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        let pointer = at.pointer();
        async move { self.teardown_and_destroy_dynamic(&pointer, options).await }
    }

    /// Adds finalizers to the resource, whoever owns it; returns it as stored.
    fn add_finalizers<T: Resource>(
        &self,
        at: impl At<T>,
        finalizers: &[&str],
    ) -> impl Future<Output = Result<Typed<T>>> + Send {
        let pointer = at.pointer();
        async move { Typed::try_from(self.add_finalizers_dynamic(&pointer, finalizers).await?) }
    }

    /// Removes finalizers from the resource, whoever owns it; returns it as stored.
    fn remove_finalizers<T: Resource>(
        &self,
        at: impl At<T>,
        finalizers: &[&str],
    ) -> impl Future<Output = Result<Typed<T>>> + Send {
        let pointer = at.pointer();
        async move { Typed::try_from(self.remove_finalizers_dynamic(&pointer, finalizers).await?) }
    }

    /// Watches one resource of type `T`: its current state first, then every change.
    fn watch<T: Resource>(
        &self,
        at: impl At<T>,
        options: WatchOptions,
    ) -> impl Future<Output = Result<TypedWatch<T>>> + Send {
        let pointer = at.pointer();
        async move { Ok(TypedWatch::new(self.watch_dynamic(&pointer, options).await?)) }
    }

    /// Watches every resource of type `T` in `T`'s default namespace.
    fn watch_kind<T: Resource>(&self, options: WatchKindOptions) -> impl Future<Output = Result<TypedWatch<T>>> + Send {
        self.watch_kind_in(T::NAMESPACE, options)
    }

    /// Watches every resource of type `T` in `namespace`.
    fn watch_kind_in<T: Resource>(
        &self,
        namespace: &str,
        options: WatchKindOptions,
    ) -> impl Future<Output = Result<TypedWatch<T>>> + Send {
        let kind = Kind::of::<T>(namespace);
        async move { Ok(TypedWatch::new(self.watch_kind_dynamic(&kind, options).await?)) }
    }

    /// Reads the resource, applies `edit` to a copy and writes it back, retrying
    /// when someone else wrote in between. Returns the resource as stored.
    ///
    /// When `edit` changes nothing, nothing is written: no event, no new version.
    /// The stored resource must be in `options.expected_phase`, else a phase
    /// conflict; an error from `edit` is returned as it is.
    fn update_with_conflicts<T, E>(
        &self,
        at: impl At<T>,
        options: UpdateOptions,
        edit: impl FnMut(&mut Typed<T>) -> Result<(), E> + Send,
    ) -> impl Future<Output = Result<Typed<T>, E>> + Send
    where
        T: Resource,
        E: From<Error> + Send,
    {
        let pointer = at.pointer();
        async move { update_typed_with(self, &pointer, &options, None, edit).await }
    }

    /// Creates the resource from `T::default()` with `edit` applied when it does
    /// not exist, else updates it as [`update_with_conflicts`](StateExt::update_with_conflicts) does:
    /// retried on conflicts, and not written at all when `edit` changes nothing.
    /// A create records `options.owner` as the owner.
    ///
    /// ```
    /// # use cosi::prelude::*;
    /// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
    /// # pub struct HostnameStatus { pub hostname: String }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> cosi::Result<()> {
    /// let state = cosi::state::memory();
    /// let status = state
    ///     .modify::<HostnameStatus>("default", UpdateOptions::owner("hostname"), |status| {
    ///         status.hostname = "talos".into()
    ///     })
    ///     .await?;
    /// assert_eq!(status.metadata().owner(), Some("hostname"));
    /// # Ok(())
    /// # }
    /// ```
    fn modify<T: Resource + Default>(
        &self,
        at: impl At<T>,
        options: UpdateOptions,
        mut edit: impl FnMut(&mut Typed<T>) + Send,
    ) -> impl Future<Output = Result<Typed<T>>> + Send {
        self.try_modify(at, options, move |resource| {
            edit(resource);
            Ok::<_, Error>(())
        })
    }

    /// [`modify`](StateExt::modify) with an edit that can fail; its error is returned as it is.
    fn try_modify<T, E>(
        &self,
        at: impl At<T>,
        options: UpdateOptions,
        edit: impl FnMut(&mut Typed<T>) -> Result<(), E> + Send,
    ) -> impl Future<Output = Result<Typed<T>, E>> + Send
    where
        T: Resource + Default,
        E: From<Error> + Send,
    {
        let pointer = at.pointer();
        async move { modify(self, &pointer, &options, edit).await }
    }

    /// Waits for the first event on the resource of type `T` at `at` that meets `condition`.
    ///
    /// The current state counts: the watch starts with the resource as it is
    /// (or a `Destroyed` event without a resource when it is absent).
    fn watch_for<T: Resource>(
        &self,
        at: impl At<T>,
        condition: WatchCondition<T>,
    ) -> impl Future<Output = Result<Event<Typed<T>>>> + Send {
        let pointer = at.pointer();
        async move {
            let mut watch = self.watch::<T>(&pointer, WatchOptions::default()).await?;
            while let Some(event) = watch.recv().await {
                if let Event::Errored { error } = event {
                    return Err(error);
                }
                if condition.matches(&event) {
                    return Ok(event);
                }
            }
            Err(Error::backend(WatchEnded(pointer.clone())))
        }
    }
}

impl<S: State + ?Sized> StateExt for S {}

/// What [`StateExt::watch_for`] waits for. Every condition set must hold.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// state.create(Typed::new("default", HostnameSpec::default()), CreateOptions::default()).await?;
/// state.add_finalizers::<HostnameSpec>("default", &["mine"]).await?;
/// state.teardown::<HostnameSpec>("default", TeardownOptions::default()).await?;
///
/// // Waits (here: not at all) until it is tearing down with a spec as wanted.
/// let condition = WatchCondition::new()
///     .phases([Phase::TearingDown])
///     .resource(|spec: &Typed<HostnameSpec>| spec.hostname.is_empty());
/// let event = state.watch_for::<HostnameSpec>("default", condition).await?;
/// assert!(event.resource().is_some());
/// # Ok(())
/// # }
/// ```
pub struct WatchCondition<T> {
    event_types: Vec<EventType>,
    phases: Vec<Phase>,
    finalizers_empty: bool,
    predicate: Option<Predicate<T>>,
}

type Predicate<T> = Box<dyn Fn(&Typed<T>) -> bool + Send + Sync>;

impl<T> Default for WatchCondition<T> {
    fn default() -> Self {
        WatchCondition { event_types: Vec::new(), phases: Vec::new(), finalizers_empty: false, predicate: None }
    }
}

impl<T> WatchCondition<T> {
    /// Matches the first event with a resource; add conditions to narrow it.
    ///
    /// A `Destroyed` event of a resource that was absent when the watch
    /// started carries no resource: it matches only a condition that names
    /// event types and nothing else (`event_types([EventType::Destroyed])`).
    pub fn new() -> Self {
        WatchCondition::default()
    }

    /// Only events of these types.
    #[must_use]
    pub fn event_types(mut self, types: impl IntoIterator<Item = EventType>) -> Self {
        self.event_types.extend(types);
        self
    }

    /// Only a resource in one of these phases.
    #[must_use]
    pub fn phases(mut self, phases: impl IntoIterator<Item = Phase>) -> Self {
        self.phases.extend(phases);
        self
    }

    /// Only a resource that exists and has no finalizers.
    #[must_use]
    pub fn finalizers_empty(mut self) -> Self {
        self.finalizers_empty = true;
        self
    }

    /// Only a resource for which `predicate` holds.
    #[must_use]
    pub fn resource(mut self, predicate: impl Fn(&Typed<T>) -> bool + Send + Sync + 'static) -> Self {
        self.predicate = Some(Box::new(predicate));
        self
    }
}

impl<T: Resource> WatchCondition<T> {
    fn matches(&self, event: &Event<Typed<T>>) -> bool {
        if !self.event_types.is_empty() && !self.event_types.contains(&event.event_type()) {
            return false;
        }
        let resource = match event {
            // An absent resource matches only a condition on the event type alone.
            Event::Destroyed { resource: None, .. } => {
                return !self.event_types.is_empty()
                    && self.predicate.is_none()
                    && self.phases.is_empty()
                    && !self.finalizers_empty;
            }
            _ => match event.resource() {
                Some(resource) => resource,
                None => return false,
            },
        };
        if self.predicate.as_ref().is_some_and(|predicate| !predicate(resource)) {
            return false;
        }
        if self.finalizers_empty
            && (event.event_type() == EventType::Destroyed || !resource.metadata().finalizers().is_empty())
        {
            return false;
        }
        self.phases.is_empty() || self.phases.contains(&resource.metadata().phase())
    }
}

impl<T> std::fmt::Debug for WatchCondition<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCondition")
            .field("event_types", &self.event_types)
            .field("phases", &self.phases)
            .field("finalizers_empty", &self.finalizers_empty)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the watch of {0} ended")]
struct WatchEnded(Pointer);

/// [`StateExt::try_modify`], with the options borrowed (a controller's
/// context writes with the same options every time).
pub(crate) async fn modify<S, T, E>(
    state: &S,
    pointer: &Pointer,
    options: &UpdateOptions,
    mut edit: impl FnMut(&mut Typed<T>) -> Result<(), E>,
) -> Result<Typed<T>, E>
where
    S: State + ?Sized,
    T: Resource + Default,
    E: From<Error>,
{
    loop {
        let found = match get_now(state, pointer) {
            Some(found) => found,
            None => state.get_dynamic(pointer).await,
        };
        match found {
            // The resource just read is the update's first read, not read again.
            Ok(current) => return update_typed_with(state, pointer, options, Some(current), &mut edit).await,
            Err(Error::NotFound(_)) => {}
            Err(err) => return Err(err.into()),
        }
        let mut fresh = Typed::new_in(pointer.namespace(), pointer.id(), T::default());
        if fresh.metadata().r#type() != pointer.r#type() {
            let reason = format!("cannot modify {pointer} as a {}: the type differs", T::TYPE);
            return Err(Error::invalid_argument(reason).into());
        }
        edit(&mut fresh)?;
        let create = CreateOptions { owner: options.owner.clone() };
        match state.create_dynamic(fresh.into(), create).await {
            Ok(stored) => return Ok(Typed::try_from(stored)?),
            // Someone created it meanwhile: update theirs instead.
            Err(Error::AlreadyExists(_)) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

/// Read, edit as `T`, write back; retry on version conflicts; skip the write
/// when nothing changed. Starts from `first` (a fresh read) when given. Reads
/// and writes go through the state's immediate paths when it has them, and
/// the edit works on the stored resource itself (shared until the edit
/// changes it), so an edit costs one copy of what it changes.
async fn update_typed_with<S, T, E, F>(
    state: &S,
    pointer: &Pointer,
    options: &UpdateOptions,
    mut first: Option<DynamicResource>,
    mut edit: F,
) -> Result<Typed<T>, E>
where
    S: State + ?Sized,
    T: Resource,
    E: From<Error>,
    F: FnMut(&mut Typed<T>) -> Result<(), E>,
{
    loop {
        let current = match first.take() {
            Some(current) => current,
            None => match get_now(state, pointer) {
                Some(found) => found?,
                None => state.get_dynamic(pointer).await?,
            },
        };
        let phase = current.metadata().phase();
        if !phase_matches(options.expected_phase, phase) {
            let expected = options.expected_phase.unwrap_or(phase);
            return Err(Error::PhaseConflict { pointer: pointer.clone(), expected }.into());
        }
        // Shares the stored resource (or its decoded reading): an edit that
        // changes anything copies it first, so `before` keeps what was read.
        let before = Typed::<T>::try_from(current.clone())?;
        let mut typed = before.clone();
        edit(&mut typed)?;
        if typed.shares_resource(before.as_dynamic()) {
            return Ok(before);
        }
        // The edit copied the resource: compare what it holds now.
        let spec_changed = typed.spec() != before.spec();
        if !spec_changed && typed.metadata() == current.metadata() {
            return Ok(before);
        }
        // An unchanged spec stays as stored: a spec that arrived encoded (from
        // a remote or durable state) never equals its typed reading.
        let mut next = match spec_changed || current.spec().downcast::<T>().is_some() {
            true => typed.into_stored(),
            false => current.with_metadata(typed.metadata().clone()),
        };
        // The version is the state's to manage; an edit cannot move it.
        next.metadata_mut().set_version(current.metadata().version());
        let written = match update_now(state, next, options) {
            Immediate::Done(result) => result,
            Immediate::Deferred(next) => state.update_dynamic(next, options.clone()).await,
        };
        match written {
            Err(Error::VersionConflict { .. }) => continue,
            result => return Ok(Typed::try_from(result?)?),
        }
    }
}

/// Read, edit, write back; retry on version conflicts; skip the write when
/// nothing changed. The dynamic counterpart of [`update_typed_with`], for the
/// compound operations (teardown, finalizers).
pub(crate) async fn update_with<S, E, F>(
    state: &S,
    pointer: &Pointer,
    options: UpdateOptions,
    mut edit: F,
) -> Result<DynamicResource, E>
where
    S: State + ?Sized,
    E: From<Error>,
    F: FnMut(&mut DynamicResource) -> Result<(), E>,
{
    loop {
        let current = state.get_dynamic(pointer).await?;
        let phase = current.metadata().phase();
        if !phase_matches(options.expected_phase, phase) {
            let expected = options.expected_phase.unwrap_or(phase);
            return Err(Error::PhaseConflict { pointer: pointer.clone(), expected }.into());
        }
        let mut next = current.clone();
        edit(&mut next)?;
        // An edit that changed nothing left the resource shared: no copy to
        // make just to set the version it already has.
        if DynamicResource::ptr_eq(&next, &current) {
            return Ok(current);
        }
        // The version is the state's to manage; an edit cannot move it.
        next.metadata_mut().set_version(current.metadata().version());
        if next.metadata() == current.metadata() && next.spec() == current.spec() {
            return Ok(current);
        }
        match state.update_dynamic(next, options.clone()).await {
            Err(Error::VersionConflict { .. }) => continue,
            result => return result.map_err(E::from),
        }
    }
}

pub(crate) async fn teardown<S: State + ?Sized>(
    state: &S,
    pointer: &Pointer,
    options: TeardownOptions,
) -> Result<bool> {
    let current = state.get_dynamic(pointer).await?;
    // Already torn down, by its owner or another: nothing to write, so
    // nothing to check the owner for (as in Go COSI).
    if current.metadata().phase() == Phase::TearingDown {
        return Ok(current.metadata().finalizers().is_empty());
    }
    // An empty owner is none, as `Metadata::set_owner` has it.
    if current.metadata().owner() != options.owner.as_deref().filter(|owner| !owner.is_empty()) {
        return Err(Error::OwnerConflict {
            pointer: pointer.clone(),
            owner: current.metadata().owner().map(Into::into),
        });
    }
    let update = UpdateOptions { owner: options.owner, expected_phase: Some(Phase::Running) };
    let stored = match update_with(state, pointer, update, |resource| {
        resource.metadata_mut().set_phase(Phase::TearingDown);
        Ok::<_, Error>(())
    })
    .await
    {
        Ok(stored) => stored,
        // Someone else started the teardown in between: that is what we wanted.
        Err(Error::PhaseConflict { .. }) => state.get_dynamic(pointer).await?,
        Err(err) => return Err(err),
    };
    Ok(stored.metadata().finalizers().is_empty())
}

/// A create or an update of `resource`, read back as a `T`: through the
/// state's immediate path (`now`) when it has one, so that in-memory states
/// write at once, without a boxed future (and, as in `get`, without an
/// answer kept across the `await`); through `later` otherwise.
async fn write_typed<T: Resource, O, F: Future<Output = Result<DynamicResource>>>(
    resource: Typed<T>,
    options: O,
    now: impl FnOnce(DynamicResource, &O) -> Immediate<DynamicResource>,
    later: impl FnOnce(DynamicResource, O) -> F,
) -> Result<Typed<T>> {
    let deferred = match now(resource.into_stored(), &options) {
        Immediate::Done(result) => return Typed::try_from(result?),
        Immediate::Deferred(resource) => resource,
    };
    Typed::try_from(later(deferred, options).await?)
}

pub(crate) async fn teardown_and_destroy<S: State + ?Sized>(
    state: &S,
    pointer: &Pointer,
    options: TeardownOptions,
) -> Result<()> {
    let destroy = options.clone();
    if state.teardown_dynamic(pointer, options).await? {
        match state.destroy_dynamic(pointer, destroy.clone()).await.ignore_not_found() {
            Ok(_) => return Ok(()),
            // A finalizer was added after the teardown: wait for it like for the others.
            Err(Error::PendingFinalizers { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    let mut watch = state.watch_dynamic(pointer, WatchOptions::default()).await?;
    while let Some(event) = watch.recv().await {
        match event {
            Event::Destroyed { .. } => return Ok(()),
            Event::Created { resource, .. } | Event::Updated { resource, .. }
                if resource.metadata().finalizers().is_empty() =>
            {
                match state.destroy_dynamic(pointer, destroy.clone()).await.ignore_not_found() {
                    Ok(_) => return Ok(()),
                    Err(Error::PendingFinalizers { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
            Event::Errored { error } => return Err(error),
            _ => {}
        }
    }
    Err(Error::backend(WatchEnded(pointer.clone())))
}

pub(crate) async fn edit_finalizers<S: State + ?Sized>(
    state: &S,
    pointer: &Pointer,
    finalizers: &[&str],
    add: bool,
) -> Result<DynamicResource> {
    loop {
        // Finalizers may be edited whoever owns the resource: write as its owner.
        let owner = state.get_dynamic(pointer).await?.metadata().owner().map(str::to_owned);
        let options = UpdateOptions { owner, expected_phase: None };
        let result = update_with(state, pointer, options, |resource| {
            let current = resource.metadata_mut().finalizers_mut();
            for finalizer in finalizers {
                if add {
                    current.add(*finalizer);
                } else {
                    current.remove(finalizer);
                }
            }
            Ok::<_, Error>(())
        })
        .await;
        match result {
            // Destroyed and created again by another owner in between: read the new owner.
            Err(Error::OwnerConflict { .. }) => continue,
            result => return result,
        }
    }
}
