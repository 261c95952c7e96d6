//! What the cases share: imports, resources and names, and steps that check events and results.

pub(super) use std::collections::VecDeque;
pub(super) use std::fmt::{self, Display};
pub(super) use std::future::Future;
pub(super) use std::hash::{BuildHasher, RandomState};
pub(super) use std::sync::Arc;
pub(super) use std::sync::atomic::{AtomicU64, Ordering};
pub(super) use std::time::SystemTime;

pub(super) use tokio::task::JoinHandle;

pub(super) use crate::resource::{
    DynamicResource, EncodedSpec, IdQuery, Kind, LabelOp, LabelQuery, LabelTerm, Labels, Metadata, Phase, Pointer,
    Resource, Typed, Version,
};
pub(super) use crate::state::{
    Bookmark, CreateOptions, DestroyOptions, Error, Event, EventType, ListOptions, Observer, Result, State, StateExt,
    TeardownOptions, UpdateOptions, Watch, WatchCondition, WatchKindOptions, WatchOptions,
};
pub(super) use crate::testing::resources::{ENCODED_TYPE, PathResource, encoded_resource};

pub(super) use super::{OVERRUN_WRITES, STEP_TIMEOUT};

/// The events of [`write_lifecycle`].
pub(super) const LIFECYCLE_EVENTS: usize = 5;

/// Create, teardown, add and remove a finalizer, destroy: five events.
pub(super) async fn write_lifecycle(state: &Arc<dyn State>, ns: &str, id: &str) {
    let pointer = path_pointer(ns, id);
    ok("create", state.create_dynamic(path(ns, id), CreateOptions::default())).await;
    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    assert!(ready);
    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
}

/// Creates `id` and updates it; returns the bookmark of the update event.
pub(super) async fn bookmark_of_update(state: &Arc<dyn State>, ns: &str, id: &str) -> Bookmark {
    let kind = path_kind(ns);
    let mut events = Reader::new(
        "the kind watch",
        ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await,
        false,
    );
    let created = ok(format!("create {id}"), state.create_dynamic(path(ns, id), CreateOptions::default())).await;
    ok(format!("update {id}"), state.update_dynamic(DynamicResource::clone(&created), UpdateOptions::default())).await;
    check_event(&events.next().await, EventType::Created, &path_pointer(ns, id));
    let event = events.next().await;
    check_event(&event, EventType::Updated, &path_pointer(ns, id));
    event.bookmark().unwrap_or_else(|| panic!("an updated event should carry a bookmark: {event:?}")).clone()
}

pub(super) fn spawn_watch_for(
    state: &Arc<dyn State>,
    pointer: &Pointer,
    condition: WatchCondition<PathResource>,
) -> JoinHandle<Result<Event>> {
    let (state, pointer) = (Arc::clone(state), pointer.clone());
    tokio::spawn(async move { watch_for_path(&state, &pointer, condition).await })
}

/// `watch_for` of a path resource, as an erased event.
pub(super) async fn watch_for_path(
    state: &Arc<dyn State>,
    pointer: &Pointer,
    condition: WatchCondition<PathResource>,
) -> Result<Event> {
    state.watch_for::<PathResource>(pointer, condition).await.map(Event::from)
}

pub(super) async fn expect_invalid_argument<T: fmt::Debug>(
    what: impl Display,
    future: impl Future<Output = Result<T>>,
) {
    let err = fails(&what, future).await;
    assert!(err.is_invalid_argument(), "{what}: expected an invalid argument, got {err:?}");
}

/// The error of an edit in [`modify`](super::crud::modify), which must come back untouched.
#[derive(Debug)]
pub(super) enum EditError {
    // Only ever printed, in the message of a failed assertion.
    State(#[allow(dead_code)] Error),
    Edit(&'static str),
}

impl From<Error> for EditError {
    fn from(err: Error) -> Self {
        EditError::State(err)
    }
}

// Fixtures.

/// A namespace no other case, run or process uses.
pub(super) fn namespace(case: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let random =
        RandomState::new().hash_one((SystemTime::now(), std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    format!("conformance-{case}-{random:016x}")
}

pub(super) fn path_kind(ns: &str) -> Kind {
    Kind::new(ns, PathResource::TYPE)
}

pub(super) fn path_pointer(ns: &str, id: &str) -> Pointer {
    Pointer::new(ns, PathResource::TYPE, id)
}

pub(super) fn path_typed(ns: &str, id: &str) -> Typed<PathResource> {
    Typed::new_in(ns, id, PathResource { value: id.to_owned() })
}

pub(super) fn path(ns: &str, id: &str) -> DynamicResource {
    path_typed(ns, id).into()
}

pub(super) fn path_with_version(ns: &str, id: &str, version: u64) -> DynamicResource {
    let mut resource = path(ns, id);
    resource.metadata_mut().set_version(Version::new(version));
    resource
}

pub(super) fn encoded_spec(text: &str) -> EncodedSpec {
    let mut proto = vec![0x0a, u8::try_from(text.len()).expect("a short text")];
    proto.extend_from_slice(text.as_bytes());
    EncodedSpec { proto, yaml: Some(format!("value: {text}\n")) }
}

pub(super) fn ids(resources: &[DynamicResource]) -> Vec<&str> {
    resources.iter().map(|resource| resource.id()).collect()
}

pub(super) fn finalizers(resource: &DynamicResource) -> Vec<&str> {
    resource.metadata().finalizers().iter().collect()
}

pub(super) fn typed_spec(resource: &DynamicResource) -> Typed<PathResource> {
    Typed::try_from(resource).unwrap_or_else(|err| panic!("{} should hold a PathResource: {err}", resource.metadata()))
}

/// A freshly created resource: version 1, running, unowned, no finalizers.
#[track_caller]
pub(super) fn assert_fresh(resource: &DynamicResource, pointer: &Pointer) {
    let metadata = resource.metadata();
    assert_eq!(*metadata.pointer(), *pointer);
    assert_eq!(metadata.version(), Version::new(1), "create should store version 1");
    assert_eq!(metadata.phase(), Phase::Running, "create should store a running resource");
    assert_eq!(metadata.owner(), None, "create without an owner should store an unowned resource");
    assert!(metadata.finalizers().is_empty());
}

/// The spec the fixtures write: the resource's own ID.
#[track_caller]
pub(super) fn assert_path_spec(resource: &DynamicResource) {
    assert_eq!(
        typed_spec(resource).value,
        resource.id(),
        "{}: the spec should come back as written",
        resource.metadata()
    );
}

/// Checks an event's type and resource; returns the resource.
#[track_caller]
pub(super) fn check_event<'a>(event: &'a Event, expected: EventType, pointer: &Pointer) -> &'a DynamicResource {
    assert_eq!(event.event_type(), expected, "expected a {expected:?} event of {pointer}, got {event:?}");
    let resource = resource_of(event);
    assert_eq!(*resource.metadata().pointer(), *pointer, "expected a {expected:?} event of {pointer}, got {event:?}");
    resource
}

/// The `Destroyed` event of `pointer`, with its last state or without.
#[track_caller]
pub(super) fn check_destroyed(event: &Event, pointer: &Pointer) {
    assert!(
        matches!(event, Event::Destroyed { pointer: destroyed, .. } if destroyed == pointer),
        "expected the destruction of {pointer}, got {event:?}"
    );
}

/// The `Destroyed` event of a resource the watch knows only as absent.
#[track_caller]
pub(super) fn check_absent(event: &Event, pointer: &Pointer) {
    check_destroyed(event, pointer);
    assert!(event.resource().is_none(), "expected {pointer} absent, got {event:?}");
}

#[track_caller]
pub(super) fn check_bootstrapped(event: &Event, kind: &Kind) {
    assert!(
        matches!(event, Event::Bootstrapped { kind: bootstrapped, .. } if bootstrapped == kind),
        "expected the bootstrapped event of {kind}, got {event:?}"
    );
}

#[track_caller]
pub(super) fn resource_of(event: &Event) -> &DynamicResource {
    event.resource().unwrap_or_else(|| panic!("expected an event with a resource, got {event:?}"))
}

/// Same type, resource and old resource; bookmarks aside.
#[track_caller]
pub(super) fn assert_same_event(actual: &Event, expected: &Event, what: &str) {
    let same = actual.event_type() == expected.event_type()
        && actual.resource() == expected.resource()
        && actual.old() == expected.old()
        && match (actual, expected) {
            (Event::Bootstrapped { kind: a, .. }, Event::Bootstrapped { kind: b, .. })
            | (Event::Noop { kind: a, .. }, Event::Noop { kind: b, .. }) => a == b,
            _ => true,
        };
    assert!(same, "{what}: expected {expected:?}, got {actual:?}");
}

// Guards against a hanging backend.

pub(super) async fn within<F: Future>(what: impl Display, future: F) -> F::Output {
    match tokio::time::timeout(STEP_TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {STEP_TIMEOUT:?} waiting for {what}"),
    }
}

pub(super) async fn ok<T>(what: impl Display, future: impl Future<Output = Result<T>>) -> T {
    match within(&what, future).await {
        Ok(value) => value,
        Err(err) => panic!("{what} failed: {err:?}"),
    }
}

pub(super) async fn fails<T: fmt::Debug>(what: impl Display, future: impl Future<Output = Result<T>>) -> Error {
    match within(&what, future).await {
        Ok(value) => panic!("{what} should have failed, got {value:?}"),
        Err(err) => err,
    }
}

/// Waits for a task, passing its panic on.
pub(super) async fn join<T>(what: impl Display, task: JoinHandle<T>) -> T {
    match within(&what, task).await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => panic!("{what} was cancelled: {err}"),
    }
}

/// Reads a watch event by event, or batch by batch for the aggregated variants.
pub(super) struct Reader {
    name: String,
    watch: Watch,
    aggregated: bool,
    /// What is left of the last batch read.
    pub(super) pending: VecDeque<Event>,
}

impl Reader {
    pub(super) fn new(name: impl Into<String>, watch: Watch, aggregated: bool) -> Self {
        Reader { name: name.into(), watch, aggregated, pending: VecDeque::new() }
    }

    /// The next event; panics when the watch ends.
    pub(super) async fn next(&mut self) -> Event {
        match self.try_next().await {
            Some(event) => event,
            None => panic!("{} ended unexpectedly", self.name),
        }
    }

    /// The next event, or `None` when the watch has ended.
    pub(super) async fn try_next(&mut self) -> Option<Event> {
        if let Some(event) = self.pending.pop_front() {
            return Some(event);
        }
        let what = format!("the next event of {}", self.name);
        if !self.aggregated {
            return within(what, self.watch.recv()).await;
        }
        let batch = within(what, self.watch.recv_batch()).await?;
        assert!(!batch.is_empty(), "{} delivered an empty batch", self.name);
        self.pending.extend(batch);
        self.pending.pop_front()
    }
}
