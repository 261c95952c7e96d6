//! Create, read, update and destroy: owners, conflicts, finalizers, `modify`, shared specs.

use super::support::*;

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
        let pointer = created.metadata().pointer();
        let got = ok(format!("get {pointer}"), state.get_dynamic(pointer)).await;
        assert_eq!(got.metadata(), created.metadata(), "get should return what create stored");
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
    assert_eq!(created.spec().as_encoded(), Some(&spec), "create should store an encoded spec as it is");
    let got = ok("get the encoded resource", state.get_dynamic(&encoded)).await;
    assert_eq!(got.spec().as_encoded(), Some(&spec), "get should return an encoded spec as it was written");
    let listed = ok("list the encoded kind", state.list_dynamic(&encoded_kind, &ListOptions::default())).await;
    assert_eq!(ids(&listed), ["encoded"], "each type should list only its own resources");
    assert_eq!(listed[0].spec().as_encoded(), Some(&spec));

    let next_spec = encoded_spec("second");
    let next = DynamicResource::encoded(got.metadata().clone(), next_spec.clone());
    let updated = ok("update the encoded resource", state.update_dynamic(next, UpdateOptions::default())).await;
    assert_eq!(updated.metadata().version(), Version::new(2));
    let got = ok("get the updated encoded resource", state.get_dynamic(&encoded)).await;
    assert_eq!(got.spec().as_encoded(), Some(&next_spec), "update should replace an encoded spec");
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
    assert_eq!(stored.metadata(), updated.metadata(), "the stored resource should be the returned one");

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
    assert_eq!(*got.metadata().pointer(), path1);
    assert_eq!(got.metadata().owner(), Some(owner1), "create should record the owner");
    let got = ok("get path2", state.get_dynamic(&path2)).await;
    assert_eq!(*got.metadata().pointer(), path2);
    assert_eq!(got.metadata().owner(), Some(owner2), "create should record the owner");

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
    assert_eq!(updated.metadata().owner(), Some(owner2), "an update should keep the owner");

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
    assert!(added.metadata().finalizers().has("fin1"));
    assert_eq!(added.metadata().owner(), Some(owner2), "editing finalizers should keep the owner");
    let removed =
        ok("remove a finalizer from an owned resource", state.remove_finalizers_dynamic(&path2, &["fin1"])).await;
    assert!(removed.metadata().finalizers().is_empty());
    assert_eq!(removed.metadata().owner(), Some(owner2), "editing finalizers should keep the owner");
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
    let mut finalizers: Vec<&str> = stored.metadata().finalizers().iter().collect();
    finalizers.sort_unstable();
    assert_eq!(finalizers, ["D", "E", "F", "G", "H"], "every concurrent finalizer edit should land");
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

/// Updates need the stored version and, by default, a running resource.
pub async fn update(state: Arc<dyn State>) {
    let ns = namespace("update");
    let pointer = path_pointer(&ns, "tmp/path1");

    let err =
        fails("update of a missing resource", state.update_dynamic(path(&ns, "tmp/path1"), UpdateOptions::default()))
            .await;
    assert!(err.is_not_found(), "update of a missing resource: expected not found, got {err:?}");

    let created = ok("create", state.create_dynamic(path(&ns, "tmp/path1"), CreateOptions::default())).await;
    assert_ne!(created.metadata().version(), Version::UNDEFINED, "create should set the version");

    for (what, version) in
        [("a stale version", Version::UNDEFINED), ("a future version", created.metadata().version().next())]
    {
        let mut stale = DynamicResource::clone(&created);
        stale.metadata_mut().set_version(version);
        let err = fails(format!("update with {what}"), state.update_dynamic(stale, UpdateOptions::default())).await;
        assert!(
            matches!(err, Error::VersionConflict { .. }) && err.is_conflict(),
            "update with {what}: expected a version conflict, got {err:?}"
        );
    }

    let edited = DynamicResource::new(created.metadata().clone(), PathResource { value: "edited".to_owned() });
    let updated = ok("update with the stored version", state.update_dynamic(edited, UpdateOptions::default())).await;
    assert_eq!(updated.metadata().version(), created.metadata().version().next());
    let got = ok("get", state.get_dynamic(&pointer)).await;
    assert_eq!(got.metadata(), updated.metadata());
    assert_eq!(typed_spec(&got).value, "edited", "update should store the new spec");
    // The version read before that update is stale now.
    let stale = DynamicResource::clone(&created);
    let err = fails("update with the version before", state.update_dynamic(stale, UpdateOptions::default())).await;
    assert!(
        matches!(err, Error::VersionConflict { .. }),
        "update with the version before the last update: expected a version conflict, got {err:?}"
    );

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
    assert_eq!(updated.metadata().phase(), Phase::TearingDown);
    let options = UpdateOptions::default().expected_phase(None);
    ok("update expecting any phase", state.update_dynamic(DynamicResource::clone(&updated), options)).await;
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
    assert_eq!(added.metadata().version(), Version::new(2));
    assert_eq!(finalizers(check_event(&events.next().await, EventType::Updated, &pointer)), ["A", "B"]);

    let same = ok("add a present finalizer", state.add_finalizers_dynamic(&pointer, &["A"])).await;
    assert_eq!(same.metadata().version(), Version::new(2), "adding a present finalizer should write nothing");
    let same = ok("remove an absent finalizer", state.remove_finalizers_dynamic(&pointer, &["C"])).await;
    assert_eq!(same.metadata().version(), Version::new(2), "removing an absent finalizer should write nothing");

    let ready = ok("teardown", state.teardown_dynamic(&pointer, TeardownOptions::owner("owner"))).await;
    assert!(!ready, "teardown with finalizers should not be ready");
    let event = events.next().await;
    assert_eq!(check_event(&event, EventType::Updated, &pointer).metadata().phase(), Phase::TearingDown);

    let added = ok("add a finalizer while tearing down", state.add_finalizers_dynamic(&pointer, &["C"])).await;
    assert_eq!(finalizers(&added), ["A", "B", "C"]);
    assert_eq!(added.metadata().owner(), Some("owner"));
    assert_eq!(added.metadata().phase(), Phase::TearingDown);
    assert_eq!(finalizers(check_event(&events.next().await, EventType::Updated, &pointer)), ["A", "B", "C"]);

    let removed = ok("remove all finalizers", state.remove_finalizers_dynamic(&pointer, &["A", "B", "C"])).await;
    assert!(removed.metadata().finalizers().is_empty());
    assert!(check_event(&events.next().await, EventType::Updated, &pointer).metadata().finalizers().is_empty());

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
    check_absent(&events.next().await, &pointer);

    let written = path_typed(&ns, "shared");
    let spec: *const PathResource = written.spec();
    let created = ok("create_typed", state.create(written, CreateOptions::default())).await;
    assert!(std::ptr::eq(created.spec(), spec), "create_typed should return the written spec");

    let first = ok("get_typed_at", state.get::<PathResource>(&pointer)).await;
    let second = ok("get_typed_at again", state.get::<PathResource>(&pointer)).await;
    assert!(std::ptr::eq(first.spec(), spec), "get_typed_at should return the stored spec, not a copy");
    assert!(std::ptr::eq(first.spec(), second.spec()), "two reads should share one spec");

    let listed = ok("list_typed_in", state.list_in::<PathResource>(&ns, &ListOptions::default())).await;
    assert_eq!(listed.len(), 1);
    assert!(std::ptr::eq(listed[0].spec(), spec), "list_typed_in should return the stored spec, not a copy");

    let event = events.next().await;
    let shared = check_event(&event, EventType::Created, &pointer).spec().downcast::<PathResource>();
    assert!(shared.is_some_and(|shared| std::ptr::eq(shared, spec)), "watch events should carry the stored spec");
}
