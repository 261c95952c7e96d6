//! Typed helpers on top of [`State`], and the default implementations of its
//! compound operations (teardown, finalizers), written against the primitive ones.

use std::future::Future;
use std::sync::Arc;

use crate::resource::{DynamicResource, Phase, Pointer, Resource, Typed};
use crate::state::{
    CreateOptions, DestroyOptions, Error, Event, EventType, ListOptions, Result, State, TeardownOptions, UpdateOptions,
    WatchOptions, phase_matches,
};

/// Typed helpers for every [`State`]: `use cosi::StateExt;` (or the prelude).
///
/// Reads share the stored specs; nothing is deep-copied.
pub trait StateExt: State {
    /// The resource `id` of type `T` in `T`'s default namespace.
    fn get_typed<T: Resource>(&self, id: &str) -> impl Future<Output = Result<Typed<T>>> + Send {
        async move { self.get_typed_at(&T::pointer(id)).await }
    }

    /// The resource of type `T` at `pointer`.
    fn get_typed_at<T: Resource>(&self, pointer: &Pointer) -> impl Future<Output = Result<Typed<T>>> + Send {
        async move { Typed::try_from(self.get(pointer).await?) }
    }

    /// The resources of type `T` in `T`'s default namespace, sorted by ID.
    fn list_typed<T: Resource>(&self, options: &ListOptions) -> impl Future<Output = Result<Vec<Typed<T>>>> + Send {
        self.list_typed_in(T::NAMESPACE, options)
    }

    /// The resources of type `T` in `namespace`, sorted by ID.
    fn list_typed_in<T: Resource>(
        &self,
        namespace: &str,
        options: &ListOptions,
    ) -> impl Future<Output = Result<Vec<Typed<T>>>> + Send {
        let kind = crate::resource::Kind::new(namespace, T::TYPE);
        async move { self.list(&kind, options).await?.into_iter().map(Typed::try_from).collect() }
    }

    /// Creates a typed resource; returns it as stored.
    fn create_typed<T: Resource>(
        &self,
        resource: Typed<T>,
        options: CreateOptions,
    ) -> impl Future<Output = Result<Typed<T>>> + Send {
        async move { Typed::try_from(self.create(resource.into(), options).await?) }
    }

    /// Updates a typed resource; returns it as stored.
    fn update_typed<T: Resource>(
        &self,
        resource: Typed<T>,
        options: UpdateOptions,
    ) -> impl Future<Output = Result<Typed<T>>> + Send {
        async move { Typed::try_from(self.update(resource.into(), options).await?) }
    }

    /// Reads the resource, applies `edit` to a copy and writes it back, retrying
    /// when someone else wrote in between. Returns the resource as stored.
    ///
    /// When `edit` changes nothing, nothing is written: no event, no new version.
    /// The stored resource must be in `options.expected_phase`, else a phase
    /// conflict; an error from `edit` is returned as it is.
    fn update_with_conflicts<T, E, F>(
        &self,
        pointer: &Pointer,
        options: UpdateOptions,
        edit: F,
    ) -> impl Future<Output = Result<Typed<T>, E>> + Send
    where
        T: Resource,
        E: From<Error> + Send,
        F: FnMut(&mut Typed<T>) -> Result<(), E> + Send,
    {
        update_typed_with(self, pointer, options, None, edit)
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
    /// let pointer = HostnameStatus::pointer("default");
    /// let status = state
    ///     .modify(&pointer, UpdateOptions::owner("hostname"), |status: &mut Typed<HostnameStatus>| {
    ///         status.hostname = "talos".into()
    ///     })
    ///     .await?;
    /// assert_eq!(status.metadata().owner(), Some("hostname"));
    /// # Ok(())
    /// # }
    /// ```
    fn modify<T, F>(
        &self,
        pointer: &Pointer,
        options: UpdateOptions,
        mut edit: F,
    ) -> impl Future<Output = Result<Typed<T>>> + Send
    where
        T: Resource + Default,
        F: FnMut(&mut Typed<T>) + Send,
    {
        self.try_modify(pointer, options, move |resource| {
            edit(resource);
            Ok::<_, Error>(())
        })
    }

    /// [`modify`](StateExt::modify) with an edit that can fail; its error is returned as it is.
    fn try_modify<T, E, F>(
        &self,
        pointer: &Pointer,
        options: UpdateOptions,
        mut edit: F,
    ) -> impl Future<Output = Result<Typed<T>, E>> + Send
    where
        T: Resource + Default,
        E: From<Error> + Send,
        F: FnMut(&mut Typed<T>) -> Result<(), E> + Send,
    {
        async move {
            loop {
                match self.get(pointer).await {
                    // The resource just read is the update's first read, not read again.
                    Ok(current) => {
                        return update_typed_with(self, pointer, options.clone(), Some(current), &mut edit).await;
                    }
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
                match self.create(fresh.into(), create).await {
                    Ok(stored) => return Ok(Typed::try_from(stored)?),
                    // Someone created it meanwhile: update theirs instead.
                    Err(Error::AlreadyExists(_)) => continue,
                    Err(err) => return Err(err.into()),
                }
            }
        }
    }

    /// Waits for the first event on the resource at `pointer` that meets `condition`.
    ///
    /// The current state counts: the watch starts with the resource as it is
    /// (or a `Destroyed` tombstone when it is absent).
    fn watch_for(&self, pointer: &Pointer, condition: WatchCondition) -> impl Future<Output = Result<Event>> + Send {
        async move {
            let mut watch = self.watch(pointer, WatchOptions::default()).await?;
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
#[derive(Default)]
pub struct WatchCondition {
    event_types: Vec<EventType>,
    phases: Vec<Phase>,
    finalizers_empty: bool,
    predicate: Option<Predicate>,
}

type Predicate = Box<dyn Fn(&DynamicResource) -> bool + Send + Sync>;

impl WatchCondition {
    /// Matches the first event with a resource.
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
    pub fn resource(mut self, predicate: impl Fn(&DynamicResource) -> bool + Send + Sync + 'static) -> Self {
        self.predicate = Some(Box::new(predicate));
        self
    }

    fn matches(&self, event: &Event) -> bool {
        if !self.event_types.is_empty() && !self.event_types.contains(&event.event_type()) {
            return false;
        }
        let Some(resource) = event.resource() else { return false };
        if self.predicate.as_ref().is_some_and(|predicate| !predicate(resource)) {
            return false;
        }
        if self.finalizers_empty
            && (event.event_type() == EventType::Destroyed || !resource.metadata.finalizers().is_empty())
        {
            return false;
        }
        self.phases.is_empty() || self.phases.contains(&resource.metadata.phase())
    }
}

impl std::fmt::Debug for WatchCondition {
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

/// [`update_with`] through a typed edit, from `first` (a fresh read) when given.
async fn update_typed_with<S, T, E, F>(
    state: &S,
    pointer: &Pointer,
    options: UpdateOptions,
    first: Option<Arc<DynamicResource>>,
    mut edit: F,
) -> Result<Typed<T>, E>
where
    S: State + ?Sized,
    T: Resource,
    E: From<Error>,
    F: FnMut(&mut Typed<T>) -> Result<(), E>,
{
    let stored = update_from(state, pointer, options, first, |resource| -> Result<(), E> {
        let mut typed = Typed::<T>::try_from(&*resource)?;
        let before = Arc::clone(typed.spec_arc());
        edit(&mut typed)?;
        match Arc::ptr_eq(typed.spec_arc(), &before) || *typed.spec() == *before {
            // Keep the stored spec as it is: a spec that arrived encoded (from a
            // remote or durable state) never equals its typed reading, so
            // replacing it would turn a no-op edit into a write.
            true => resource.metadata = typed.metadata().clone(),
            false => *resource = typed.into(),
        }
        Ok(())
    })
    .await?;
    Ok(Typed::try_from(stored)?)
}

/// Read, edit, write back; retry on version conflicts; skip the write when nothing changed.
pub(crate) async fn update_with<S, E, F>(
    state: &S,
    pointer: &Pointer,
    options: UpdateOptions,
    edit: F,
) -> Result<Arc<DynamicResource>, E>
where
    S: State + ?Sized,
    E: From<Error>,
    F: FnMut(&mut DynamicResource) -> Result<(), E>,
{
    update_from(state, pointer, options, None, edit).await
}

/// [`update_with`], starting from `first` when the caller has just read the resource.
async fn update_from<S, E, F>(
    state: &S,
    pointer: &Pointer,
    options: UpdateOptions,
    mut first: Option<Arc<DynamicResource>>,
    mut edit: F,
) -> Result<Arc<DynamicResource>, E>
where
    S: State + ?Sized,
    E: From<Error>,
    F: FnMut(&mut DynamicResource) -> Result<(), E>,
{
    loop {
        let current = match first.take() {
            Some(current) => current,
            None => state.get(pointer).await?,
        };
        let phase = current.metadata.phase();
        if !phase_matches(options.expected_phase, phase) {
            let expected = options.expected_phase.unwrap_or(phase);
            return Err(Error::PhaseConflict { pointer: pointer.clone(), expected }.into());
        }
        let mut next = DynamicResource::clone(&current);
        edit(&mut next)?;
        // The version is the state's to manage; an edit cannot move it.
        next.metadata.set_version(current.metadata.version());
        if unchanged(&next, &current) {
            return Ok(current);
        }
        match state.update(next, options.clone()).await {
            Err(Error::VersionConflict { .. }) => continue,
            result => return result.map_err(E::from),
        }
    }
}

/// Whether an edit left the resource as it was. A typed edit that changed no
/// field keeps the stored spec itself ([`update_typed_with`]), so a spec that
/// a remote or durable backend handed out encoded compares equal too.
fn unchanged(next: &DynamicResource, current: &DynamicResource) -> bool {
    next.metadata == current.metadata && next.spec == current.spec
}

pub(crate) async fn teardown<S: State + ?Sized>(
    state: &S,
    pointer: &Pointer,
    options: TeardownOptions,
) -> Result<bool> {
    let current = state.get(pointer).await?;
    if current.metadata.owner() != options.owner.as_deref() {
        return Err(Error::OwnerConflict { pointer: pointer.clone(), owner: current.metadata.owner().map(Into::into) });
    }
    if current.metadata.phase() == Phase::TearingDown {
        return Ok(current.metadata.finalizers().is_empty());
    }
    let update = UpdateOptions { owner: options.owner, expected_phase: Some(Phase::Running) };
    let stored = match update_with(state, pointer, update, |resource| {
        resource.metadata.set_phase(Phase::TearingDown);
        Ok::<_, Error>(())
    })
    .await
    {
        Ok(stored) => stored,
        // Someone else started the teardown in between: that is what we wanted.
        Err(Error::PhaseConflict { .. }) => state.get(pointer).await?,
        Err(err) => return Err(err),
    };
    Ok(stored.metadata.finalizers().is_empty())
}

pub(crate) async fn teardown_and_destroy<S: State + ?Sized>(
    state: &S,
    pointer: &Pointer,
    options: TeardownOptions,
) -> Result<()> {
    let destroy = DestroyOptions { owner: options.owner.clone() };
    if state.teardown(pointer, options).await? {
        match state.destroy(pointer, destroy.clone()).await {
            Ok(()) | Err(Error::NotFound(_)) => return Ok(()),
            // A finalizer was added after the teardown: wait for it like for the others.
            Err(Error::PendingFinalizers { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    let mut watch = state.watch(pointer, WatchOptions::default()).await?;
    while let Some(event) = watch.recv().await {
        match event {
            Event::Destroyed { .. } => return Ok(()),
            Event::Created { resource, .. } | Event::Updated { resource, .. }
                if resource.metadata.finalizers().is_empty() =>
            {
                match state.destroy(pointer, destroy.clone()).await {
                    Ok(()) | Err(Error::NotFound(_)) => return Ok(()),
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
) -> Result<Arc<DynamicResource>> {
    loop {
        // Finalizers may be edited whoever owns the resource: write as its owner.
        let owner = state.get(pointer).await?.metadata.owner().map(str::to_owned);
        let options = UpdateOptions { owner, expected_phase: None };
        let result = update_with(state, pointer, options, |resource| {
            let current = resource.metadata.finalizers_mut();
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
