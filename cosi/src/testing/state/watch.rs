//! Watches of one resource and of a kind: events, tail events, label queries, `watch_for`, overruns.

use super::support::*;

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

/// `watch_for` resolves on creation, on an existing match, on teardown and on destruction.
pub async fn watch_for(state: Arc<dyn State>) {
    let ns = namespace("watch-for");
    let pointer = path_pointer(&ns, "tmp/one");

    let created = spawn_watch_for(&state, &pointer, WatchCondition::new().event_types([EventType::Created]));
    let stored = ok("create", state.create_dynamic(path(&ns, "tmp/one"), CreateOptions::default())).await;
    let event = ok("watch_for created", join("watch_for created", created)).await;
    assert_eq!(event.event_type(), EventType::Created);
    assert_eq!(resource_of(&event).metadata(), stored.metadata(), "watch_for should return the created resource");

    let event =
        ok("watch_for finalizers empty", watch_for_path(&state, &pointer, WatchCondition::new().finalizers_empty()))
            .await;
    assert_eq!(resource_of(&event).metadata(), stored.metadata(), "watch_for should match the current state");

    let tearing_down = spawn_watch_for(&state, &pointer, WatchCondition::new().phases([Phase::TearingDown]));
    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    assert!(ready);
    let event = ok("watch_for tearing down", join("watch_for tearing down", tearing_down)).await;
    assert_eq!(resource_of(&event).id(), pointer.id());
    assert_eq!(resource_of(&event).metadata().phase(), Phase::TearingDown);

    let destroyed = spawn_watch_for(&state, &pointer, WatchCondition::new().event_types([EventType::Destroyed]));
    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
    let event = ok("watch_for destroyed", join("watch_for destroyed", destroyed)).await;
    check_destroyed(&event, &pointer);
}

/// A single-resource watch: the initial state, then every change of that resource.
pub async fn watch(state: Arc<dyn State>) {
    let ns = namespace("watch");
    let pointer = path_pointer(&ns, "tmp/two");
    let mut events =
        Reader::new("the watch", ok("watch", state.watch_dynamic(&pointer, WatchOptions::default())).await, false);

    let initial = events.next().await;
    check_absent(&initial, &pointer);

    let created = ok("create", state.create_dynamic(path(&ns, "tmp/two"), CreateOptions::default())).await;
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Created, &pointer).metadata(), created.metadata());

    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::default())).await;
    assert!(ready);
    let event = events.next().await;
    let resource = check_event(&event, EventType::Updated, &pointer);
    assert_eq!(resource.metadata().phase(), Phase::TearingDown);
    let old = event.old().expect("an updated event carries the old resource");
    assert_eq!(*old.metadata().pointer(), pointer);
    assert_eq!(old.metadata().phase(), Phase::Running);

    ok("add a finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    let event = events.next().await;
    assert!(check_event(&event, EventType::Updated, &pointer).metadata().finalizers().has("A"));

    ok("remove the finalizer", state.remove_finalizers_dynamic(&pointer, &["A"])).await;
    let event = events.next().await;
    let last = check_event(&event, EventType::Updated, &pointer).clone();
    assert!(last.metadata().finalizers().is_empty());

    ok("destroy", state.destroy_dynamic(&pointer, DestroyOptions::default())).await;
    let event = events.next().await;
    let destroyed = check_event(&event, EventType::Destroyed, &pointer);
    assert_eq!(destroyed.metadata(), last.metadata(), "a destroyed event should carry the last stored resource");
}

/// Tail events of a single-resource watch replay what a live watch saw.
pub async fn watch_with_tail_events(state: Arc<dyn State>) {
    let ns = namespace("watch-with-tail-events");
    let pointer = path_pointer(&ns, "res/watch-with-tail-events");
    let mut live =
        Reader::new("the live watch", ok("watch", state.watch_dynamic(&pointer, WatchOptions::default())).await, false);
    check_destroyed(&live.next().await, &pointer);

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

/// Tail events of one resource count that resource's events only, however
/// the history interleaves them with another's, and the watch goes on with
/// that resource's changes alone (Go walks back until it has found as many
/// of the ID's events as asked for).
pub async fn watch_with_tail_events_of_interleaved_ids(state: Arc<dyn State>) {
    let ns = namespace("watch-tail-interleaved");
    let a = path_pointer(&ns, "a");
    let mut live =
        Reader::new("the live watch of a", ok("watch", state.watch_dynamic(&a, WatchOptions::default())).await, false);
    check_destroyed(&live.next().await, &a);

    let update = |resource: DynamicResource| state.update_dynamic(resource, UpdateOptions::default());
    let mut stored_a = ok("create a", state.create_dynamic(path(&ns, "a"), CreateOptions::default())).await;
    let mut stored_b = ok("create b", state.create_dynamic(path(&ns, "b"), CreateOptions::default())).await;
    for _ in 0..3 {
        stored_a = ok("update a", update(stored_a)).await;
        for _ in 0..2 {
            stored_b = ok("update b", update(stored_b)).await;
        }
    }
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(live.next().await);
    }

    let tail = ok("watch with two tail events", state.watch_dynamic(&a, WatchOptions::tail(2))).await;
    let mut tail = Reader::new("the tail watch of a", tail, false);
    for (index, expected) in seen[2..].iter().enumerate() {
        assert_same_event(&tail.next().await, expected, &format!("tail event {index} of a, not of b"));
    }
    ok("update b", update(stored_b)).await;
    ok("update a", update(stored_a)).await;
    let next = live.next().await;
    check_event(&next, EventType::Updated, &a);
    assert_same_event(&tail.next().await, &next, "a's next change, past b's");
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
        // What comes before the overrun is a prefix without a gap: each
        // version the one after the last.
        let mut last: Option<Version> = None;
        loop {
            let event = events.try_next().await.unwrap_or_else(|| panic!("{what} ended without reporting the overrun"));
            match event {
                Event::Errored { error: Error::BufferOverrun { kind: overrun, .. } } => {
                    assert_eq!(overrun, kind, "{what}: the overrun should name the watched kind");
                    break;
                }
                Event::Errored { error } => panic!("{what}: expected a buffer overrun, got {error:?}"),
                event => {
                    delivered += 1;
                    if let Some(resource) = event.resource() {
                        let version = resource.metadata().version();
                        if let Some(last) = last {
                            assert_eq!(version, last.next(), "{what}: a gap before the overrun, after {last}");
                        }
                        last = Some(version);
                    }
                }
            }
        }
        assert!(delivered <= OVERRUN_WRITES, "{what} delivered {delivered} events before the overrun");
        if let Some(event) = events.try_next().await {
            panic!("{what} should end after the overrun, got {event:?}");
        }
    }
}

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
    assert_eq!(check_event(&event, EventType::Created, &path2).metadata(), created2.metadata());

    ok("teardown path1", state.teardown_dynamic(&path1, TeardownOptions::default())).await;
    ok("destroy path1", state.destroy_dynamic(&path1, DestroyOptions::default())).await;
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &path1).metadata().phase(), Phase::TearingDown);
    let old = event.old().expect("an updated event carries the old resource");
    assert_eq!(*old.metadata().pointer(), path1);
    assert_eq!(old.metadata().phase(), Phase::Running);
    check_destroyed(&events.next().await, &path1);

    let updated2 =
        ok("update path2", state.update_dynamic(DynamicResource::clone(&created2), UpdateOptions::default())).await;
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &path2).metadata().version(), updated2.metadata().version());
    let old = event.old().expect("an updated event carries the old resource");
    assert_eq!(*old.metadata().pointer(), path2);
    assert_eq!(old.metadata().version(), created2.metadata().version());

    let watch = ok("watch kind with bootstrap", state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap())).await;
    let mut bootstrapped = Reader::new("the bootstrapped kind watch", watch, aggregated);
    let listed = ok("list", state.list_dynamic(&kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["var/tmp"]);
    for (i, resource) in listed.iter().enumerate() {
        let event = bootstrapped.next().await;
        if aggregated && i == 0 {
            // One batch: every Created of the bootstrap, then Bootstrapped (as Go's).
            assert_eq!(bootstrapped.pending.len(), listed.len(), "the bootstrap should come in one batch");
        }
        let created = check_event(&event, EventType::Created, resource.metadata().pointer());
        assert_eq!(
            created.metadata().version(),
            resource.metadata().version(),
            "bootstrap should carry the stored version"
        );
    }
    check_bootstrapped(&bootstrapped.next().await, &kind);

    let updated2 =
        ok("update path2 again", state.update_dynamic(DynamicResource::clone(&updated2), UpdateOptions::default()))
            .await;
    for reader in [&mut events, &mut bootstrapped] {
        let event = reader.next().await;
        assert_eq!(check_event(&event, EventType::Updated, &path2).metadata().version(), updated2.metadata().version());
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
            resource.metadata_mut().labels_mut().set(*key, *value);
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
        resource.metadata().labels().get("common"),
        Some("foo"),
        "the synthetic create should carry the new labels"
    );
    assert!(event.old().is_none());
    let event = label2_or_3.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &path3).metadata().labels().get("common"), Some("foo"));

    // path1 keeps matching both of its watches: an update with the old state.
    relabel(&path1, |resource| {
        resource.metadata_mut().labels_mut().set("app", "app-awesome");
    })
    .await;
    for reader in [&mut label1, &mut common] {
        let event = reader.next().await;
        assert!(check_event(&event, EventType::Updated, &path1).metadata().labels().contains("app"));
        let old = event.old().expect("an updated event carries the old resource");
        assert_eq!(*old.metadata().pointer(), path1);
        assert!(!old.metadata().labels().contains("app"), "the old resource should not have the new label");
    }

    // path1 stops matching exists(common): a destroy for that watch.
    relabel(&path1, |resource| {
        resource.metadata_mut().labels_mut().remove("common");
    })
    .await;
    let event = common.next().await;
    assert!(!check_event(&event, EventType::Destroyed, &path1).metadata().labels().contains("common"));
    assert!(event.old().is_none());
    let event = label1.next().await;
    assert!(!check_event(&event, EventType::Updated, &path1).metadata().labels().contains("common"));
    let old = event.old().expect("an updated event carries the old resource");
    assert!(old.metadata().labels().contains("common"));

    // Had path1's changes leaked into the watch of label2 or label3, they would come before this.
    relabel(&path2, |resource| {
        resource.metadata_mut().labels_mut().set("touched", "");
    })
    .await;
    check_event(&label2_or_3.next().await, EventType::Updated, &path2);
}

/// An observer sees every change of its kind as the write commits (before the
/// write returns), the very events a kind watch delivers in the same order
/// with the same bookmarks, nothing of other kinds, and nothing once its
/// observation is dropped.
///
/// Only in-process states offer observers, so
/// [`state_conformance_tests!`](crate::state_conformance_tests) runs this case
/// only when asked with `in_process`.
pub async fn observers(state: Arc<dyn State>) {
    struct Collect(Arc<parking_lot::Mutex<Vec<Event>>>);

    impl Observer for Collect {
        fn observe(&self, event: &Event) {
            self.0.lock().push(event.clone());
        }
    }

    let ns = namespace("observers");
    let kind = path_kind(&ns);
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let observation = state
        .in_process()
        .and_then(|in_process| in_process.observe_kind(&kind, Arc::new(Collect(Arc::clone(&seen)))))
        .expect("an in-process state offers observers")
        .expect("observe the kind");
    let mut watch = Reader::new(
        "the kind watch",
        ok("watch kind", state.watch_kind_dynamic(&kind, WatchKindOptions::default())).await,
        false,
    );

    ok("create", state.create_dynamic(path(&ns, "first"), CreateOptions::default())).await;
    assert_eq!(seen.lock().len(), 1, "the observer should have seen the create before it returned");
    ok(
        "create elsewhere",
        state.create_dynamic(path(&namespace("observers-other"), "first"), CreateOptions::default()),
    )
    .await;
    write_lifecycle(&state, &ns, "second").await;

    let observed = seen.lock().clone();
    assert_eq!(observed.len(), 1 + LIFECYCLE_EVENTS, "the observer should see every change of its kind: {observed:?}");
    for seen in &observed {
        let watched = watch.next().await;
        assert_eq!(seen.event_type(), watched.event_type(), "observed {seen:?}, watched {watched:?}");
        assert_eq!(resource_of(seen), resource_of(&watched), "observed {seen:?}, watched {watched:?}");
        assert!(seen.bookmark().is_some(), "an observed event should carry its bookmark: {seen:?}");
        assert_eq!(seen.bookmark(), watched.bookmark(), "observed {seen:?}, watched {watched:?}");
    }

    drop(observation);
    ok("create after the observation", state.create_dynamic(path(&ns, "third"), CreateOptions::default())).await;
    assert_eq!(seen.lock().len(), 1 + LIFECYCLE_EVENTS, "a dropped observation should see nothing more");
}
