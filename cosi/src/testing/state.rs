//! The state conformance cases: one `pub async fn` per case, each taking the backend under test.
//!
//! The cases up to [`modify_with_owner`] port Go COSI's `StateSuite` with the
//! same assertions (often stricter: where Go checks that an expected event
//! arrives eventually, these check the exact sequence). The rest pin down the
//! Rust contract: the compound operations every backend inherits from
//! [`State`]'s default methods, buffer overruns, bookmark validation and
//! resumption, and input validation.
//!
//! Each case panics with a message naming what went wrong; each works in
//! namespaces of its own, so it can run against a shared backend. Run them
//! all with [`state_conformance_tests!`](crate::state_conformance_tests).

use std::collections::VecDeque;
use std::fmt::{self, Display};
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;

use crate::resource::{
    DynamicResource, EncodedSpec, IdQuery, Kind, LabelOp, LabelQuery, LabelTerm, Labels, Metadata, Phase, Pointer,
    Resource, Spec, Typed, Version,
};
use crate::state::{
    Bookmark, CreateOptions, DestroyOptions, Error, Event, EventType, ListOptions, Result, State, StateExt,
    TeardownOptions, UpdateOptions, Watch, WatchCondition, WatchKindOptions, WatchOptions,
};
use crate::testing::resources::{ENCODED_TYPE, PathResource, encoded_resource};

/// How long one step of a case (a call, an event, a joined task) may take.
///
/// A guard against a backend that hangs, so that it fails the case rather
/// than the whole test run; no case relies on it for timing.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// How many events [`buffer_overrun`] writes without reading: more than any
/// backend's watch history should hold (the in-memory default keeps 1024).
pub const OVERRUN_WRITES: u64 = 10_000;

/// Create, read, list, teardown and destroy; IDs with slashes and spaces; an encoded spec.
pub async fn crd(state: Arc<dyn State>) {
    let ns = namespace("crd");
    let kind = path_kind(&ns);
    let run = path_pointer(&ns, "var/run");
    let lib = path_pointer(&ns, "var/lib");

    for pointer in [&run, &lib] {
        let err = fails(format!("get of the missing {pointer}"), state.get_dynamic(pointer)).await;
        assert!(err.is_not_found(), "get of the missing {pointer}: expected not found, got {err:?}");
        assert_eq!(err.pointer(), Some(pointer), "the not found error should name the resource");
    }
    let listed = ok("list of an empty kind", state.list_dynamic(&kind, &ListOptions::default())).await;
    assert!(listed.is_empty(), "a fresh namespace should list nothing, got {:?}", ids(&listed));

    let created_run = ok("create var/run", state.create_dynamic(path(&ns, "var/run"), CreateOptions::default())).await;
    assert_fresh(&created_run, &run);
    let created_lib = ok("create var/lib", state.create_dynamic(path(&ns, "var/lib"), CreateOptions::default())).await;
    assert_fresh(&created_lib, &lib);

    for created in [&created_run, &created_lib] {
        let pointer = created.metadata.pointer();
        let got = ok(format!("get {pointer}"), state.get_dynamic(pointer)).await;
        assert_eq!(got.metadata, created.metadata, "get should return what create stored");
        assert_path_spec(&got);
    }
    let listed = ok("list", state.list_dynamic(&kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["var/lib", "var/run"], "list should return both resources, sorted by ID");
    listed.iter().for_each(|resource| assert_path_spec(resource));

    let err =
        fails("create of an existing resource", state.create_dynamic(path(&ns, "var/run"), CreateOptions::default()))
            .await;
    assert!(
        matches!(&err, Error::AlreadyExists(pointer) if *pointer == run) && err.is_conflict(),
        "create of an existing resource: expected already exists, got {err:?}"
    );

    let ready = ok("teardown var/run", state.teardown_dynamic(&run, TeardownOptions::default())).await;
    assert!(ready, "a resource without finalizers should be ready to destroy after teardown");
    ok("destroy var/run", state.destroy_dynamic(&run, DestroyOptions::default())).await;

    let err = fails("teardown of a destroyed resource", state.teardown_dynamic(&run, TeardownOptions::default())).await;
    assert!(err.is_not_found(), "teardown of a destroyed resource: expected not found, got {err:?}");
    let err = fails("destroy of a destroyed resource", state.destroy_dynamic(&run, DestroyOptions::default())).await;
    assert!(err.is_not_found(), "destroy of a destroyed resource: expected not found, got {err:?}");
    let err = fails("get of a destroyed resource", state.get_dynamic(&run)).await;
    assert!(err.is_not_found(), "get of a destroyed resource: expected not found, got {err:?}");

    let listed = ok("list after destroy", state.list_dynamic(&kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["var/lib"], "list after destroying var/run");

    let ready = ok("teardown var/lib", state.teardown_dynamic(&lib, TeardownOptions::default())).await;
    assert!(ready, "a resource without finalizers should be ready to destroy after teardown");

    let recreated =
        ok("create of a destroyed resource", state.create_dynamic(path(&ns, "var/run"), CreateOptions::default()))
            .await;
    assert_fresh(&recreated, &run);

    // IDs are arbitrary text: a lone slash and a space must round-trip too.
    for id in ["/", "a b"] {
        let created = ok(format!("create {id:?}"), state.create_dynamic(path(&ns, id), CreateOptions::default())).await;
        assert_fresh(&created, &path_pointer(&ns, id));
        let got = ok(format!("get {id:?}"), state.get_dynamic(&path_pointer(&ns, id))).await;
        assert_eq!(got.id(), id);
        assert_path_spec(&got);
    }
    let listed = ok("list", state.list_dynamic(&kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["/", "a b", "var/lib", "var/run"], "list should sort by ID, byte-wise");

    // A spec the state cannot decode must come back byte for byte.
    let encoded_kind = Kind::new(&ns, ENCODED_TYPE);
    let encoded = encoded_kind.pointer("encoded");
    let spec = encoded_spec("first");
    let created = ok(
        "create an encoded resource",
        state.create_dynamic(encoded_resource(&ns, "encoded", spec.clone()), CreateOptions::default()),
    )
    .await;
    assert_fresh(&created, &encoded);
    assert_eq!(created.spec.as_encoded(), Some(&spec), "create should store an encoded spec as it is");
    let got = ok("get the encoded resource", state.get_dynamic(&encoded)).await;
    assert_eq!(got.spec.as_encoded(), Some(&spec), "get should return an encoded spec as it was written");
    let listed = ok("list the encoded kind", state.list_dynamic(&encoded_kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["encoded"], "each type should list only its own resources");
    assert_eq!(listed[0].spec.as_encoded(), Some(&spec));

    let mut next = DynamicResource::clone(&got);
    let next_spec = encoded_spec("second");
    next.spec = Spec::encoded(next_spec.clone());
    let updated = ok("update the encoded resource", state.update_dynamic(next, UpdateOptions::default())).await;
    assert_eq!(updated.metadata.version(), Version::new(2));
    let got = ok("get the updated encoded resource", state.get_dynamic(&encoded)).await;
    assert_eq!(got.spec.as_encoded(), Some(&next_spec), "update should replace an encoded spec");
    ok("destroy the encoded resource", state.destroy_dynamic(&encoded, DestroyOptions::default())).await;

    let listed = ok("list", state.list_dynamic(&kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["/", "a b", "var/lib", "var/run"], "the encoded type should not leak into another type");
}

/// `update_with_conflicts` returns the edited resource and leaves the caller's copy alone.
pub async fn update_with_conflicts(state: Arc<dyn State>) {
    let ns = namespace("update-with-conflicts");
    let pointer = path_pointer(&ns, "var/run/update");
    let original: Typed<PathResource> = path_typed(&ns, "var/run/update");
    ok("create", state.create(original.clone(), CreateOptions::default())).await;

    let updated = ok(
        "update_with_conflicts",
        state.update_with_conflicts::<PathResource, Error>(&pointer, UpdateOptions::default(), |resource| {
            resource.metadata_mut().labels_mut().set("foo", "bar");
            Ok(())
        }),
    )
    .await;
    assert_eq!(updated.metadata().labels().get("foo"), Some("bar"), "the returned resource should carry the edit");
    assert_eq!(updated.metadata().version(), Version::new(2));
    assert_eq!(updated.spec(), original.spec(), "the spec should be untouched");
    assert!(original.metadata().labels().is_empty(), "the caller's resource should be untouched");

    let stored = ok("get", state.get_dynamic(&pointer)).await;
    assert_eq!(stored.metadata, *updated.metadata(), "the stored resource should be the returned one");

    // An edit that changes nothing writes nothing.
    let same = ok(
        "no-op update_with_conflicts",
        state.update_with_conflicts::<PathResource, Error>(&pointer, UpdateOptions::default(), |resource| {
            resource.metadata_mut().labels_mut().set("foo", "bar");
            Ok(())
        }),
    )
    .await;
    assert_eq!(same.metadata().version(), Version::new(2), "a no-op edit should not bump the version");
}

/// Writes with owners: only the owner may update, tear down and destroy; anyone may edit finalizers.
pub async fn crd_with_owners(state: Arc<dyn State>) {
    let ns = namespace("crd-with-owners");
    let path1 = path_pointer(&ns, "owner1/var/run");
    let path2 = path_pointer(&ns, "owner2/var/lib");
    let (owner1, owner2) = ("owner1", "owner2");

    ok("create owned by owner1", state.create_dynamic(path(&ns, "owner1/var/run"), CreateOptions::owner(owner1))).await;
    ok("create owned by owner2", state.create_dynamic(path(&ns, "owner2/var/lib"), CreateOptions::owner(owner2))).await;

    let got = ok("get path1", state.get_dynamic(&path1)).await;
    assert_eq!(*got.metadata.pointer(), path1);
    assert_eq!(got.metadata.owner(), Some(owner1), "create should record the owner");
    let got = ok("get path2", state.get_dynamic(&path2)).await;
    assert_eq!(*got.metadata.pointer(), path2);
    assert_eq!(got.metadata.owner(), Some(owner2), "create should record the owner");

    let err =
        fails("update without owner", state.update_dynamic(DynamicResource::clone(&got), UpdateOptions::default()))
            .await;
    assert!(err.is_conflict() && err.is_owner_conflict(), "update without owner: expected owner conflict, got {err:?}");
    let err = fails(
        "update as another owner",
        state.update_dynamic(DynamicResource::clone(&got), UpdateOptions::owner(owner1)),
    )
    .await;
    assert!(
        err.is_conflict() && err.is_owner_conflict(),
        "update as another owner: expected owner conflict, got {err:?}"
    );
    let updated =
        ok("update as the owner", state.update_dynamic(DynamicResource::clone(&got), UpdateOptions::owner(owner2)))
            .await;
    assert_eq!(updated.metadata.owner(), Some(owner2), "an update should keep the owner");

    let err = fails("teardown without owner", state.teardown_dynamic(&path1, TeardownOptions::default())).await;
    assert!(
        err.is_conflict() && err.is_owner_conflict(),
        "teardown without owner: expected owner conflict, got {err:?}"
    );
    let ready = ok("teardown as the owner", state.teardown_dynamic(&path1, TeardownOptions::owner(owner1))).await;
    assert!(ready, "teardown of a resource without finalizers should be ready");

    let err = fails("destroy as another owner", state.destroy_dynamic(&path1, DestroyOptions::owner(owner2))).await;
    assert!(
        err.is_conflict() && err.is_owner_conflict(),
        "destroy as another owner: expected owner conflict, got {err:?}"
    );
    ok("destroy as the owner", state.destroy_dynamic(&path1, DestroyOptions::owner(owner1))).await;

    let added = ok("add a finalizer to an owned resource", state.add_finalizers_dynamic(&path2, &["fin1"])).await;
    assert!(added.metadata.finalizers().has("fin1"));
    assert_eq!(added.metadata.owner(), Some(owner2), "editing finalizers should keep the owner");
    let removed =
        ok("remove a finalizer from an owned resource", state.remove_finalizers_dynamic(&path2, &["fin1"])).await;
    assert!(removed.metadata.finalizers().is_empty());
    assert_eq!(removed.metadata.owner(), Some(owner2), "editing finalizers should keep the owner");
}

/// A kind watch read event by event: creates, teardowns, destroys and updates, then a bootstrap.
pub async fn watch_kind(state: Arc<dyn State>) {
    check_watch_kind(state, false).await;
}

/// [`watch_kind`], read in batches.
pub async fn watch_kind_aggregated(state: Arc<dyn State>) {
    check_watch_kind(state, true).await;
}

/// Tail events of a kind watch replay what a live watch saw.
pub async fn watch_kind_with_tail_events(state: Arc<dyn State>) {
    check_watch_kind_with_tail_events(state, false).await;
}

/// [`watch_kind_with_tail_events`], read in batches.
pub async fn watch_kind_aggregated_with_tail_events(state: Arc<dyn State>) {
    check_watch_kind_with_tail_events(state, true).await;
}

/// Kind watches with label queries: updates that start or stop matching become creates and destroys.
pub async fn watch_kind_with_labels(state: Arc<dyn State>) {
    check_watch_kind_with_labels(state, false).await;
}

/// [`watch_kind_with_labels`], read in batches.
pub async fn watch_kind_aggregated_with_labels(state: Arc<dyn State>) {
    check_watch_kind_with_labels(state, true).await;
}

/// Concurrent finalizer edits all land: conflicts are retried.
pub async fn concurrent_finalizers(state: Arc<dyn State>) {
    let ns = namespace("concurrent-finalizers");
    let pointer = path_pointer(&ns, "var/final");
    ok("create", state.create_dynamic(path(&ns, "var/final"), CreateOptions::default())).await;

    let mut tasks = Vec::new();
    for finalizer in ["A", "B", "C", "D", "E", "F", "G", "H"] {
        let (state, pointer) = (Arc::clone(&state), pointer.clone());
        tasks.push(tokio::spawn(async move { state.add_finalizers_dynamic(&pointer, &[finalizer]).await.map(drop) }));
    }
    for finalizer in ["A", "B", "C"] {
        let (state, pointer) = (Arc::clone(&state), pointer.clone());
        tasks
            .push(tokio::spawn(async move { state.remove_finalizers_dynamic(&pointer, &[finalizer]).await.map(drop) }));
    }
    for task in tasks {
        ok("a concurrent finalizer edit", join("a concurrent finalizer edit", task)).await;
    }

    // The removals may have run before the additions; now they run after.
    let mut tasks = Vec::new();
    for finalizer in ["A", "B", "C"] {
        let (state, pointer) = (Arc::clone(&state), pointer.clone());
        tasks
            .push(tokio::spawn(async move { state.remove_finalizers_dynamic(&pointer, &[finalizer]).await.map(drop) }));
    }
    for task in tasks {
        ok("a concurrent finalizer removal", join("a concurrent finalizer removal", task)).await;
    }

    let stored = ok("get", state.get_dynamic(&pointer)).await;
    let mut finalizers: Vec<&str> = stored.metadata.finalizers().iter().collect();
    finalizers.sort_unstable();
    assert_eq!(finalizers, ["D", "E", "F", "G", "H"], "every concurrent finalizer edit should land");
}

/// `watch_for` resolves on creation, on an existing match, on teardown and on destruction.
pub async fn watch_for(state: Arc<dyn State>) {
    let ns = namespace("watch-for");
    let pointer = path_pointer(&ns, "tmp/one");

    let created = spawn_watch_for(&state, &pointer, WatchCondition::new().event_types([EventType::Created]));
    let stored = ok("create", state.create_dynamic(path(&ns, "tmp/one"), CreateOptions::default())).await;
    let event = ok("watch_for created", join("watch_for created", created)).await;
    assert_eq!(event.event_type(), EventType::Created);
    assert_eq!(resource_of(&event).metadata, stored.metadata, "watch_for should return the created resource");

    let event =
        ok("watch_for finalizers empty", watch_for_path(&state, &pointer, WatchCondition::new().finalizers_empty()))
            .await;
    assert_eq!(resource_of(&event).metadata, stored.metadata, "watch_for should match the current state");

    let tearing_down = spawn_watch_for(&state, &pointer, WatchCondition::new().phases([Phase::TearingDown]));
    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    assert!(ready);
    let event = ok("watch_for tearing down", join("watch_for tearing down", tearing_down)).await;
    assert_eq!(resource_of(&event).id(), pointer.id());
    assert_eq!(resource_of(&event).metadata.phase(), Phase::TearingDown);

    let destroyed = spawn_watch_for(&state, &pointer, WatchCondition::new().event_types([EventType::Destroyed]));
    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
    let event = ok("watch_for destroyed", join("watch_for destroyed", destroyed)).await;
    assert_eq!(event.event_type(), EventType::Destroyed);
    assert_eq!(resource_of(&event).id(), pointer.id());
}

/// A single-resource watch: the initial state, then every change of that resource.
pub async fn watch(state: Arc<dyn State>) {
    let ns = namespace("watch");
    let pointer = path_pointer(&ns, "tmp/two");
    let mut events =
        Reader::new("the watch", ok("watch", state.watch_dynamic(&pointer, WatchOptions::default())).await, false);

    let initial = events.next().await;
    let tombstone = check_event(&initial, EventType::Destroyed, &pointer);
    assert!(
        tombstone.metadata.version().is_undefined(),
        "the initial event of an absent resource should carry a tombstone, got {tombstone:?}"
    );

    let created = ok("create", state.create_dynamic(path(&ns, "tmp/two"), CreateOptions::default())).await;
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Created, &pointer).metadata, created.metadata);

    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    assert!(ready);
    let event = events.next().await;
    let resource = check_event(&event, EventType::Updated, &pointer);
    assert_eq!(resource.metadata.phase(), Phase::TearingDown);
    let old = event.old().expect("an updated event carries the old resource");
    assert_eq!(*old.metadata.pointer(), pointer);
    assert_eq!(old.metadata.phase(), Phase::Running);

    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    let event = events.next().await;
    assert!(check_event(&event, EventType::Updated, &pointer).metadata.finalizers().has("A"));

    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    let event = events.next().await;
    let last = check_event(&event, EventType::Updated, &pointer).clone();
    assert!(last.metadata.finalizers().is_empty());

    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
    let event = events.next().await;
    let destroyed = check_event(&event, EventType::Destroyed, &pointer);
    assert_eq!(destroyed.metadata, last.metadata, "a destroyed event should carry the last stored resource");
}

/// Tail events of a single-resource watch replay what a live watch saw.
pub async fn watch_with_tail_events(state: Arc<dyn State>) {
    let ns = namespace("watch-with-tail-events");
    let pointer = path_pointer(&ns, "res/watch-with-tail-events");
    let mut live =
        Reader::new("the live watch", ok("watch", state.watch_dynamic(&pointer, WatchOptions::default())).await, false);
    check_event(&live.next().await, EventType::Destroyed, &pointer);

    write_lifecycle(&state, &ns, "res/watch-with-tail-events").await;
    let mut seen = Vec::new();
    for _ in 0..LIFECYCLE_EVENTS {
        seen.push(live.next().await);
    }

    let tail = ok("watch with tail events", state.watch_dynamic(&pointer, WatchOptions::tail(1000))).await;
    let mut tail = Reader::new("the tail watch", tail, false);
    for (index, expected) in seen.iter().enumerate() {
        let event = tail.next().await;
        assert_same_event(&event, expected, &format!("tail event {index}"));
    }
}

/// Every event after the initial one has a bookmark; resuming from each replays exactly what followed it.
pub async fn watch_with_bookmarks(state: Arc<dyn State>) {
    let ns = namespace("watch-with-bookmarks");
    let pointer = path_pointer(&ns, "res/watch-with-bookmarks");
    let mut live =
        Reader::new("the watch", ok("watch", state.watch_dynamic(&pointer, WatchOptions::default())).await, false);

    write_lifecycle(&state, &ns, "res/watch-with-bookmarks").await;
    // The initial (destroyed) event, then the lifecycle.
    let mut events = Vec::new();
    for index in 0..=LIFECYCLE_EVENTS {
        let event = live.next().await;
        if index > 0 {
            assert!(event.bookmark().is_some(), "event {index} should carry a bookmark: {event:?}");
        }
        events.push(event);
    }

    ok("create again", state.create_dynamic(path(&ns, "res/watch-with-bookmarks"), CreateOptions::default())).await;

    for (index, event) in events.iter().enumerate() {
        let Some(bookmark) = event.bookmark() else { continue };
        let watch = ok(
            format!("watch from the bookmark of event {index}"),
            state.watch_dynamic(&pointer, WatchOptions::from_bookmark(bookmark.clone())),
        )
        .await;
        let mut resumed = Reader::new(format!("the watch from the bookmark of event {index}"), watch, false);
        for (offset, expected) in events[index + 1..].iter().enumerate() {
            let event = resumed.next().await;
            assert_same_event(
                &event,
                expected,
                &format!("event {} resumed from the bookmark of event {index}", index + 1 + offset),
            );
        }
        let event = resumed.next().await;
        check_event(&event, EventType::Created, &pointer);
    }
}

/// Kind watches, event by event and in batches, with bootstrap contents or a bootstrap bookmark:
/// every event from the bootstrap on has a bookmark, and resuming from each replays exactly what followed it.
pub async fn watch_kind_with_bookmarks(state: Arc<dyn State>) {
    for aggregated in [false, true] {
        for bootstrap_contents in [false, true] {
            check_watch_kind_with_bookmarks(&state, aggregated, bootstrap_contents).await;
        }
    }
}

/// Concurrent destroys of one resource: one succeeds, the others find nothing.
pub async fn parallel_destroy(state: Arc<dyn State>) {
    let ns = namespace("parallel-destroy");
    let pointer = path_pointer(&ns, "/");
    ok("create", state.create_dynamic(path(&ns, "/"), CreateOptions::default())).await;

    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (state, pointer) = (Arc::clone(&state), pointer.clone());
            tokio::spawn(async move { state.destroy_dynamic(&pointer, DestroyOptions::default()).await })
        })
        .collect();
    let mut destroyed = 0;
    for task in tasks {
        match join("a concurrent destroy", task).await {
            Ok(()) => destroyed += 1,
            Err(err) if err.is_not_found() => {}
            Err(err) => panic!("a concurrent destroy should succeed or find nothing, got {err:?}"),
        }
    }
    assert_eq!(destroyed, 1, "exactly one concurrent destroy should succeed");
    let err = fails("get after destroy", state.get_dynamic(&pointer)).await;
    assert!(err.is_not_found(), "get after destroy: expected not found, got {err:?}");
}

/// Finalizers block destroy whatever the phase; teardown reports whether any are left.
pub async fn teardown_destroy(state: Arc<dyn State>) {
    let ns = namespace("teardown-destroy");
    let pointer = path_pointer(&ns, "tmp/1");
    ok("create", state.create_dynamic(path(&ns, "tmp/1"), CreateOptions::default())).await;
    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;

    let err = fails("destroy with a finalizer", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
    assert!(
        matches!(err, Error::PendingFinalizers { .. }) && err.is_conflict(),
        "destroy with a finalizer: expected pending finalizers, got {err:?}"
    );

    for attempt in ["teardown", "second teardown"] {
        let ready = ok(attempt, state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
        assert!(!ready, "{attempt} of a resource with a finalizer should not be ready");
    }

    let err = fails(
        "destroy of a torn down resource with a finalizer",
        state.destroy_dynamic(&pointer, DestroyOptions::default()),
    )
    .await;
    assert!(
        matches!(err, Error::PendingFinalizers { .. }) && err.is_conflict(),
        "destroy of a torn down resource with a finalizer: expected pending finalizers, got {err:?}"
    );

    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    let ready = ok("teardown without finalizers", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    assert!(ready, "teardown without finalizers should be ready");
    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
}

/// Updates need the stored version and, by default, a running resource.
pub async fn update(state: Arc<dyn State>) {
    let ns = namespace("update");
    let pointer = path_pointer(&ns, "tmp/path1");

    let err =
        fails("update of a missing resource", state.update_dynamic(path(&ns, "tmp/path1"), UpdateOptions::default()))
            .await;
    assert!(err.is_not_found(), "update of a missing resource: expected not found, got {err:?}");

    let created = ok("create", state.create_dynamic(path(&ns, "tmp/path1"), CreateOptions::default())).await;
    assert_ne!(created.metadata.version(), Version::UNDEFINED, "create should set the version");

    for (what, version) in
        [("a stale version", Version::UNDEFINED), ("a future version", created.metadata.version().next())]
    {
        let mut stale = DynamicResource::clone(&created);
        stale.metadata.set_version(version);
        let err = fails(format!("update with {what}"), state.update_dynamic(stale, UpdateOptions::default())).await;
        assert!(
            matches!(err, Error::VersionConflict { .. }) && err.is_conflict(),
            "update with {what}: expected a version conflict, got {err:?}"
        );
    }

    let mut edited = DynamicResource::clone(&created);
    edited.spec = Spec::typed(PathResource { value: "edited".to_owned() });
    let updated = ok("update with the stored version", state.update_dynamic(edited, UpdateOptions::default())).await;
    assert_eq!(updated.metadata.version(), created.metadata.version().next());
    let got = ok("get", state.get_dynamic(&pointer)).await;
    assert_eq!(got.metadata, updated.metadata);
    assert_eq!(typed_spec(&got).value, "edited", "update should store the new spec");

    ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    let torn_down = ok("get", state.get_dynamic(&pointer)).await;
    let err = fails(
        "update of a torn down resource",
        state.update_dynamic(DynamicResource::clone(&torn_down), UpdateOptions::default()),
    )
    .await;
    assert!(err.is_phase_conflict(), "update of a torn down resource: expected a phase conflict, got {err:?}");

    let options = UpdateOptions::default().expected_phase(Some(Phase::TearingDown));
    let updated =
        ok("update expecting tearing down", state.update_dynamic(DynamicResource::clone(&torn_down), options)).await;
    assert_eq!(updated.metadata.phase(), Phase::TearingDown);
    let options = UpdateOptions::default().expected_phase(None);
    ok("update expecting any phase", state.update_dynamic(DynamicResource::clone(&updated), options)).await;
}

/// Label queries on list: every operator, AND within a query, OR across queries, sorted results.
pub async fn labels(state: Arc<dyn State>) {
    let ns = namespace("labels");
    let fixtures: [(&str, &[(&str, &str)]); 3] = [
        ("labeled/app1", &[("app", "app1"), ("frozen", ""), ("weight", "10kg")]),
        ("labeled/app2", &[("app", "app2"), ("frozen", ""), ("weight", "20kg")]),
        ("labeled/app3", &[("app", "app3")]),
    ];
    for (id, labels) in fixtures {
        let mut resource = path(&ns, id);
        for (key, value) in labels {
            resource.metadata.labels_mut().set(*key, *value);
        }
        ok(format!("create {id}"), state.create_dynamic(resource, CreateOptions::default())).await;
    }

    let got = ok("get", state.get_dynamic(&path_pointer(&ns, "labeled/app1"))).await;
    assert_eq!(got.metadata.labels().get("app"), Some("app1"));
    assert_eq!(got.metadata.labels().get("frozen"), Some(""), "an empty label value is still a value");

    let cases: Vec<(&str, ListOptions, &[&str])> = vec![
        ("exists(frozen)", ListOptions::default().label(LabelQuery::new().exists("frozen")), &["app1", "app2"]),
        (
            "exists(frozen) and app=app2",
            ListOptions::default().label(LabelQuery::new().exists("frozen").equal("app", "app2")),
            &["app2"],
        ),
        (
            "exists(frozen) and app=app3",
            ListOptions::default().label(LabelQuery::new().exists("frozen").equal("app", "app3")),
            &[],
        ),
        ("app=app3", ListOptions::default().label(LabelQuery::new().equal("app", "app3")), &["app3"]),
        (
            "app in [app2, app3]",
            ListOptions::default().label(LabelQuery::new().in_values("app", ["app2", "app3"])),
            &["app2", "app3"],
        ),
        ("weight < 12000", ListOptions::default().label(LabelQuery::new().lt_numeric("weight", "12000")), &["app1"]),
        (
            "weight <= 20000",
            ListOptions::default().label(LabelQuery::new().lte_numeric("weight", "20000")),
            &["app1", "app2"],
        ),
        ("app <= app2", ListOptions::default().label(LabelQuery::new().lte("app", "app2")), &["app1", "app2"]),
        ("app < app2", ListOptions::default().label(LabelQuery::new().lt("app", "app2")), &["app1"]),
        ("not exists(frozen)", ListOptions::default().label(LabelQuery::new().not_exists("frozen")), &["app3"]),
        (
            "app=app2 or app=app3",
            ListOptions::default()
                .label(LabelQuery::new().equal("app", "app2"))
                .label(LabelQuery::new().equal("app", "app3")),
            &["app2", "app3"],
        ),
    ];
    for (what, options, expected) in cases {
        let listed = ok(format!("list {what}"), state.list_in::<PathResource>(&ns, &options)).await;
        let got: Vec<&str> = listed.iter().map(|resource| resource.id().trim_start_matches("labeled/")).collect();
        assert_eq!(got, expected, "list {what}");
        for resource in &listed {
            let (_, labels) =
                fixtures.iter().find(|(id, _)| *id == resource.id()).expect("a listed resource was created here");
            let labels: Labels = labels.iter().copied().collect();
            assert_eq!(*resource.metadata().labels(), labels, "list {what} should return the labels as stored");
            assert_eq!(resource.spec().value, resource.id(), "list {what} should return the spec as stored");
        }
    }
}

/// ID queries on list and on a kind watch, bootstrap and live events.
pub async fn id_query(state: Arc<dyn State>) {
    let ns = namespace("id-query");
    let kind = path_kind(&ns);
    for index in 0..10 {
        let id = format!("idquery/path{index}");
        ok(format!("create {id}"), state.create_dynamic(path(&ns, &id), CreateOptions::default())).await;
    }
    let query = || IdQuery::new(r"^idquery/.+[2-4]$").expect("a valid regular expression");

    let listed = ok("list with an ID query", state.list_dynamic(&kind, &ListOptions::default().id(query()))).await;
    assert_eq!(ids(&listed), ["idquery/path2", "idquery/path3", "idquery/path4"]);

    let watch =
        ok("watch with an ID query", state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap().id(query()))).await;
    let mut events = Reader::new("the kind watch with an ID query", watch, false);
    for index in 2..=4 {
        check_event(&events.next().await, EventType::Created, &path_pointer(&ns, &format!("idquery/path{index}")));
    }
    check_bootstrapped(&events.next().await, &kind);

    for index in 0..10 {
        let pointer = path_pointer(&ns, &format!("idquery/path{index}"));
        ok(format!("destroy {pointer}"), state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
    }
    for index in 2..=4 {
        check_event(&events.next().await, EventType::Destroyed, &path_pointer(&ns, &format!("idquery/path{index}")));
    }
    // Had any non-matching event leaked, it would come before this one.
    ok("create again", state.create_dynamic(path(&ns, "idquery/path3"), CreateOptions::default())).await;
    check_event(&events.next().await, EventType::Created, &path_pointer(&ns, "idquery/path3"));
}

/// The Rust counterpart of Go's `ContextWithTeardown`: watchers learn of a teardown or a destroy
/// of their resource, and only of theirs.
pub async fn teardown_notifies_watchers(state: Arc<dyn State>) {
    let ns = namespace("teardown-notifies-watchers");
    let r1 = path_pointer(&ns, "ctx/r1");
    let r2 = path_pointer(&ns, "ctx/r2");
    let destroyed = || WatchCondition::new().event_types([EventType::Destroyed]);
    let tearing_down = || WatchCondition::new().phases([Phase::TearingDown]);

    // An absent resource counts as destroyed at once.
    let event = ok("watch_for an absent resource", watch_for_path(&state, &r1, destroyed())).await;
    assert!(check_event(&event, EventType::Destroyed, &r1).metadata.version().is_undefined(), "expected a tombstone");

    ok("create r1", state.create_dynamic(path(&ns, "ctx/r1"), CreateOptions::default())).await;
    ok("create r2", state.create_dynamic(path(&ns, "ctx/r2"), CreateOptions::default())).await;

    let r1_destroyed = spawn_watch_for(&state, &r1, destroyed());
    let r1_tearing_down = spawn_watch_for(&state, &r1, tearing_down());
    let r2_destroyed = spawn_watch_for(&state, &r2, destroyed());
    let r2_tearing_down = spawn_watch_for(&state, &r2, tearing_down());
    let mut r2_events =
        Reader::new("the watch of r2", ok("watch r2", state.watch_dynamic(&r2, WatchOptions::default())).await, false);
    check_event(&r2_events.next().await, EventType::Created, &r2);

    // Destroying r1 without a teardown ends r1's destroy watcher, and nothing of r2.
    ok("destroy r1", state.destroy_dynamic(&r1, DestroyOptions::default())).await;
    let event = ok("watch_for r1 destroyed", join("watch_for r1 destroyed", r1_destroyed)).await;
    check_event(&event, EventType::Destroyed, &r1);
    ok(
        "update r2",
        state.update_with_conflicts::<PathResource, Error>(&r2, UpdateOptions::default(), |resource| {
            resource.metadata_mut().labels_mut().set("touched", "");
            Ok(())
        }),
    )
    .await;
    let event = r2_events.next().await;
    assert_eq!(
        check_event(&event, EventType::Updated, &r2).metadata.phase(),
        Phase::Running,
        "r2 should still be running"
    );
    assert!(!r1_tearing_down.is_finished(), "a destroy without teardown should not look like a teardown");
    assert!(!r2_destroyed.is_finished(), "destroying r1 should not notify the watchers of r2");
    assert!(!r2_tearing_down.is_finished(), "destroying r1 should not notify the watchers of r2");
    r1_tearing_down.abort();

    // Tearing r2 down ends its teardown watcher, not its destroy watcher.
    ok("teardown r2", state.teardown_dynamic(&r2, TeardownOptions::default())).await;
    let event = ok("watch_for r2 tearing down", join("watch_for r2 tearing down", r2_tearing_down)).await;
    // A watcher that subscribed only after the teardown matches its initial (created) event.
    let resource = resource_of(&event);
    assert_eq!(*resource.metadata.pointer(), r2);
    assert_eq!(resource.metadata.phase(), Phase::TearingDown, "watch_for should return the torn down resource");
    let event = r2_events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &r2).metadata.phase(), Phase::TearingDown);
    assert!(!r2_destroyed.is_finished(), "a teardown should not look like a destroy");

    ok("destroy r2", state.destroy_dynamic(&r2, DestroyOptions::default())).await;
    let event = ok("watch_for r2 destroyed", join("watch_for r2 destroyed", r2_destroyed)).await;
    check_event(&event, EventType::Destroyed, &r2);
}

/// `teardown_and_destroy` waits for another party to remove its finalizer, then destroys.
pub async fn teardown_and_destroy(state: Arc<dyn State>) {
    let ns = namespace("teardown-and-destroy");
    let kind = path_kind(&ns);
    let pointer = path_pointer(&ns, "tmp/4");
    const FINALIZER: &str = "A";

    // The other party: removes its finalizer once the resource is torn down.
    let watch = ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap())).await;
    let releaser = {
        let (state, pointer) = (Arc::clone(&state), pointer.clone());
        tokio::spawn(async move {
            let mut events = Reader::new("the releasing watch", watch, false);
            loop {
                let event = events.next().await;
                match &event {
                    Event::Created { resource, .. } | Event::Updated { resource, .. }
                        if resource.metadata.phase() == Phase::TearingDown
                            && resource.metadata.finalizers().has(FINALIZER) =>
                    {
                        state.remove_finalizers_dynamic(resource.metadata.pointer(), &[FINALIZER]).await?;
                    }
                    Event::Destroyed { resource, .. } if *resource.metadata.pointer() == pointer => return Ok(()),
                    Event::Errored { error } => return Err(error.clone()),
                    _ => {}
                }
            }
        })
    };

    ok("create", state.create_dynamic(path(&ns, "tmp/4"), CreateOptions::default())).await;
    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &[FINALIZER])).await;
    ok("teardown_and_destroy", state.teardown_and_destroy_dynamic(&pointer, TeardownOptions::default())).await;
    ok("the releasing watcher", join("the releasing watcher", releaser)).await;
    let err = fails("get after teardown_and_destroy", state.get_dynamic(&pointer)).await;
    assert!(err.is_not_found(), "get after teardown_and_destroy: expected not found, got {err:?}");
}

/// `modify` creates, updates, passes the edit's error through, and respects phases.
pub async fn modify(state: Arc<dyn State>) {
    let ns = namespace("modify");
    let pointer = path_pointer(&ns, "var/run/modify");

    let created = ok(
        "modify of a missing resource",
        state.modify::<PathResource>(&pointer, UpdateOptions::default(), |resource| {
            resource.metadata_mut().labels_mut().set("foo", "bar");
        }),
    )
    .await;
    assert_eq!(*created.metadata().pointer(), pointer);
    assert_eq!(created.metadata().labels().get("foo"), Some("bar"));
    assert_eq!(created.metadata().owner(), None, "modify without owner should create an unowned resource");
    assert_eq!(created.metadata().version(), Version::new(1), "modify of a missing resource should create it");
    let got = ok("get", state.get::<PathResource>(&pointer)).await;
    assert_eq!(got.metadata(), created.metadata());

    let updated = ok(
        "modify deleting the label",
        state.modify::<PathResource>(&pointer, UpdateOptions::default(), |resource| {
            resource.metadata_mut().labels_mut().remove("foo");
        }),
    )
    .await;
    assert!(updated.metadata().labels().is_empty());
    assert_eq!(updated.metadata().version(), Version::new(2), "modify of an existing resource should update it");
    let got = ok("get", state.get::<PathResource>(&pointer)).await;
    assert!(got.metadata().labels().is_empty());

    let result = within(
        "modify failing",
        state.try_modify::<PathResource, EditError>(&pointer, UpdateOptions::default(), |_| {
            Err(EditError::Edit("modify error"))
        }),
    )
    .await;
    assert!(
        matches!(result, Err(EditError::Edit("modify error"))),
        "modify should return the edit's error as it is, got {result:?}"
    );

    ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    let result = within(
        "modify of a torn down resource",
        state.modify::<PathResource>(&pointer, UpdateOptions::default(), |resource| {
            resource.metadata_mut().labels_mut().set("foo", "bar");
        }),
    )
    .await;
    assert!(
        matches!(&result, Err(err) if err.is_phase_conflict()),
        "modify of a torn down resource: expected a phase conflict, got {result:?}"
    );

    let updated = ok(
        "modify expecting any phase",
        state.modify::<PathResource>(&pointer, UpdateOptions::default().expected_phase(None), |resource| {
            resource.metadata_mut().labels_mut().set("foo", "bar2");
        }),
    )
    .await;
    assert_eq!(updated.metadata().phase(), Phase::TearingDown, "modify should keep the phase");
    assert_eq!(updated.metadata().labels().get("foo"), Some("bar2"));
}

/// `modify` with an owner creates owned resources, and only the owner may modify them.
pub async fn modify_with_owner(state: Arc<dyn State>) {
    let ns = namespace("modify-with-owner");
    let pointer = path_pointer(&ns, "var/run/modify/owned");

    let created = ok(
        "modify creating an owned resource",
        state.modify::<PathResource>(&pointer, UpdateOptions::owner("owner"), |_| {}),
    )
    .await;
    assert_eq!(*created.metadata().pointer(), pointer);
    assert_eq!(created.metadata().owner(), Some("owner"), "modify should create the resource with the owner");

    let updated = ok(
        "modify as the owner",
        state.modify::<PathResource>(&pointer, UpdateOptions::owner("owner"), |resource| {
            resource.metadata_mut().labels_mut().set("foo", "bar");
        }),
    )
    .await;
    assert_eq!(updated.metadata().owner(), Some("owner"));
    assert_eq!(updated.metadata().labels().get("foo"), Some("bar"));

    let result = within(
        "modify without the owner",
        state.modify::<PathResource>(&pointer, UpdateOptions::default(), |resource| {
            resource.metadata_mut().labels_mut().set("foo", "baz");
        }),
    )
    .await;
    assert!(
        matches!(&result, Err(err) if err.is_owner_conflict()),
        "modify without the owner: expected an owner conflict, got {result:?}"
    );
}

/// A second teardown writes nothing; teardown of a missing resource is not found.
pub async fn teardown_is_idempotent(state: Arc<dyn State>) {
    let ns = namespace("teardown-is-idempotent");
    let kind = path_kind(&ns);
    let pointer = path_pointer(&ns, "owned");
    let mut events = Reader::new(
        "the kind watch",
        ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await,
        false,
    );

    ok("create", state.create_dynamic(path(&ns, "owned"), CreateOptions::owner("owner"))).await;
    check_event(&events.next().await, EventType::Created, &pointer);

    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::owner("owner"))).await;
    assert!(ready);
    let event = events.next().await;
    let torn_down = check_event(&event, EventType::Updated, &pointer).clone();
    assert_eq!(torn_down.metadata.phase(), Phase::TearingDown);

    let ready = ok("second teardown", state.teardown_dynamic(&pointer, TeardownOptions::owner("owner"))).await;
    assert!(ready, "a second teardown should report the same readiness");
    let got = ok("get", state.get_dynamic(&pointer)).await;
    assert_eq!(got.metadata.version(), torn_down.metadata.version(), "a second teardown should write nothing");

    // Had the second teardown written, its event would come before this one.
    ok("create a barrier", state.create_dynamic(path(&ns, "barrier"), CreateOptions::default())).await;
    check_event(&events.next().await, EventType::Created, &path_pointer(&ns, "barrier"));

    let missing = path_pointer(&ns, "missing");
    let err =
        fails("teardown of a missing resource", state.teardown_dynamic(&missing, TeardownOptions::default())).await;
    assert!(err.is_not_found(), "teardown of a missing resource: expected not found, got {err:?}");
    let err = fails(
        "teardown_and_destroy of a missing resource",
        state.teardown_and_destroy_dynamic(&missing, TeardownOptions::default()),
    )
    .await;
    assert!(err.is_not_found(), "teardown_and_destroy of a missing resource: expected not found, got {err:?}");
}

/// Finalizer edits work on owned resources in any phase, and write nothing when nothing changes.
pub async fn finalizer_edits_are_idempotent(state: Arc<dyn State>) {
    let ns = namespace("finalizer-edits-are-idempotent");
    let kind = path_kind(&ns);
    let pointer = path_pointer(&ns, "owned");
    let mut events = Reader::new(
        "the kind watch",
        ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await,
        true,
    );

    ok("create", state.create_dynamic(path(&ns, "owned"), CreateOptions::owner("owner"))).await;
    check_event(&events.next().await, EventType::Created, &pointer);

    let added = ok("add finalizers", state.add_finalizers_dynamic(&pointer, &["A", "B"])).await;
    assert_eq!(finalizers(&added), ["A", "B"]);
    assert_eq!(added.metadata.version(), Version::new(2));
    assert_eq!(finalizers(check_event(&events.next().await, EventType::Updated, &pointer)), ["A", "B"]);

    let same = ok("add a present finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    assert_eq!(same.metadata.version(), Version::new(2), "adding a present finalizer should write nothing");
    let same = ok("remove an absent finalizer", state.remove_finalizers_dynamic(&pointer, &["C"])).await;
    assert_eq!(same.metadata.version(), Version::new(2), "removing an absent finalizer should write nothing");

    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::owner("owner"))).await;
    assert!(!ready, "teardown with finalizers should not be ready");
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &pointer).metadata.phase(), Phase::TearingDown);

    let added = ok("add a finalizer while tearing down", state.add_finalizers_dynamic(&pointer, &["C"])).await;
    assert_eq!(finalizers(&added), ["A", "B", "C"]);
    assert_eq!(added.metadata.owner(), Some("owner"));
    assert_eq!(added.metadata.phase(), Phase::TearingDown);
    assert_eq!(finalizers(check_event(&events.next().await, EventType::Updated, &pointer)), ["A", "B", "C"]);

    let removed = ok("remove all finalizers", state.remove_finalizers_dynamic(&pointer, &["A", "B", "C"])).await;
    assert!(removed.metadata.finalizers().is_empty());
    assert!(check_event(&events.next().await, EventType::Updated, &pointer).metadata.finalizers().is_empty());

    // Had a no-op edit written, its event would come before this one.
    ok("create a barrier", state.create_dynamic(path(&ns, "barrier"), CreateOptions::default())).await;
    check_event(&events.next().await, EventType::Created, &path_pointer(&ns, "barrier"));

    let missing = path_pointer(&ns, "missing");
    let err = fails("add a finalizer to a missing resource", state.add_finalizers_dynamic(&missing, &["A"])).await;
    assert!(err.is_not_found(), "add a finalizer to a missing resource: expected not found, got {err:?}");
    let err =
        fails("remove a finalizer from a missing resource", state.remove_finalizers_dynamic(&missing, &["A"])).await;
    assert!(err.is_not_found(), "remove a finalizer from a missing resource: expected not found, got {err:?}");
}

/// Concurrent `teardown_and_destroy` calls of one resource: each succeeds or finds it gone.
pub async fn racy_teardown_and_destroy(state: Arc<dyn State>) {
    let ns = namespace("racy-teardown-and-destroy");
    let pointer = path_pointer(&ns, "raced");
    ok("create", state.create_dynamic(path(&ns, "raced"), CreateOptions::default())).await;

    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (state, pointer) = (Arc::clone(&state), pointer.clone());
            tokio::spawn(async move { state.teardown_and_destroy_dynamic(&pointer, TeardownOptions::default()).await })
        })
        .collect();
    for task in tasks {
        match join("a concurrent teardown_and_destroy", task).await {
            // Go allows a phase conflict from a racing teardown too.
            Err(err) if !(err.is_not_found() || err.is_phase_conflict()) => {
                panic!("a concurrent teardown_and_destroy should succeed or find the resource gone, got {err:?}")
            }
            _ => {}
        }
    }
    let err = fails("get after the race", state.get_dynamic(&pointer)).await;
    assert!(err.is_not_found(), "get after the race: expected not found, got {err:?}");

    // Someone else destroys the resource while teardown_and_destroy waits for a finalizer.
    ok("create again", state.create_dynamic(path(&ns, "raced"), CreateOptions::default())).await;
    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    let waiting = {
        let (state, pointer) = (Arc::clone(&state), pointer.clone());
        tokio::spawn(async move { state.teardown_and_destroy_dynamic(&pointer, TeardownOptions::default()).await })
    };
    let torn_down = WatchCondition::new().phases([Phase::TearingDown]);
    ok("watch_for the teardown", watch_for_path(&state, &pointer, torn_down)).await;
    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    match within("destroy by someone else", state.destroy_dynamic(&pointer, DestroyOptions::default())).await {
        Ok(()) => {}
        // teardown_and_destroy got there first.
        Err(err) if err.is_not_found() => {}
        Err(err) => panic!("destroy by someone else: expected success or not found, got {err:?}"),
    }
    ok("teardown_and_destroy racing another destroy", join("teardown_and_destroy", waiting)).await;
}

/// Watchers that do not read while more events than the history holds are written get one
/// `Errored` event with [`Error::BufferOverrun`], then their watch ends; writers never wait.
pub async fn buffer_overrun(state: Arc<dyn State>) {
    let ns = namespace("buffer-overrun");
    let kind = path_kind(&ns);
    let pointer = path_pointer(&ns, "overrun");
    let mut stored = ok("create", state.create_dynamic(path(&ns, "overrun"), CreateOptions::default())).await;

    let single = ok("watch", state.watch_dynamic(&pointer, WatchOptions::default())).await;
    let kind_watch = ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await;

    // Each write has its own deadline: a durable backend makes every one of
    // them wait for the disk, so the whole loop may take longer than one step.
    for _ in 0..OVERRUN_WRITES {
        stored = within(
            "an update with idle watchers",
            state.update_dynamic(DynamicResource::clone(&stored), UpdateOptions::default()),
        )
        .await
        .unwrap_or_else(|err| panic!("an update with idle watchers failed: {err:?}"));
    }

    for (what, watch, aggregated) in
        [("the single-resource watch", single, false), ("the kind watch", kind_watch, true)]
    {
        let mut events = Reader::new(what, watch, aggregated);
        let mut delivered = 0u64;
        loop {
            let event = events.try_next().await.unwrap_or_else(|| panic!("{what} ended without reporting the overrun"));
            match event {
                Event::Errored { error: Error::BufferOverrun { kind: overrun, .. } } => {
                    assert_eq!(overrun, kind, "{what}: the overrun should name the watched kind");
                    break;
                }
                Event::Errored { error } => panic!("{what}: expected a buffer overrun, got {error:?}"),
                _ => delivered += 1,
            }
        }
        assert!(delivered <= OVERRUN_WRITES, "{what} delivered {delivered} events before the overrun");
        if let Some(event) = events.try_next().await {
            panic!("{what} should end after the overrun, got {event:?}");
        }
    }
}

/// Bookmarks that are corrupted or belong to another namespace or type are rejected when the watch starts.
pub async fn invalid_bookmark(state: Arc<dyn State>) {
    let ns = namespace("invalid-bookmark");
    let kind = path_kind(&ns);
    let pointer = path_pointer(&ns, "bookmarked");
    let bookmark = bookmark_of_update(&state, &ns, "bookmarked").await;

    // The bookmark itself is fine.
    ok(
        "watch kind from a valid bookmark",
        state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(bookmark.clone())),
    )
    .await;
    ok("watch from a valid bookmark", state.watch_dynamic(&pointer, WatchOptions::from_bookmark(bookmark.clone())))
        .await;

    let bytes = bookmark.as_bytes();
    assert!(!bytes.is_empty(), "a bookmark should not be empty");
    let flipped = |index: usize| {
        let mut bytes = bytes.to_vec();
        bytes[index] ^= 0xff;
        Bookmark::from_bytes(bytes)
    };
    let other_namespace = namespace("invalid-bookmark-other");
    let mut invalid = vec![
        ("the first byte flipped".to_owned(), flipped(0)),
        ("the last byte flipped".to_owned(), flipped(bytes.len() - 1)),
        ("a byte short".to_owned(), Bookmark::from_bytes(bytes[..bytes.len() - 1].to_vec())),
        ("a byte too long".to_owned(), Bookmark::from_bytes([bytes, &[0]].concat())),
        ("empty".to_owned(), Bookmark::from_bytes(Vec::new())),
        ("of another namespace".to_owned(), bookmark_of_update(&state, &other_namespace, "bookmarked").await),
    ];
    // A bookmark of another type in the same namespace.
    let encoded_kind = Kind::new(&ns, ENCODED_TYPE);
    let mut encoded_events = Reader::new(
        "the encoded kind watch",
        ok("watch the encoded kind", state.watch_kind_dynamic(&encoded_kind, WatchKindOptions::default())).await,
        false,
    );
    ok(
        "create an encoded resource",
        state.create_dynamic(encoded_resource(&ns, "bookmarked", encoded_spec("x")), CreateOptions::default()),
    )
    .await;
    let event = encoded_events.next().await;
    let other_type =
        event.bookmark().unwrap_or_else(|| panic!("a created event should carry a bookmark: {event:?}")).clone();
    invalid.push(("of another type".to_owned(), other_type));

    for (what, bookmark) in invalid {
        let err = fails(
            format!("watch kind from a bookmark {what}"),
            state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(bookmark.clone())),
        )
        .await;
        assert!(
            err.is_invalid_bookmark(),
            "watch kind from a bookmark {what}: expected an invalid bookmark, got {err:?}"
        );
        let err = fails(
            format!("watch from a bookmark {what}"),
            state.watch_dynamic(&pointer, WatchOptions::from_bookmark(bookmark)),
        )
        .await;
        assert!(err.is_invalid_bookmark(), "watch from a bookmark {what}: expected an invalid bookmark, got {err:?}");
    }
}

/// A kind watch resumed from a bookmark in the middle replays exactly the suffix, then live events;
/// queries apply to the replay, and a single-resource watch resumes from the same bookmarks.
pub async fn resume_from_bookmark(state: Arc<dyn State>) {
    let ns = namespace("resume-from-bookmark");
    let kind = path_kind(&ns);
    let mut live = Reader::new(
        "the live watch",
        ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await,
        false,
    );

    let ids: Vec<String> = (0..5).map(|index| format!("resume/{index}")).collect();
    for id in &ids {
        ok(format!("create {id}"), state.create_dynamic(path(&ns, id), CreateOptions::default())).await;
    }
    let mut events = Vec::new();
    for id in &ids {
        let event = live.next().await;
        check_event(&event, EventType::Created, &path_pointer(&ns, id));
        assert!(event.bookmark().is_some(), "a created event should carry a bookmark: {event:?}");
        events.push(event);
    }
    let bookmark = |index: usize| events[index].bookmark().cloned().expect("checked above");

    let watch =
        ok("watch kind from the middle", state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(bookmark(2))))
            .await;
    let mut resumed = Reader::new("the resumed watch", watch, true);
    for (index, expected) in events.iter().enumerate().skip(3) {
        let event = resumed.next().await;
        assert_same_event(&event, expected, &format!("resumed event {index}"));
        assert_eq!(event.bookmark(), expected.bookmark(), "a replayed event should carry its original bookmark");
    }

    let first = path_pointer(&ns, &ids[0]);
    ok("update the first resource", state.update_dynamic(path_with_version(&ns, &ids[0], 1), UpdateOptions::default()))
        .await;
    let expected = live.next().await;
    check_event(&expected, EventType::Updated, &first);
    let event = resumed.next().await;
    assert_same_event(&event, &expected, "the live event after the replay");
    assert_eq!(event.bookmark(), expected.bookmark(), "every watch should see the same bookmark for an event");

    // A query filters the replay as it filters live events.
    let third = path_pointer(&ns, &ids[3]);
    let only_third = IdQuery::new(&format!("^{}$", ids[3])).expect("a valid regular expression");
    let watch = ok(
        "watch kind from a bookmark with a query",
        state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(bookmark(1)).id(only_third)),
    )
    .await;
    let mut filtered = Reader::new("the resumed watch with a query", watch, false);
    assert_same_event(&filtered.next().await, &events[3], "the replay with a query");

    // So does a single-resource watch, from a bookmark of the kind watch.
    let watch = ok(
        "watch from a bookmark of the kind watch",
        state.watch_dynamic(&third, WatchOptions::from_bookmark(bookmark(1))),
    )
    .await;
    let mut single = Reader::new("the resumed single-resource watch", watch, false);
    assert_same_event(&single.next().await, &events[3], "the replay of a single-resource watch");

    ok(
        "update the fourth resource",
        state.update_dynamic(path_with_version(&ns, &ids[3], 1), UpdateOptions::default()),
    )
    .await;
    check_event(&filtered.next().await, EventType::Updated, &third);
    check_event(&single.next().await, EventType::Updated, &third);
}

/// Malformed requests are invalid arguments, never panics: empty or whitespace names,
/// malformed label queries, options that exclude each other.
pub async fn invalid_input(state: Arc<dyn State>) {
    let ns = namespace("invalid-input");
    let kind = path_kind(&ns);
    let pointer = path_pointer(&ns, "valid");
    let bookmark = bookmark_of_update(&state, &ns, "valid").await;

    // The flag says whether the kind (namespace and type) is the bad part.
    let bad_pointers = [
        ("an empty namespace", Pointer::new("", PathResource::TYPE, "id"), true),
        ("a blank namespace", Pointer::new(" ", PathResource::TYPE, "id"), true),
        ("a namespace with a tab", Pointer::new("a\tb", PathResource::TYPE, "id"), true),
        ("an empty type", Pointer::new(&ns, "", "id"), true),
        ("a blank type", Pointer::new(&ns, " \n", "id"), true),
        ("an empty ID", Pointer::new(&ns, PathResource::TYPE, ""), false),
        ("a tab for an ID", Pointer::new(&ns, PathResource::TYPE, "\t"), false),
        ("an ID with a newline", Pointer::new(&ns, PathResource::TYPE, "a\nb"), false),
    ];
    for (what, bad, bad_kind) in &bad_pointers {
        let resource = || {
            let mut resource = DynamicResource::new(
                Metadata::new(bad.namespace(), bad.r#type(), bad.id()),
                Spec::typed(PathResource::default()),
            );
            resource.metadata.set_version(Version::new(1));
            resource
        };
        let fresh = || {
            DynamicResource::new(
                Metadata::new(bad.namespace(), bad.r#type(), bad.id()),
                Spec::typed(PathResource::default()),
            )
        };
        expect_invalid_argument(format!("get with {what}"), state.get_dynamic(bad)).await;
        expect_invalid_argument(format!("create with {what}"), state.create_dynamic(fresh(), CreateOptions::default()))
            .await;
        expect_invalid_argument(
            format!("update with {what}"),
            state.update_dynamic(resource(), UpdateOptions::default()),
        )
        .await;
        expect_invalid_argument(format!("destroy with {what}"), state.destroy_dynamic(bad, DestroyOptions::default()))
            .await;
        expect_invalid_argument(format!("watch with {what}"), state.watch_dynamic(bad, WatchOptions::default())).await;
        expect_invalid_argument(
            format!("teardown with {what}"),
            state.teardown_dynamic(bad, TeardownOptions::default()),
        )
        .await;
        expect_invalid_argument(
            format!("teardown_and_destroy with {what}"),
            state.teardown_and_destroy_dynamic(bad, TeardownOptions::default()),
        )
        .await;
        expect_invalid_argument(format!("add_finalizers with {what}"), state.add_finalizers_dynamic(bad, &["A"])).await;
        expect_invalid_argument(format!("remove_finalizers with {what}"), state.remove_finalizers_dynamic(bad, &["A"]))
            .await;
        if *bad_kind {
            let bad_kind = bad.kind();
            expect_invalid_argument(
                format!("list with {what}"),
                state.list_dynamic(&bad_kind, &ListOptions::default()),
            )
            .await;
            expect_invalid_argument(
                format!("watch kind with {what}"),
                state.watch_kind_dynamic(&bad_kind, WatchKindOptions::bootstrap()),
            )
            .await;
        }
    }

    let term = |key: &str, op: LabelOp, values: &[&str]| LabelTerm {
        key: key.to_owned(),
        values: values.iter().map(|value| (*value).to_owned()).collect(),
        op,
        invert: false,
    };
    let bad_queries = [
        ("an empty key", LabelQuery::new().exists("")),
        ("equal without a value", LabelQuery::new().term(term("app", LabelOp::Equal, &[]))),
        ("equal with two values", LabelQuery::new().term(term("app", LabelOp::Equal, &["a", "b"]))),
        ("in without values", LabelQuery::new().term(term("app", LabelOp::In, &[]))),
        ("a numeric comparison with a word", LabelQuery::new().lt_numeric("weight", "heavy")),
    ];
    for (what, query) in bad_queries {
        let valid = LabelQuery::new().exists("app");
        expect_invalid_argument(
            format!("list with {what}"),
            state.list_dynamic(&kind, &ListOptions::default().label(query.clone())),
        )
        .await;
        expect_invalid_argument(
            format!("list with a valid query or one with {what}"),
            state.list_dynamic(&kind, &ListOptions::default().label(valid.clone()).label(query.clone())),
        )
        .await;
        expect_invalid_argument(
            format!("watch kind with {what}"),
            state.watch_kind_dynamic(&kind, WatchKindOptions::default().label(query.clone())),
        )
        .await;
        expect_invalid_argument(
            format!("watch kind with bootstrap and {what}"),
            state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap().label(valid).label(query)),
        )
        .await;
    }

    let tail_and_bookmark = WatchOptions { tail_events: 1, start_from: Some(bookmark.clone()) };
    expect_invalid_argument("watch with tail events and a bookmark", state.watch_dynamic(&pointer, tail_and_bookmark))
        .await;
    let exclusive = [
        (
            "tail events and a bookmark",
            WatchKindOptions { tail_events: 1, start_from: Some(bookmark.clone()), ..WatchKindOptions::default() },
        ),
        ("bootstrap contents and tail events", WatchKindOptions { tail_events: 1, ..WatchKindOptions::bootstrap() }),
        (
            "bootstrap contents and a bookmark",
            WatchKindOptions { start_from: Some(bookmark.clone()), ..WatchKindOptions::bootstrap() },
        ),
    ];
    for (what, options) in exclusive {
        expect_invalid_argument(format!("watch kind with {what}"), state.watch_kind_dynamic(&kind, options)).await;
    }

    let mut owned = path(&ns, "owned");
    owned.metadata.set_owner(Some("one"));
    expect_invalid_argument(
        "create owned by one with the option owner two",
        state.create_dynamic(owned, CreateOptions::owner("two")),
    )
    .await;
    let err = fails("get of the rejected create", state.get_dynamic(&path_pointer(&ns, "owned"))).await;
    assert!(err.is_not_found(), "a rejected create should store nothing, got {err:?}");
}

/// Typed reads of an in-process backend share the stored spec: `get`, `list_in`
/// and watch events return the very `Arc` that was written, never a copy.
///
/// Only in-process backends can keep this promise (a remote one decodes a new
/// spec for every read), so [`state_conformance_tests!`](crate::state_conformance_tests)
/// runs this case only when asked with `in_process`.
pub async fn typed_reads_share_specs(state: Arc<dyn State>) {
    let ns = namespace("typed-reads-share-specs");
    let pointer = path_pointer(&ns, "shared");
    let mut events =
        Reader::new("the watch", ok("watch", state.watch_dynamic(&pointer, WatchOptions::default())).await, false);
    check_event(&events.next().await, EventType::Destroyed, &pointer);

    let written = path_typed(&ns, "shared");
    let spec = Arc::clone(written.spec_arc());
    let created = ok("create_typed", state.create(written, CreateOptions::default())).await;
    assert!(Arc::ptr_eq(created.spec_arc(), &spec), "create_typed should return the written spec");

    let first = ok("get_typed_at", state.get::<PathResource>(&pointer)).await;
    let second = ok("get_typed_at again", state.get::<PathResource>(&pointer)).await;
    assert!(Arc::ptr_eq(first.spec_arc(), &spec), "get_typed_at should return the stored spec, not a copy");
    assert!(Arc::ptr_eq(first.spec_arc(), second.spec_arc()), "two reads should share one spec");

    let listed = ok("list_typed_in", state.list_in::<PathResource>(&ns, &ListOptions::default())).await;
    assert_eq!(listed.len(), 1);
    assert!(Arc::ptr_eq(listed[0].spec_arc(), &spec), "list_typed_in should return the stored spec, not a copy");

    let event = events.next().await;
    let shared = check_event(&event, EventType::Created, &pointer).spec.downcast::<PathResource>();
    assert!(shared.is_some_and(|shared| Arc::ptr_eq(&shared, &spec)), "watch events should carry the stored spec");
}

// Shared steps of the cases above.

async fn check_watch_kind(state: Arc<dyn State>, aggregated: bool) {
    let ns = namespace(if aggregated { "watch-kind-aggregated" } else { "watch-kind" });
    let kind = path_kind(&ns);
    let path1 = path_pointer(&ns, "var/db");
    let path2 = path_pointer(&ns, "var/tmp");

    ok("create path1", state.create_dynamic(path(&ns, "var/db"), CreateOptions::default())).await;
    let mut events = Reader::new(
        "the kind watch",
        ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await,
        aggregated,
    );

    let created2 = ok("create path2", state.create_dynamic(path(&ns, "var/tmp"), CreateOptions::default())).await;
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Created, &path2).metadata, created2.metadata);

    ok("teardown path1", state.teardown_dynamic(&path1, TeardownOptions::default())).await;
    ok("destroy path1", state.destroy_dynamic(&path1, DestroyOptions::default())).await;
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &path1).metadata.phase(), Phase::TearingDown);
    let old = event.old().expect("an updated event carries the old resource");
    assert_eq!(*old.metadata.pointer(), path1);
    assert_eq!(old.metadata.phase(), Phase::Running);
    check_event(&events.next().await, EventType::Destroyed, &path1);

    let updated2 =
        ok("update path2", state.update_dynamic(DynamicResource::clone(&created2), UpdateOptions::default())).await;
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &path2).metadata.version(), updated2.metadata.version());
    let old = event.old().expect("an updated event carries the old resource");
    assert_eq!(*old.metadata.pointer(), path2);
    assert_eq!(old.metadata.version(), created2.metadata.version());

    let watch = ok("watch kind with bootstrap", state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap())).await;
    let mut bootstrapped = Reader::new("the bootstrapped kind watch", watch, aggregated);
    let listed = ok("list", state.list_dynamic(&kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["var/tmp"]);
    for resource in &listed {
        let event = bootstrapped.next().await;
        let created = check_event(&event, EventType::Created, resource.metadata.pointer());
        assert_eq!(
            created.metadata.version(),
            resource.metadata.version(),
            "bootstrap should carry the stored version"
        );
    }
    check_bootstrapped(&bootstrapped.next().await, &kind);

    let updated2 =
        ok("update path2 again", state.update_dynamic(DynamicResource::clone(&updated2), UpdateOptions::default()))
            .await;
    for reader in [&mut events, &mut bootstrapped] {
        let event = reader.next().await;
        assert_eq!(check_event(&event, EventType::Updated, &path2).metadata.version(), updated2.metadata.version());
    }
}

async fn check_watch_kind_with_tail_events(state: Arc<dyn State>, aggregated: bool) {
    let ns =
        namespace(if aggregated { "watch-kind-aggregated-with-tail-events" } else { "watch-kind-with-tail-events" });
    let kind = path_kind(&ns);
    let mut live = Reader::new(
        "the live kind watch",
        ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await,
        aggregated,
    );

    let id = "res/watch-kind-with-tail-events";
    let pointer = path_pointer(&ns, id);
    let created = ok("create", state.create_dynamic(path(&ns, id), CreateOptions::default())).await;
    let updated = ok("update", state.update_dynamic(DynamicResource::clone(&created), UpdateOptions::default())).await;
    ok("update again", state.update_dynamic(DynamicResource::clone(&updated), UpdateOptions::default())).await;
    ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(live.next().await);
    }

    let tail = ok("watch kind with tail events", state.watch_kind_dynamic(&kind, WatchKindOptions::tail(1000))).await;
    let mut tail = Reader::new("the tail kind watch", tail, aggregated);
    for (index, expected) in seen.iter().enumerate() {
        let event = tail.next().await;
        assert_same_event(&event, expected, &format!("tail event {index}"));
    }
}

async fn check_watch_kind_with_labels(state: Arc<dyn State>, aggregated: bool) {
    let ns = namespace(if aggregated { "watch-kind-aggregated-with-labels" } else { "watch-kind-with-labels" });
    let kind = path_kind(&ns);
    let path1 = path_pointer(&ns, "var/label1");
    let path2 = path_pointer(&ns, "var/label2");
    let path3 = path_pointer(&ns, "var/label3");
    let labeled = |id: &str, labels: &[(&str, &str)]| {
        let mut resource = path(&ns, id);
        for (key, value) in labels {
            resource.metadata.labels_mut().set(*key, *value);
        }
        resource
    };
    let relabel = |pointer: &Pointer, edit: fn(&mut Typed<PathResource>)| {
        let (state, pointer) = (Arc::clone(&state), pointer.clone());
        async move {
            let what = format!("relabel {pointer}");
            ok(
                what,
                state.update_with_conflicts::<PathResource, Error>(&pointer, UpdateOptions::default(), |resource| {
                    edit(resource);
                    Ok(())
                }),
            )
            .await
        }
    };

    ok(
        "create path1",
        state
            .create_dynamic(labeled("var/label1", &[("label", "label1"), ("common", "app")]), CreateOptions::default()),
    )
    .await;

    let watch = |options: WatchKindOptions| state.watch_kind_dynamic(&kind, options);
    let mut label1 = Reader::new(
        "the watch of label=label1",
        ok(
            "watch label=label1",
            watch(WatchKindOptions::bootstrap().label(LabelQuery::new().equal("label", "label1"))),
        )
        .await,
        aggregated,
    );
    let mut common = Reader::new(
        "the watch of exists(common)",
        ok("watch exists(common)", watch(WatchKindOptions::bootstrap().label(LabelQuery::new().exists("common"))))
            .await,
        aggregated,
    );
    let mut label2_or_3 = Reader::new(
        "the watch of label=label2 or label=label3",
        ok(
            "watch label=label2 or label=label3",
            watch(
                WatchKindOptions::bootstrap()
                    .label(LabelQuery::new().equal("label", "label2"))
                    .label(LabelQuery::new().equal("label", "label3")),
            ),
        )
        .await,
        aggregated,
    );

    ok(
        "create path2",
        state
            .create_dynamic(labeled("var/label2", &[("label", "label2"), ("common", "app")]), CreateOptions::default()),
    )
    .await;
    ok("create path3", state.create_dynamic(labeled("var/label3", &[("label", "label3")]), CreateOptions::default()))
        .await;

    check_event(&label1.next().await, EventType::Created, &path1);
    check_event(&common.next().await, EventType::Created, &path1);
    for reader in [&mut label1, &mut common, &mut label2_or_3] {
        check_bootstrapped(&reader.next().await, &kind);
    }
    check_event(&common.next().await, EventType::Created, &path2);
    check_event(&label2_or_3.next().await, EventType::Created, &path2);
    check_event(&label2_or_3.next().await, EventType::Created, &path3);

    // path3 starts matching exists(common): a create for that watch.
    relabel(&path3, |resource| {
        resource.metadata_mut().labels_mut().set("common", "foo");
    })
    .await;
    let event = common.next().await;
    let resource = check_event(&event, EventType::Created, &path3);
    assert_eq!(
        resource.metadata.labels().get("common"),
        Some("foo"),
        "the synthetic create should carry the new labels"
    );
    assert!(event.old().is_none());
    let event = label2_or_3.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &path3).metadata.labels().get("common"), Some("foo"));

    // path1 keeps matching both of its watches: an update with the old state.
    relabel(&path1, |resource| {
        resource.metadata_mut().labels_mut().set("app", "app-awesome");
    })
    .await;
    for reader in [&mut label1, &mut common] {
        let event = reader.next().await;
        assert!(check_event(&event, EventType::Updated, &path1).metadata.labels().contains("app"));
        let old = event.old().expect("an updated event carries the old resource");
        assert_eq!(*old.metadata.pointer(), path1);
        assert!(!old.metadata.labels().contains("app"), "the old resource should not have the new label");
    }

    // path1 stops matching exists(common): a destroy for that watch.
    relabel(&path1, |resource| {
        resource.metadata_mut().labels_mut().remove("common");
    })
    .await;
    let event = common.next().await;
    assert!(!check_event(&event, EventType::Destroyed, &path1).metadata.labels().contains("common"));
    assert!(event.old().is_none());
    let event = label1.next().await;
    assert!(!check_event(&event, EventType::Updated, &path1).metadata.labels().contains("common"));
    let old = event.old().expect("an updated event carries the old resource");
    assert!(old.metadata.labels().contains("common"));

    // Had path1's changes leaked into the watch of label2 or label3, they would come before this.
    relabel(&path2, |resource| {
        resource.metadata_mut().labels_mut().set("touched", "");
    })
    .await;
    check_event(&label2_or_3.next().await, EventType::Updated, &path2);
}

async fn check_watch_kind_with_bookmarks(state: &Arc<dyn State>, aggregated: bool, bootstrap_contents: bool) {
    let variant = format!("aggregated={aggregated} bootstrap_contents={bootstrap_contents}");
    let ns = namespace("watch-kind-with-bookmarks");
    let kind = path_kind(&ns);
    let id = "res/watch-kind-with-bookmarks";
    let pointer = path_pointer(&ns, id);

    let created = ok("create", state.create_dynamic(path(&ns, id), CreateOptions::default())).await;
    let options = if bootstrap_contents {
        WatchKindOptions::bootstrap()
    } else {
        WatchKindOptions::default().with_bootstrap_bookmark()
    };
    let mut live = Reader::new(
        format!("the kind watch ({variant})"),
        ok("watch kind", state.watch_kind_dynamic(&kind, options)).await,
        aggregated,
    );

    let updated = ok("update", state.update_dynamic(DynamicResource::clone(&created), UpdateOptions::default())).await;
    ok("update again", state.update_dynamic(DynamicResource::clone(&updated), UpdateOptions::default())).await;
    ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;

    // With bootstrap: Created (no bookmark needed), Bootstrapped, 3 updates, Destroyed.
    // Without: Noop, 3 updates, Destroyed.
    let mut events = Vec::new();
    if bootstrap_contents {
        let event = live.next().await;
        assert_eq!(check_event(&event, EventType::Created, &pointer).metadata, created.metadata, "{variant}");
        events.push(event);
        let event = live.next().await;
        check_bootstrapped(&event, &kind);
        events.push(event);
    } else {
        let event = live.next().await;
        assert!(
            matches!(&event, Event::Noop { kind: noop, .. } if *noop == kind),
            "{variant}: expected a noop event of {kind}, got {event:?}"
        );
        events.push(event);
    }
    for expected in [EventType::Updated, EventType::Updated, EventType::Updated, EventType::Destroyed] {
        let event = live.next().await;
        check_event(&event, expected, &pointer);
        events.push(event);
    }
    let first_bookmarked = usize::from(bootstrap_contents);
    for (index, event) in events.iter().enumerate().skip(first_bookmarked) {
        assert!(event.bookmark().is_some(), "{variant}: event {index} should carry a bookmark: {event:?}");
    }

    ok("create again", state.create_dynamic(path(&ns, id), CreateOptions::default())).await;

    for (index, event) in events.iter().enumerate() {
        let Some(bookmark) = event.bookmark() else { continue };
        let options = WatchKindOptions::from_bookmark(bookmark.clone());
        let watch = ok(
            format!("watch kind from the bookmark of event {index} ({variant})"),
            state.watch_kind_dynamic(&kind, options),
        )
        .await;
        let mut resumed =
            Reader::new(format!("the kind watch from the bookmark of event {index} ({variant})"), watch, aggregated);
        for (offset, expected) in events[index + 1..].iter().enumerate() {
            let event = resumed.next().await;
            let position = index + 1 + offset;
            assert_same_event(
                &event,
                expected,
                &format!("{variant}: event {position} resumed from the bookmark of event {index}"),
            );
        }
        check_event(&resumed.next().await, EventType::Created, &pointer);
    }
}

/// The events of [`write_lifecycle`].
const LIFECYCLE_EVENTS: usize = 5;

/// Create, teardown, add and remove a finalizer, destroy: five events.
async fn write_lifecycle(state: &Arc<dyn State>, ns: &str, id: &str) {
    let pointer = path_pointer(ns, id);
    ok("create", state.create_dynamic(path(ns, id), CreateOptions::default())).await;
    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    assert!(ready);
    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
}

/// Creates `id` and updates it; returns the bookmark of the update event.
async fn bookmark_of_update(state: &Arc<dyn State>, ns: &str, id: &str) -> Bookmark {
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

fn spawn_watch_for(
    state: &Arc<dyn State>,
    pointer: &Pointer,
    condition: WatchCondition<PathResource>,
) -> JoinHandle<Result<Event>> {
    let (state, pointer) = (Arc::clone(state), pointer.clone());
    tokio::spawn(async move { watch_for_path(&state, &pointer, condition).await })
}

/// `watch_for` of a path resource, as an erased event.
async fn watch_for_path(
    state: &Arc<dyn State>,
    pointer: &Pointer,
    condition: WatchCondition<PathResource>,
) -> Result<Event> {
    state.watch_for::<PathResource>(pointer, condition).await.map(Event::from)
}

async fn expect_invalid_argument<T: fmt::Debug>(what: impl Display, future: impl Future<Output = Result<T>>) {
    let err = fails(&what, future).await;
    assert!(err.is_invalid_argument(), "{what}: expected an invalid argument, got {err:?}");
}

/// The error of an edit in [`modify`], which must come back untouched.
#[derive(Debug)]
enum EditError {
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
fn namespace(case: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let random =
        RandomState::new().hash_one((SystemTime::now(), std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    format!("conformance-{case}-{random:016x}")
}

fn path_kind(ns: &str) -> Kind {
    Kind::new(ns, PathResource::TYPE)
}

fn path_pointer(ns: &str, id: &str) -> Pointer {
    Pointer::new(ns, PathResource::TYPE, id)
}

fn path_typed(ns: &str, id: &str) -> Typed<PathResource> {
    Typed::new_in(ns, id, PathResource { value: id.to_owned() })
}

fn path(ns: &str, id: &str) -> DynamicResource {
    path_typed(ns, id).into()
}

fn path_with_version(ns: &str, id: &str, version: u64) -> DynamicResource {
    let mut resource = path(ns, id);
    resource.metadata.set_version(Version::new(version));
    resource
}

fn encoded_spec(text: &str) -> EncodedSpec {
    let mut proto = vec![0x0a, u8::try_from(text.len()).expect("a short text")];
    proto.extend_from_slice(text.as_bytes());
    EncodedSpec { proto, yaml: Some(format!("value: {text}\n")) }
}

fn ids(resources: &[Arc<DynamicResource>]) -> Vec<&str> {
    resources.iter().map(|resource| resource.id()).collect()
}

fn finalizers(resource: &DynamicResource) -> Vec<&str> {
    resource.metadata.finalizers().iter().collect()
}

fn typed_spec(resource: &Arc<DynamicResource>) -> Typed<PathResource> {
    Typed::try_from(Arc::clone(resource))
        .unwrap_or_else(|err| panic!("{} should hold a PathResource: {err}", resource.metadata))
}

/// A freshly created resource: version 1, running, unowned, no finalizers.
#[track_caller]
fn assert_fresh(resource: &DynamicResource, pointer: &Pointer) {
    let metadata = &resource.metadata;
    assert_eq!(*metadata.pointer(), *pointer);
    assert_eq!(metadata.version(), Version::new(1), "create should store version 1");
    assert_eq!(metadata.phase(), Phase::Running, "create should store a running resource");
    assert_eq!(metadata.owner(), None, "create without an owner should store an unowned resource");
    assert!(metadata.finalizers().is_empty());
}

/// The spec the fixtures write: the resource's own ID.
#[track_caller]
fn assert_path_spec(resource: &Arc<DynamicResource>) {
    assert_eq!(
        typed_spec(resource).value,
        resource.id(),
        "{}: the spec should come back as written",
        resource.metadata
    );
}

/// Checks an event's type and resource; returns the resource.
#[track_caller]
fn check_event<'a>(event: &'a Event, expected: EventType, pointer: &Pointer) -> &'a Arc<DynamicResource> {
    assert_eq!(event.event_type(), expected, "expected a {expected:?} event of {pointer}, got {event:?}");
    let resource = resource_of(event);
    assert_eq!(*resource.metadata.pointer(), *pointer, "expected a {expected:?} event of {pointer}, got {event:?}");
    resource
}

#[track_caller]
fn check_bootstrapped(event: &Event, kind: &Kind) {
    assert!(
        matches!(event, Event::Bootstrapped { kind: bootstrapped, .. } if bootstrapped == kind),
        "expected the bootstrapped event of {kind}, got {event:?}"
    );
}

#[track_caller]
fn resource_of(event: &Event) -> &Arc<DynamicResource> {
    event.resource().unwrap_or_else(|| panic!("expected an event with a resource, got {event:?}"))
}

/// Same type, resource and old resource; bookmarks aside.
#[track_caller]
fn assert_same_event(actual: &Event, expected: &Event, what: &str) {
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

async fn within<F: Future>(what: impl Display, future: F) -> F::Output {
    match tokio::time::timeout(STEP_TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {STEP_TIMEOUT:?} waiting for {what}"),
    }
}

async fn ok<T>(what: impl Display, future: impl Future<Output = Result<T>>) -> T {
    match within(&what, future).await {
        Ok(value) => value,
        Err(err) => panic!("{what} failed: {err:?}"),
    }
}

async fn fails<T: fmt::Debug>(what: impl Display, future: impl Future<Output = Result<T>>) -> Error {
    match within(&what, future).await {
        Ok(value) => panic!("{what} should have failed, got {value:?}"),
        Err(err) => err,
    }
}

/// Waits for a task, passing its panic on.
async fn join<T>(what: impl Display, task: JoinHandle<T>) -> T {
    match within(&what, task).await {
        Ok(value) => value,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => panic!("{what} was cancelled: {err}"),
    }
}

/// Reads a watch event by event, or batch by batch for the aggregated variants.
struct Reader {
    name: String,
    watch: Watch,
    aggregated: bool,
    pending: VecDeque<Event>,
}

impl Reader {
    fn new(name: impl Into<String>, watch: Watch, aggregated: bool) -> Self {
        Reader { name: name.into(), watch, aggregated, pending: VecDeque::new() }
    }

    /// The next event; panics when the watch ends.
    async fn next(&mut self) -> Event {
        match self.try_next().await {
            Some(event) => event,
            None => panic!("{} ended unexpectedly", self.name),
        }
    }

    /// The next event, or `None` when the watch has ended.
    async fn try_next(&mut self) -> Option<Event> {
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
