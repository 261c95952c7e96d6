//! What only a shared, remote state shows: clients racing across connections,
//! a watch surviving an etcd restart (and ending with an error when etcd
//! stays away), compacted history, foreign values, responses too large to
//! receive, and leader election between processes.
//!
//! Each test starts its own etcd (or shares the binary's one when it leaves
//! the server alone); without an etcd binary they fail and say how to install
//! etcd (or are skipped with `COSI_ALLOW_SKIP=1` outside CI).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cosi::prelude::*;
use cosi::resource::Metadata;
use cosi::state::{EventType, WatchCondition};
use cosi_etcd::testing::{EtcdServer, Proxy, Raw};
use cosi_etcd::{ElectionOptions, EtcdState, Options};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Counters.test.cosi.dev", namespace = "default")]
struct Counter {
    count: u64,
}

/// A guard against hangs; never a measurement.
const LIMIT: Duration = Duration::from_secs(30);

async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn unique_prefix(test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("/etcd-tests/{test}/{}/{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

async fn connect(endpoint: &str, prefix: &str) -> EtcdState {
    EtcdState::connect(&[endpoint], Options::prefix(prefix)).await.expect("connect to etcd")
}

/// Two clients on one prefix: separate connections, as two processes would have.
async fn two_clients(test: &str) -> Option<(EtcdState, EtcdState)> {
    let server = EtcdServer::shared()?;
    let prefix = unique_prefix(test);
    Some((connect(&server.endpoint(), &prefix).await, connect(&server.endpoint(), &prefix).await))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_clients_lose_no_update_and_create_once() {
    let Some((a, b)) = two_clients("racing").await else { return };
    let pointer = Counter::pointer("shared");
    a.create(Typed::new("shared", Counter::default()), CreateOptions::default()).await.unwrap();

    let mut tasks = Vec::new();
    for state in [&a, &b] {
        for _ in 0..10 {
            let (state, pointer) = (state.clone(), pointer.clone());
            tasks.push(tokio::spawn(async move {
                state
                    .update_with_conflicts::<Counter, cosi::Error>(&pointer, UpdateOptions::default(), |counter| {
                        counter.count += 1;
                        Ok(())
                    })
                    .await
            }));
        }
    }
    for task in tasks {
        within("an increment", task).await.unwrap().unwrap();
    }
    let stored = b.get::<Counter>("shared").await.unwrap();
    assert_eq!(stored.count, 20, "every increment of both clients should land");
    assert_eq!(stored.metadata().version(), Version::new(21));

    // Both clients create the same resources at once: exactly one create of each wins.
    for round in 0..10 {
        let id = format!("created-{round}");
        let (first, second) = tokio::join!(
            a.create(Typed::new(&id, Counter { count: 1 }), CreateOptions::owner("a")),
            b.create(Typed::new(&id, Counter { count: 2 }), CreateOptions::owner("b")),
        );
        let winner = match (first, second) {
            (Ok(_), Err(err)) => {
                assert!(matches!(err, cosi::Error::AlreadyExists(_)), "{err:?}");
                "a"
            }
            (Err(err), Ok(_)) => {
                assert!(matches!(err, cosi::Error::AlreadyExists(_)), "{err:?}");
                "b"
            }
            other => panic!("exactly one create of {id} should succeed, got {other:?}"),
        };
        let stored = a.get::<Counter>(&id).await.unwrap();
        assert_eq!(stored.metadata().owner(), Some(winner), "the stored resource should be the winner's");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_and_versions_hold_across_clients() {
    let Some((a, b)) = two_clients("ownership").await else { return };
    let pointer = Counter::pointer("owned");
    let created = a.create(Typed::new("owned", Counter::default()), CreateOptions::owner("a")).await.unwrap();

    for owner in [None, Some("b")] {
        let err =
            b.update_dynamic(created.clone().into(), UpdateOptions::default().with_owner(owner)).await.unwrap_err();
        assert!(err.is_owner_conflict(), "update as {owner:?}: {err:?}");
        let err = b.destroy_dynamic(&pointer, DestroyOptions { owner: owner.map(Into::into) }).await.unwrap_err();
        assert!(err.is_owner_conflict(), "destroy as {owner:?}: {err:?}");
    }

    // `a` remembers version 1; `b` writes version 2 behind its back. Neither a
    // stale memory nor a stale caller gets through, and a current caller does.
    let updated = b.update_dynamic(created.clone().into(), UpdateOptions::owner("a")).await.unwrap();
    assert_eq!(updated.metadata().version(), Version::new(2));
    let err = a.update_dynamic(created.clone().into(), UpdateOptions::owner("a")).await.unwrap_err();
    assert!(matches!(err, cosi::Error::VersionConflict { .. }), "{err:?}");
    let again = a.update_dynamic(DynamicResource::clone(&updated), UpdateOptions::owner("a")).await.unwrap();
    assert_eq!(again.metadata().version(), Version::new(3));

    // `b` destroys and recreates it under another owner: `a` must see the new owner.
    b.destroy_dynamic(&pointer, DestroyOptions::owner("a")).await.unwrap();
    b.create(Typed::new("owned", Counter::default()), CreateOptions::owner("b")).await.unwrap();
    let err = a.update_dynamic(DynamicResource::clone(&again), UpdateOptions::owner("a")).await.unwrap_err();
    assert!(err.is_owner_conflict(), "{err:?}");
    let err = a.destroy_dynamic(&pointer, DestroyOptions::owner("a")).await.unwrap_err();
    assert!(err.is_owner_conflict(), "{err:?}");
    // Finalizers may be edited by anyone, across clients too.
    a.add_finalizers_dynamic(&pointer, &["from-a"]).await.unwrap();
    let err = b.destroy_dynamic(&pointer, DestroyOptions::owner("b")).await.unwrap_err();
    assert!(matches!(err, cosi::Error::PendingFinalizers { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_resume_by_revision_after_etcd_restarts() {
    let Some(mut server) = EtcdServer::start() else { return };
    let prefix = unique_prefix("restart");
    let state = connect(&server.endpoint(), &prefix).await;
    let kind = Counter::kind();
    let mut watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
    let mut single = state.watch_dynamic(&Counter::pointer("second"), WatchOptions::default()).await.unwrap();
    let event = within("the initial event", single.recv()).await.unwrap();
    assert_eq!(event.event_type(), EventType::Destroyed);

    state.create(Typed::new("first", Counter::default()), CreateOptions::default()).await.unwrap();
    let event = within("the first create", watch.recv()).await.unwrap();
    assert_eq!(event.resource().map(|r| r.id()), Some("first"));

    server.restart();

    // Another client writes as soon as etcd is back, likely before the watches
    // reconnect: they must pick these events up from etcd's history.
    let writer = connect(&server.endpoint(), &prefix).await;
    writer.create(Typed::new("second", Counter { count: 2 }), CreateOptions::default()).await.unwrap();
    writer.create(Typed::new("third", Counter { count: 3 }), CreateOptions::default()).await.unwrap();

    for id in ["second", "third"] {
        let event = within("an event after the restart", watch.recv()).await.unwrap();
        assert_eq!(event.event_type(), EventType::Created, "{event:?}");
        assert_eq!(event.resource().map(|r| r.id()), Some(id), "no event lost or repeated: {event:?}");
    }
    let event = within("the single watch after the restart", single.recv()).await.unwrap();
    assert_eq!(event.event_type(), EventType::Created);
    assert_eq!(event.resource().map(|r| r.id()), Some("second"));

    // The old client works again too, and its watches stay live.
    let pointer = Counter::pointer("first");
    state.destroy_dynamic(&pointer, DestroyOptions::default()).await.unwrap();
    let event = within("the destroy", watch.recv()).await.unwrap();
    assert_eq!(event.event_type(), EventType::Destroyed);
    assert_eq!(event.resource().map(|r| r.id()), Some("first"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_of_compacted_revisions_are_invalid() {
    // Compaction affects every prefix: this test has an etcd of its own.
    let Some(server) = EtcdServer::start() else { return };
    let state = connect(&server.endpoint(), &unique_prefix("compaction")).await;
    let kind = Counter::kind();
    let mut watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
    let created = state.create(Typed::new("c", Counter::default()), CreateOptions::default()).await.unwrap();
    state.update(created, UpdateOptions::default()).await.unwrap();
    let first = within("the create", watch.recv()).await.unwrap();
    let second = within("the update", watch.recv()).await.unwrap();
    let (old, recent) = (first.bookmark().unwrap().clone(), second.bookmark().unwrap().clone());

    // Resumable before the compaction.
    let mut resumed = state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(old.clone())).await.unwrap();
    let event = within("the resumed update", resumed.recv()).await.unwrap();
    assert_eq!(event.event_type(), EventType::Updated);

    let raw = Raw::new(&state);
    let revision = raw.revision().await.unwrap();
    raw.compact(revision).await.unwrap();

    let err = state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(old.clone())).await.unwrap_err();
    assert!(err.is_invalid_bookmark(), "{err:?}");
    let err = state.watch_dynamic(&Counter::pointer("c"), WatchOptions::from_bookmark(old)).await.unwrap_err();
    assert!(err.is_invalid_bookmark(), "{err:?}");
    // The compaction revision itself is kept, so its bookmark still resumes.
    let mut resumed = state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(recent)).await.unwrap();

    // Tail events cope with the lost history: they replay what is left, then go live.
    let mut tail = state.watch_kind_dynamic(&kind, WatchKindOptions::tail(10)).await.unwrap();
    state.destroy_dynamic(&Counter::pointer("c"), DestroyOptions::default()).await.unwrap();
    let event = within("the destroy after the bookmark", resumed.recv()).await.unwrap();
    assert_eq!(event.event_type(), EventType::Destroyed);
    let mut seen = Vec::new();
    while seen.last() != Some(&EventType::Destroyed) {
        let event = within("the tail, then the destroy", tail.recv()).await.unwrap();
        seen.push(event.event_type());
        assert!(seen.len() <= 2, "the tail should hold at most the one kept revision: {seen:?}");
    }
}

/// An idle watch resumes after a break even when etcd compacted, meanwhile,
/// the revisions other kinds wrote since the watch's last event: etcd's
/// progress notifications told the watch it had seen everything up to them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_watch_resumes_past_a_compaction_of_what_others_wrote() {
    // Compaction affects every prefix: an etcd of its own, which tells idle
    // watches their progress every 100 ms instead of every 10 minutes.
    let Some(server) = EtcdServer::start_with_flags(&["--experimental-watch-progress-notify-interval=100ms"]) else {
        return;
    };
    let proxy = Proxy::start(&server).await;
    let prefix = unique_prefix("idle");
    let watcher = connect(&proxy.endpoint(), &prefix).await;
    let mut watch = watcher.watch_kind_dynamic(&Counter::kind(), WatchKindOptions::default()).await.unwrap();
    let writer = connect(&server.endpoint(), &prefix).await;
    let raw = Raw::new(&writer);
    for i in 0..10 {
        raw.put(format!("/elsewhere/{i}"), "another kind's value").await.unwrap();
    }
    // Time for a few notifications to reach the idle watch; not a measurement.
    tokio::time::sleep(Duration::from_secs(2)).await;

    proxy.cut_off().await;
    raw.compact(raw.revision().await.unwrap()).await.unwrap();
    proxy.restore();
    writer.create(Typed::new("after", Counter::default()), CreateOptions::default()).await.unwrap();
    let event = within("the create after the compaction", watch.recv()).await.unwrap();
    assert_eq!(event.event_type(), EventType::Created, "resumed, not failed: {event:?}");
    assert_eq!(event.resource().map(|r| r.id()), Some("after"));
}

/// etcd leaves out the previous value of an event whose previous revision it
/// compacted, as a tail watch starting at the compaction revision reads it:
/// an update there is still an update, and a resource replaced there by a
/// foreign value is still destroyed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_at_the_compaction_revision_keep_their_type() {
    // Compaction affects every prefix: this test has an etcd of its own.
    let Some(server) = EtcdServer::start() else { return };
    let prefix = unique_prefix("compacted-previous");
    let state = connect(&server.endpoint(), &prefix).await;
    let raw = Raw::new(&state);
    let kind = Counter::kind();
    let key = |id: &str| format!("{prefix}/default/Counters.test.cosi.dev/{id}");
    let created = state.create(Typed::new("updated", Counter::default()), CreateOptions::default()).await.unwrap();
    state.create(Typed::new("overwritten", Counter::default()), CreateOptions::default()).await.unwrap();
    state.update(created, UpdateOptions::default()).await.unwrap();
    raw.compact(raw.revision().await.unwrap()).await.unwrap();

    let mut tail = state.watch_kind_dynamic(&kind, WatchKindOptions::tail(10)).await.unwrap();
    let event = within("the update at the compaction revision", tail.recv()).await.unwrap();
    assert_eq!((event.event_type(), event.resource().map(|r| r.id())), (EventType::Updated, Some("updated")));
    assert_eq!(event.resource().unwrap().metadata().version(), Version::new(2));
    assert!(event.old().is_some_and(DynamicResource::is_tombstone), "etcd no longer has the old value: {event:?}");
    drop(tail);

    // The foreign value's revision is the compaction's; a later create ends the kind's history.
    raw.put(key("overwritten"), b"not a resource".to_vec()).await.unwrap();
    let overwritten = raw.revision().await.unwrap();
    state.create(Typed::new("later", Counter::default()), CreateOptions::default()).await.unwrap();
    raw.compact(overwritten).await.unwrap();

    let mut tail = state.watch_kind_dynamic(&kind, WatchKindOptions::tail(10)).await.unwrap();
    let event = within("the foreign overwrite at the compaction revision", tail.recv()).await.unwrap();
    assert_eq!((event.event_type(), event.pointer().map(|p| p.id())), (EventType::Destroyed, Some("overwritten")));
    assert!(event.resource().is_none(), "etcd no longer has its last state: {event:?}");
    let event = within("the create after it", tail.recv()).await.unwrap();
    assert_eq!((event.event_type(), event.resource().map(|r| r.id())), (EventType::Created, Some("later")));
}

/// One foreign value under a kind's prefix (another program's key, a
/// corrupted value, a value copied under another resource's key) is left out
/// of lists and watches, and is an error only for reads of its own key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_values_are_left_out_of_lists_and_watches() {
    let Some(server) = EtcdServer::shared() else { return };
    let prefix = unique_prefix("foreign");
    let state = connect(&server.endpoint(), &prefix).await;
    let raw = Raw::new(&state);
    let kind = Counter::kind();
    let key = |id: &str| format!("{prefix}/default/Counters.test.cosi.dev/{id}");
    state.create(Typed::new("good", Counter { count: 1 }), CreateOptions::default()).await.unwrap();
    let mut watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();

    raw.put(key("garbage"), b"not a resource".to_vec()).await.unwrap();
    let good_value = raw.value(key("good")).await.unwrap().expect("the good value is stored");
    raw.put(key("copy"), good_value.clone()).await.unwrap();

    // Reads of the foreign key itself say what is wrong and where.
    let err = state.get_dynamic(&Counter::pointer("garbage")).await.unwrap_err();
    assert!(matches!(err, cosi::Error::Backend(_)), "{err:?}");
    assert!(err.to_string().contains("garbage") && err.to_string().contains("does not hold a COSI resource"), "{err}");
    let err = state.get_dynamic(&Counter::pointer("copy")).await.unwrap_err();
    assert!(err.to_string().contains("names another resource"), "{err}");
    let err = state.destroy_dynamic(&Counter::pointer("garbage"), DestroyOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("does not hold a COSI resource"), "{err}");

    // Lists and bootstrap listings leave them out.
    let listed = state.list::<Counter>(&ListOptions::default()).await.unwrap();
    assert_eq!(listed.iter().map(|counter| counter.id()).collect::<Vec<_>>(), ["good"]);
    let mut bootstrap = state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap()).await.unwrap();
    let event = within("the bootstrap", bootstrap.recv()).await.unwrap();
    assert_eq!((event.event_type(), event.resource().map(|r| r.id())), (EventType::Created, Some("good")));
    assert_eq!(within("the bootstrap's end", bootstrap.recv()).await.unwrap().event_type(), EventType::Bootstrapped);

    // A watch sees what a list would: writing the foreign values showed
    // nothing; a resource replaced by a foreign value is destroyed, and
    // created again when the foreign value is replaced by a resource.
    raw.put(key("good"), b"\xff\xfe".to_vec()).await.unwrap();
    let event = within("the foreign overwrite", watch.recv()).await.unwrap();
    assert_eq!((event.event_type(), event.resource().map(|r| r.id())), (EventType::Destroyed, Some("good")));
    assert!(state.list::<Counter>(&ListOptions::default()).await.unwrap().is_empty());
    raw.put(key("good"), good_value).await.unwrap();
    let event = within("the restored value", watch.recv()).await.unwrap();
    assert_eq!((event.event_type(), event.resource().map(|r| r.id())), (EventType::Created, Some("good")));
    raw.delete(key("garbage")).await.unwrap();
    raw.put(key("copy"), b"still not a resource".to_vec()).await.unwrap();
    state.create(Typed::new("later", Counter { count: 2 }), CreateOptions::default()).await.unwrap();
    let event = within("the next create", watch.recv()).await.unwrap();
    assert_eq!(
        (event.event_type(), event.resource().map(|r| r.id())),
        (EventType::Created, Some("later")),
        "changes between foreign values are not events"
    );

    // An encoded spec that is not ours to decode still comes back byte for byte.
    let spec = cosi::resource::EncodedSpec { proto: vec![0, 159, 146, 150], yaml: None };
    let resource = DynamicResource::encoded(Metadata::new("default", "Blobs.test.cosi.dev", "b"), spec.clone());
    state.create_dynamic(resource, CreateOptions::default()).await.unwrap();
    let got = state.get_dynamic(&Pointer::new("default", "Blobs.test.cosi.dev", "b")).await.unwrap();
    assert_eq!(got.spec().as_encoded(), Some(&spec));
}

/// A watch whose etcd stays away keeps trying for
/// `Options::watch_reconnect_timeout`, then tells its reader and ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_etcd_stays_away_ends_with_an_error() {
    let Some(mut server) = EtcdServer::start() else { return };
    let options = Options { watch_reconnect_timeout: Duration::from_secs(2), ..Options::prefix("/lost") };
    let state = EtcdState::connect(&[server.endpoint()], options).await.unwrap();
    let mut watch = state.watch_kind_dynamic(&Counter::kind(), WatchKindOptions::default()).await.unwrap();
    state.create(Typed::new("before", Counter::default()), CreateOptions::default()).await.unwrap();
    assert_eq!(within("the create", watch.recv()).await.unwrap().event_type(), EventType::Created);

    server.stop();
    let event = within("the watch's error", watch.recv()).await.unwrap();
    let Some(cosi::Error::Backend(error)) = event.error() else { panic!("expected a backend error, got {event:?}") };
    let lost = error.downcast_ref::<cosi_etcd::WatchLost>().unwrap_or_else(|| panic!("not a WatchLost: {error}"));
    assert!(lost.attempts() >= 2, "the watch should retry before giving up: {lost}");
    assert!(lost.to_string().contains("could not be reopened within 2s"), "{lost}");
    assert!(within("the end of the watch", watch.recv()).await.is_none(), "the watch ends after the error");
}

/// An event etcd can store but the client can never receive (etcd's request
/// limit raised above half the client's 64 MiB message limit, a large value
/// updated with its previous value attached) ends the watch at once with an
/// error that says so, instead of reopening it forever at the same revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_response_too_large_to_receive_is_reported_not_retried() {
    const SIZE: usize = 40 * 1024 * 1024;
    let Some(server) = EtcdServer::start_with_flags(&["--max-request-bytes=50000000"]) else { return };
    let state = connect(&server.endpoint(), "/large").await;
    let kind = Kind::new("default", "Blobs.test.cosi.dev");
    let blob = |byte: u8| {
        let spec = cosi::resource::EncodedSpec { proto: vec![byte; SIZE], yaml: None };
        DynamicResource::encoded(Metadata::new("default", kind.r#type(), "big"), spec)
    };
    let created = state.create_dynamic(blob(1), CreateOptions::default()).await.unwrap();
    let mut watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
    let mut next = blob(2);
    next.metadata_mut().set_version(created.metadata().version());
    state.update_dynamic(next, UpdateOptions::default()).await.unwrap();

    let event = within("the watch's error", watch.recv()).await.unwrap();
    let error = event.error().unwrap_or_else(|| panic!("expected an error event, got {event:?}"));
    let text = error.to_string();
    assert!(text.contains("would receive the same response again"), "{text}");
    assert!(within("the end of the watch", watch.recv()).await.is_none(), "the watch ends after the error");
    // The value itself is fine: a read of it fits.
    let got = state.get_dynamic(&Pointer::new("default", kind.r#type(), "big")).await.unwrap();
    assert_eq!(got.spec().as_encoded().map(|spec| spec.proto[0]), Some(2));
}

/// Values of 1 MiB, near etcd's default request limit, more of them than fit
/// in one message of the client: a listing arrives in pages, a replay of
/// their history in fragments, and both whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_and_replays_larger_than_a_message_arrive_whole() {
    // Tens of MiB of values: this test has an etcd of its own.
    let Some(server) = EtcdServer::start() else { return };
    let state = connect(&server.endpoint(), &unique_prefix("large")).await;
    let kind = Kind::new("default", "Blobs.test.cosi.dev");
    const COUNT: usize = 72;
    const SIZE: usize = 1024 * 1024;

    let mut watch =
        state.watch_kind_dynamic(&kind, WatchKindOptions::default().with_bootstrap_bookmark()).await.unwrap();
    let start = within("the bookmark", watch.recv()).await.unwrap().bookmark().unwrap().clone();
    drop(watch);
    let ids: Vec<String> = (0..COUNT).map(|index| format!("blob-{index:03}")).collect();
    for (index, id) in ids.iter().enumerate() {
        let spec = cosi::resource::EncodedSpec { proto: vec![index as u8; SIZE], yaml: None };
        let resource = DynamicResource::encoded(Metadata::new("default", kind.r#type(), id), spec);
        state.create_dynamic(resource, CreateOptions::default()).await.unwrap();
    }

    let listed = state.list_dynamic(&kind, &ListOptions::default()).await.unwrap();
    assert_eq!(listed.iter().map(|resource| resource.id()).collect::<Vec<_>>(), ids);
    for (index, resource) in listed.iter().enumerate() {
        let proto = &resource.spec().as_encoded().unwrap().proto;
        assert!(proto.len() == SIZE && proto.iter().all(|byte| *byte == index as u8), "{}", resource.id());
    }

    let mut bootstrapped = state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap()).await.unwrap();
    let mut replayed = state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(start)).await.unwrap();
    for (what, watch, last) in
        [("bootstrap", &mut bootstrapped, EventType::Bootstrapped), ("replay", &mut replayed, EventType::Created)]
    {
        let mut seen = Vec::new();
        while seen.len() < COUNT {
            let event = within(what, watch.recv()).await.unwrap();
            assert_eq!(event.event_type(), EventType::Created, "{what}: {event:?}");
            seen.push(event.resource().unwrap().id().to_owned());
        }
        assert_eq!(seen, ids, "{what}");
        if last == EventType::Bootstrapped {
            assert_eq!(within(what, watch.recv()).await.unwrap().event_type(), EventType::Bootstrapped);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_passes_on_when_resigned_or_dropped_and_loss_is_reported() {
    let Some((a, b)) = two_clients("election").await else { return };
    let options = ElectionOptions { ttl: Duration::from_secs(2) };
    let (first, second) = (a.election("controllers", "a", options.clone()), b.election("controllers", "b", options));

    let leadership = within("a's campaign", first.campaign()).await.unwrap();
    assert!(leadership.is_held());
    assert_eq!(second.leader().await.unwrap().as_deref(), Some("a"));
    let waiting = tokio::spawn(async move { second.campaign().await.map(|leadership| (second, leadership)) });
    // b waits while a leads: the campaign cannot finish before a resigns.
    assert_eq!(first.leader().await.unwrap().as_deref(), Some("a"));
    assert!(!waiting.is_finished(), "b should not lead while a does");

    within("a's resignation", leadership.resign()).await.unwrap();
    let (second, leadership) = within("b's campaign", waiting).await.unwrap().unwrap();
    assert_eq!(second.leader().await.unwrap().as_deref(), Some("b"));

    // a campaigns again and waits; b's leadership is dropped (as when its task ends): a takes over.
    let waiting = tokio::spawn(async move { first.campaign().await.map(|leadership| (first, leadership)) });
    drop(leadership);
    let (first, leadership) = within("a's second campaign", waiting).await.unwrap().unwrap();
    assert_eq!(first.leader().await.unwrap().as_deref(), Some("a"));

    // Someone deletes the leader's lease behind its back: the holder is told.
    Raw::new(&a).revoke(leadership.lease()).await.unwrap();
    within("the report of the lost leadership", leadership.lost()).await;
    assert!(!leadership.is_held());
}

/// A holder cut off from etcd (its old connection reset, new ones never
/// answered) learns that it lost leadership before etcd lets another
/// candidate lead, however long its attempts to reach etcd hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_from_etcd_knows_it_lost_before_another_leads() {
    let Some(server) = EtcdServer::shared() else { return };
    let prefix = unique_prefix("cut-off");
    let proxy = Proxy::start(server).await;
    let (a, b) = (connect(&proxy.endpoint(), &prefix).await, connect(&server.endpoint(), &prefix).await);
    let options = ElectionOptions { ttl: Duration::from_secs(5) };
    let (first, second) =
        (a.election("controllers", "a", options.clone()), b.election("controllers", "b", options.clone()));
    let leadership = within("a's campaign", first.campaign()).await.unwrap();

    // a renews its lease at once, then every third of the time to live: the
    // cut falls after that first renewal was answered and before the next.
    tokio::time::sleep(options.ttl / 6).await;
    proxy.cut_off().await;
    let (happened, mut order) = tokio::sync::mpsc::unbounded_channel();
    let lost = leadership.lost();
    let a_lost = happened.clone();
    tokio::spawn(async move {
        lost.await;
        let _ = a_lost.send("a lost");
    });
    let b_leads = tokio::spawn(async move {
        let leadership = second.campaign().await;
        let _ = happened.send("b leads");
        leadership
    });
    let earlier = within("a's loss or b's leadership", order.recv()).await.unwrap();
    let later = within("the other of the two", order.recv()).await.unwrap();
    assert_eq!([earlier, later], ["a lost", "b leads"], "a must know it lost before b leads");
    assert!(!leadership.is_held());
    within("b's leadership", b_leads).await.unwrap().unwrap().resign().await.unwrap();
}

/// A holder whose leader key is deleted while it is cut off from etcd, and
/// whose watch of the key etcd can no longer resume (the history it missed
/// compacted), learns that it lost leadership once etcd is back, although its
/// lease lives on (its time to live is longer than the test may take).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_key_deleted_and_compacted_while_cut_off_is_reported_lost() {
    // Compaction affects every prefix: this test has an etcd of its own.
    let Some(server) = EtcdServer::start() else { return };
    // Compacted past the deletion, etcd cancels a watch resumed before it;
    // compacted at the deletion, it drops the deletion from its history, and
    // a watch resumed there (the holder's is: the deletion is the first
    // write after its campaign) sees nothing.
    for (case, compacted_past) in [("compacted past the deletion", true), ("compacted at the deletion", false)] {
        let prefix = unique_prefix("compacted-leader");
        let proxy = Proxy::start(&server).await;
        let holder = connect(&proxy.endpoint(), &prefix).await;
        let raw = Raw::new(&connect(&server.endpoint(), &prefix).await);
        let election = holder.election("controllers", "holder", ElectionOptions { ttl: 2 * LIMIT });
        let leadership = within("the campaign", election.campaign()).await.unwrap();

        proxy.cut_off().await;
        let key = raw.leader_key("controllers").await.unwrap().expect("the holder leads");
        raw.delete(key).await.unwrap();
        if compacted_past {
            raw.put(format!("{prefix}/elsewhere"), b"x".to_vec()).await.unwrap();
        }
        raw.compact(raw.revision().await.unwrap()).await.unwrap();
        proxy.restore();

        within(&format!("the loss of leadership, {case}"), leadership.lost()).await;
        assert!(!leadership.is_held(), "{case}");
    }
}

/// Set in the child process of [`leadership_fails_over_when_the_holder_is_killed`].
const CONTENDER_ENV: &str = "COSI_ETCD_TEST_CONTENDER";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_fails_over_when_the_holder_is_killed() {
    if let Ok(config) = std::env::var(CONTENDER_ENV) {
        return contender(&config).await;
    }
    let Some(server) = EtcdServer::shared() else { return };
    let prefix = unique_prefix("failover");
    let state = connect(&server.endpoint(), &prefix).await;
    let options = ElectionOptions { ttl: Duration::from_secs(2) };
    let election = state.election("controllers", "parent", options);

    // The first holder is another process: this test binary, running only this test, as the contender.
    let mut child = Killed(
        Command::new(std::env::current_exe().unwrap())
            .args(["leadership_fails_over_when_the_holder_is_killed", "--exact", "--nocapture", "--test-threads", "1"])
            .env(CONTENDER_ENV, format!("{} {prefix}", server.endpoint()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (leading_tx, leading) = tokio::sync::oneshot::channel();
    // A thread of its own: a runtime would wait for it at shutdown, and it ends only with the child.
    std::thread::spawn(move || {
        // libtest prints the test's name before its output, on the same line.
        let led = BufReader::new(stdout).lines().any(|line| line.is_ok_and(|line| line.ends_with("LEADING")));
        let _ = leading_tx.send(led);
    });
    assert!(within("the child's leadership", leading).await.unwrap(), "the child never led");
    assert_eq!(election.leader().await.unwrap().as_deref(), Some("child"));
    // What the child wrote as leader.
    let written = Counter::pointer("written-by-leader");
    let created = WatchCondition::new().event_types([EventType::Created]);
    within("the leader's write", state.watch_for::<Counter>(&written, created)).await.unwrap();

    let waiting = {
        let election = election.clone();
        tokio::spawn(async move { election.campaign().await })
    };
    assert_eq!(election.leader().await.unwrap().as_deref(), Some("child"));
    assert!(!waiting.is_finished(), "the parent should not lead while the child does");

    // Killed: no resignation, the lease has to expire (time to live 2 s).
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let leadership = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the parent should take over within a few seconds of the holder's death")
        .unwrap()
        .unwrap();
    assert!(leadership.is_held());
    assert_eq!(election.leader().await.unwrap().as_deref(), Some("parent"));
    let kept = state.get::<Counter>("written-by-leader").await.unwrap();
    assert_eq!(kept.count, 7, "what the dead leader wrote is still there");
    leadership.resign().await.unwrap();
}

/// Kills the child process when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The child's side: lead, write, say so, and wait to be killed.
async fn contender(config: &str) {
    let (endpoint, prefix) = config.split_once(' ').expect("endpoint and prefix");
    let state = connect(endpoint, prefix).await;
    let election = state.election("controllers", "child", ElectionOptions { ttl: Duration::from_secs(2) });
    let leadership = election.campaign().await.unwrap();
    state.create(Typed::new("written-by-leader", Counter { count: 7 }), CreateOptions::default()).await.unwrap();
    println!("LEADING");
    leadership.lost().await;
    panic!("the child lost its leadership before it was killed");
}
