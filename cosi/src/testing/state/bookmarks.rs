//! Bookmarks: resuming watches from them, and rejecting those that are not the watch's own.

use super::support::*;

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
        assert_eq!(check_event(&event, EventType::Created, &pointer).metadata(), created.metadata(), "{variant}");
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
