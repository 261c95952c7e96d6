//! Teardown and destroy: finalizers, idempotence, races, and what watchers learn.

use super::support::*;

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
    check_absent(&event, &r1);

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
    check_destroyed(&event, &r1);
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
        check_event(&event, EventType::Updated, &r2).metadata().phase(),
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
    assert_eq!(*resource.metadata().pointer(), r2);
    assert_eq!(resource.metadata().phase(), Phase::TearingDown, "watch_for should return the torn down resource");
    let event = r2_events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &r2).metadata().phase(), Phase::TearingDown);
    assert!(!r2_destroyed.is_finished(), "a teardown should not look like a destroy");

    ok("destroy r2", state.destroy_dynamic(&r2, DestroyOptions::default())).await;
    let event = ok("watch_for r2 destroyed", join("watch_for r2 destroyed", r2_destroyed)).await;
    check_destroyed(&event, &r2);
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
                        if resource.metadata().phase() == Phase::TearingDown
                            && resource.metadata().finalizers().has(FINALIZER) =>
                    {
                        state.remove_finalizers_dynamic(resource.metadata().pointer(), &[FINALIZER]).await?;
                    }
                    Event::Destroyed { pointer: destroyed, .. } if *destroyed == pointer => return Ok(()),
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

/// A second teardown writes nothing, whoever asks; an empty owner is none;
/// teardown of a missing resource is not found.
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
    assert_eq!(torn_down.metadata().phase(), Phase::TearingDown);

    let ready = ok("second teardown", state.teardown_dynamic(&pointer, TeardownOptions::owner("owner"))).await;
    assert!(ready, "a second teardown should report the same readiness");
    // Torn down already, there is nothing to write: another writer's teardown
    // reports the readiness too, and is no owner conflict (as in Go COSI).
    let ready = ok("a teardown by another", state.teardown_dynamic(&pointer, TeardownOptions::owner("another"))).await;
    assert!(ready, "a teardown by another of a resource torn down should report its readiness");
    let got = ok("get", state.get_dynamic(&pointer)).await;
    assert_eq!(got.metadata().version(), torn_down.metadata().version(), "a second teardown should write nothing");

    // Had the second teardown written, its event would come before this one.
    ok("create a barrier", state.create_dynamic(path(&ns, "barrier"), CreateOptions::default())).await;
    check_event(&events.next().await, EventType::Created, &path_pointer(&ns, "barrier"));

    // An empty owner is none: it tears down and destroys an unowned resource.
    let unowned = path_pointer(&ns, "unowned");
    ok("create unowned", state.create_dynamic(path(&ns, "unowned"), CreateOptions::default())).await;
    ok("teardown as the empty owner", state.teardown_dynamic(&unowned, TeardownOptions::owner(""))).await;
    ok("destroy as the empty owner", state.destroy_dynamic(&unowned, DestroyOptions::owner(""))).await;

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
