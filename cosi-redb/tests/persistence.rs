//! What survives a reopen, what a reopen rejects, and what a bad file does.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use cosi::Error as StateError;
use cosi::prelude::*;
use cosi::resource::EncodedSpec;
use cosi::state::{EventType, MemoryState, NamespacedState};
use cosi::testing::resources::PathResource;
use cosi_redb::{EncryptionKey, Error, Options, RedbState};
use futures_util::future::join_all;
use serde::Serializer;

use common::{KEY, dir, encrypted, file};

const NS: &str = "config";

fn path(id: &str, value: &str) -> Typed<PathResource> {
    Typed::new_in(NS, id, PathResource { value: value.into() })
}

fn encoded(id: &str, spec: EncodedSpec) -> DynamicResource {
    DynamicResource::encoded(Metadata::new(NS, "Blobs.test.cosi.dev", id), spec)
}

fn open(path: &std::path::Path, options: Options) -> RedbState {
    RedbState::open(path, options).expect("cannot open the store")
}

/// Writes a bit of everything: versions, owner, phase, labels, annotations,
/// finalizers, a typed and an encoded spec, a destroyed resource.
async fn write_everything(state: &RedbState) {
    let mut first = path("first", "one");
    first.metadata_mut().labels_mut().set("tier", "gold");
    first.metadata_mut().annotations_mut().set("note", "");
    let first = state.create(first, CreateOptions::owner("ctrl")).await.expect("create first");
    let mut second = first.clone();
    second.value = "one, edited".into();
    state.update(second, UpdateOptions::owner("ctrl")).await.expect("update first");
    state.add_finalizers_dynamic(&PathResource::pointer_in(NS, "first"), &["keep", "also"]).await.expect("finalizers");
    state
        .teardown_dynamic(&PathResource::pointer_in(NS, "first"), TeardownOptions::owner("ctrl"))
        .await
        .expect("teardown");

    state.create(path("gone", "soon"), CreateOptions::default()).await.expect("create gone");
    state
        .destroy_dynamic(&PathResource::pointer_in(NS, "gone"), DestroyOptions::default())
        .await
        .expect("destroy gone");

    let blob = EncodedSpec { proto: vec![0, 1, 2, 0xff, 0x80], yaml: Some("a: b\n".into()) };
    state.create_dynamic(encoded("blob", blob), CreateOptions::default()).await.expect("create blob");
    state
        .create_dynamic(encoded("bare", EncodedSpec { proto: vec![9], yaml: None }), CreateOptions::default())
        .await
        .expect("create bare");
}

async fn check_everything(state: &RedbState) {
    let first = state.get::<PathResource>(&PathResource::pointer_in(NS, "first")).await.expect("first");
    assert_eq!(first.value, "one, edited");
    let metadata = first.metadata();
    // create, update, add finalizers, teardown.
    assert_eq!(metadata.version(), Version::new(4));
    assert_eq!(metadata.owner(), Some("ctrl"));
    assert_eq!(metadata.phase(), Phase::TearingDown);
    assert_eq!(metadata.labels().get("tier"), Some("gold"));
    assert_eq!(metadata.annotations().get("note"), Some(""));
    assert_eq!(metadata.finalizers().iter().collect::<Vec<_>>(), ["keep", "also"]);
    assert!(metadata.created() <= metadata.updated());

    let gone = state.get_dynamic(&PathResource::pointer_in(NS, "gone")).await.expect_err("destroyed");
    assert!(gone.is_not_found(), "{gone:?}");

    let blob = state.get_dynamic(&Pointer::new(NS, "Blobs.test.cosi.dev", "blob")).await.expect("blob");
    let spec = blob.spec().as_encoded().expect("an encoded spec");
    assert_eq!(spec.proto, [0, 1, 2, 0xff, 0x80]);
    assert_eq!(spec.yaml.as_deref(), Some("a: b\n"));
    let bare = state.get_dynamic(&Pointer::new(NS, "Blobs.test.cosi.dev", "bare")).await.expect("bare");
    assert_eq!(bare.spec().as_encoded(), Some(&EncodedSpec { proto: vec![9], yaml: None }));
}

trait PointerIn {
    fn pointer_in(namespace: &str, id: &str) -> Pointer;
}

impl<R: Resource> PointerIn for R {
    fn pointer_in(namespace: &str, id: &str) -> Pointer {
        Pointer::new(namespace, R::TYPE, id)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_survives_a_reopen() {
    for options in [Options::default(), encrypted()] {
        let dir = dir();
        let state = open(&file(dir.path()), options.clone());
        write_everything(&state).await;
        check_everything(&state).await;
        drop(state);

        let state = open(&file(dir.path()), options.clone());
        check_everything(&state).await;
        // And it goes on from there: the next update is version 5.
        let first = state.get::<PathResource>(&PathResource::pointer_in(NS, "first")).await.expect("first");
        let updated =
            state.update(first, UpdateOptions::owner("ctrl").expected_phase(None)).await.expect("update after reopen");
        assert_eq!(updated.metadata().version(), Version::new(5));
        drop(state);

        let state = open(&file(dir.path()), options);
        let first = state.get_dynamic(&PathResource::pointer_in(NS, "first")).await.expect("first");
        assert_eq!(first.metadata().version(), Version::new(5));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_work_after_a_reopen_and_old_bookmarks_are_rejected() {
    let dir = dir();
    let state = open(&file(dir.path()), Options::default());
    let kind = PathResource::kind_in(NS);
    let mut watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.expect("watch");
    state.create(path("a", "1"), CreateOptions::default()).await.expect("create");
    let event = watch.recv().await.expect("an event");
    let kind_bookmark = event.bookmark().cloned().expect("a bookmark");
    let mut single =
        state.watch_dynamic(&PathResource::pointer_in(NS, "a"), WatchOptions::tail(1)).await.expect("watch");
    let single_bookmark = single.recv().await.and_then(|event| event.bookmark().cloned()).expect("a bookmark");
    drop((watch, single));
    drop(state);

    let state = open(&file(dir.path()), Options::default());
    let err = state
        .watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(kind_bookmark))
        .await
        .expect_err("old bookmark");
    assert!(err.is_invalid_bookmark(), "{err:?}");
    let err = state
        .watch_dynamic(&PathResource::pointer_in(NS, "a"), WatchOptions::from_bookmark(single_bookmark))
        .await
        .expect_err("old bookmark");
    assert!(err.is_invalid_bookmark(), "{err:?}");

    // A bootstrap shows what was loaded; live events follow with fresh bookmarks.
    let mut watch = state.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap()).await.expect("watch");
    let created = watch.recv().await.expect("bootstrap");
    assert_eq!(created.event_type(), EventType::Created);
    assert_eq!(created.resource().map(|r| r.id()), Some("a"));
    assert_eq!(watch.recv().await.map(|e| e.event_type()), Some(EventType::Bootstrapped));
    state.create(path("b", "2"), CreateOptions::default()).await.expect("create");
    let live = watch.recv().await.expect("live event");
    assert_eq!(live.resource().map(|r| r.id()), Some("b"));
    let bookmark = live.bookmark().cloned().expect("a bookmark");
    state.watch_kind_dynamic(&kind, WatchKindOptions::from_bookmark(bookmark)).await.expect("a fresh bookmark resumes");
}

trait KindIn {
    fn kind_in(namespace: &str) -> Kind;
}

impl<R: Resource> KindIn for R {
    fn kind_in(namespace: &str) -> Kind {
        Kind::new(namespace, R::TYPE)
    }
}

/// A spec that cannot be written: the store must refuse the write and change nothing.
#[derive(Resource, Clone, Debug, PartialEq, serde::Deserialize)]
#[resource(type = "Unwritables.test.cosi.dev", namespace = "config")]
struct Unwritable {
    value: u32,
}

impl serde::Serialize for Unwritable {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("this spec refuses to be written"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_cannot_be_stored_changes_nothing() {
    let dir = dir();
    let state = open(&file(dir.path()), Options::default());
    let mut watch = state.watch_kind_dynamic(&Unwritable::kind(), WatchKindOptions::default()).await.expect("watch");
    let err = state
        .create(Typed::new("x", Unwritable { value: 1 }), CreateOptions::default())
        .await
        .expect_err("an unwritable spec");
    assert!(matches!(err, StateError::Backend(_)), "{err:?}");
    assert!(err.to_string().contains("refuses to be written"), "{err}");
    let missing = state.get_dynamic(&Unwritable::pointer("x")).await.expect_err("nothing stored");
    assert!(missing.is_not_found());

    // The store goes on: the next write works, and it is the first event.
    state.create(path("ok", "fine"), CreateOptions::default()).await.expect("create");
    let mut other =
        state.watch_kind_dynamic(&PathResource::kind_in(NS), WatchKindOptions::tail(10)).await.expect("watch");
    assert_eq!(other.recv().await.and_then(|e| e.resource().map(|r| r.id().to_owned())).as_deref(), Some("ok"));
    let nothing = tokio::time::timeout(std::time::Duration::from_millis(50), watch.recv()).await;
    assert!(nothing.is_err(), "a refused write published {nothing:?}");
}

/// 64 concurrent creates, spread over `kinds` namespaces; returns how many commits they took.
async fn concurrent_creates(kinds: usize) -> u64 {
    let dir = dir();
    let state = Arc::new(open(&file(dir.path()), Options::default()));
    let before = state.commits();
    let writes = (0..64).map(|i| {
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let resource = Typed::new_in(format!("ns{}", i % kinds), format!("r{i}"), PathResource::default());
            state.create(resource, CreateOptions::default()).await
        })
    });
    for result in join_all(writes).await {
        result.expect("the writer panicked").expect("create");
    }
    let commits = state.commits() - before;
    drop(state);

    let state = open(&file(dir.path()), Options::default());
    let mut total = 0;
    for n in 0..kinds {
        total += state
            .list_dynamic(&PathResource::kind_in(&format!("ns{n}")), &ListOptions::default())
            .await
            .expect("list")
            .len();
    }
    assert_eq!(total, 64, "not every write is stored");
    commits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_share_commits() {
    let commits = concurrent_creates(16).await;
    assert!(commits < 64, "64 concurrent writes to 16 kinds took {commits} commits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_of_one_kind_share_commits() {
    let commits = concurrent_creates(1).await;
    assert!(commits < 64, "64 concurrent writes to one kind took {commits} commits");
}

/// A spec that cannot be written when its value is 0.
#[derive(Resource, Clone, Debug, PartialEq, serde::Deserialize)]
#[resource(type = "Fussies.test.cosi.dev", namespace = "config")]
struct Fussy {
    value: u32,
}

impl serde::Serialize for Fussy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.value {
            0 => Err(serde::ser::Error::custom("zero refuses to be written")),
            value => serializer.serialize_u32(value),
        }
    }
}

/// Writes to one kind go to the store in batches; one write the store refuses
/// fails alone, and the others of its batch are stored and published in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_fails_alone_in_its_batch() {
    let dir = dir();
    let state = Arc::new(open(&file(dir.path()), Options::default()));
    let mut watch = state.watch_kind_dynamic(&Fussy::kind(), WatchKindOptions::default()).await.expect("watch");
    let writes = (0..32u32).map(|value| {
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            state.create(Typed::new(format!("f{value:02}"), Fussy { value }), CreateOptions::default()).await
        })
    });
    let results: Vec<_> = join_all(writes).await.into_iter().map(|r| r.expect("the writer panicked")).collect();
    for (value, result) in results.iter().enumerate() {
        match (value, result) {
            (0, Err(err)) => assert!(err.to_string().contains("zero refuses"), "{err}"),
            (0, Ok(_)) => panic!("the unwritable spec was stored"),
            (_, Err(err)) => panic!("write {value} failed with its batch: {err:?}"),
            (_, Ok(stored)) => assert_eq!(stored.metadata().version(), Version::new(1)),
        }
    }
    let mut seen = BTreeSet::new();
    while seen.len() < 31 {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), watch.recv())
            .await
            .expect("the events of the stored writes")
            .expect("an event");
        assert_eq!(event.event_type(), EventType::Created);
        assert!(seen.insert(event.resource().map(|r| r.id().to_owned()).expect("a resource")));
    }
    assert!(!seen.contains("f00"));
    drop(watch);
    let state = Arc::into_inner(state).expect("no other handle");
    drop(state);
    let state = open(&file(dir.path()), Options::default());
    let stored = state.list_dynamic(&Fussy::kind(), &ListOptions::default()).await.expect("list");
    assert_eq!(stored.len(), 31);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_keeps_some_namespaces_durable() {
    let dir = dir();
    for round in 0..2 {
        let durable: Arc<dyn State> = Arc::new(open(&file(dir.path()), Options::default()));
        let state =
            NamespacedState::new(|_| Arc::new(MemoryState::default()) as Arc<dyn State>).with_namespace(NS, durable);
        let config = state.list_dynamic(&PathResource::kind_in(NS), &ListOptions::default()).await.expect("list");
        let runtime =
            state.list_dynamic(&PathResource::kind_in("runtime"), &ListOptions::default()).await.expect("list");
        if round == 0 {
            assert!(config.is_empty() && runtime.is_empty());
            state.create(path("kept", "yes"), CreateOptions::default()).await.expect("create durable");
            state
                .create(Typed::new_in("runtime", "lost", PathResource::default()), CreateOptions::default())
                .await
                .expect("create in memory");
        } else {
            assert_eq!(config.iter().map(|r| r.id()).collect::<Vec<_>>(), ["kept"]);
            assert!(runtime.is_empty(), "the in-memory namespace survived: {runtime:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encryption_keys_are_checked_and_specs_are_not_in_the_clear() {
    let dir = dir();
    let file = file(dir.path());
    let state = open(&file, encrypted());
    state.create(path("secret", "hunter2-hunter2"), CreateOptions::default()).await.expect("create");
    let blob = EncodedSpec { proto: b"proto-secret-bytes".to_vec(), yaml: Some("yaml-secret-text".into()) };
    state.create_dynamic(encoded("blob", blob), CreateOptions::default()).await.expect("create");
    drop(state);

    let bytes = std::fs::read(&file).expect("read the file");
    for secret in [&b"hunter2-hunter2"[..], b"proto-secret-bytes", b"yaml-secret-text"] {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret),
            "{:?} is in the clear",
            String::from_utf8_lossy(secret)
        );
    }
    // Metadata is not encrypted.
    assert!(bytes.windows(6).any(|w| w == b"secret"));

    let wrong = RedbState::open(&file, Options::default().encryption_key([7u8; 32])).expect_err("wrong key");
    assert!(matches!(wrong, Error::WrongKey), "{wrong:?}");
    let missing = RedbState::open(&file, Options::default()).expect_err("no key");
    assert!(matches!(missing, Error::KeyRequired), "{missing:?}");

    let state = open(&file, Options::default().encryption_key(EncryptionKey::new(KEY)));
    let secret = state.get::<PathResource>(&PathResource::pointer_in(NS, "secret")).await.expect("secret");
    assert_eq!(secret.value, "hunter2-hunter2");
    drop(state);

    let plain = dir.path().join("plain.redb");
    drop(open(&plain, Options::default()));
    let err = RedbState::open(&plain, encrypted()).expect_err("a key for a plain store");
    assert!(matches!(err, Error::NotEncrypted), "{err:?}");
}

/// The format entry of `cosi.meta`, set behind the store's back.
fn set_format(file: &std::path::Path, format: u8) {
    let db = redb::Database::create(file).expect("open with redb");
    let txn = db.begin_write().expect("begin");
    {
        let meta: redb::TableDefinition<'_, &str, &[u8]> = redb::TableDefinition::new("cosi.meta");
        txn.open_table(meta).expect("cosi.meta").insert("format", [format].as_slice()).expect("insert");
    }
    txn.commit().expect("commit");
}

/// The format entry is bound to the key check: set back to 1 (which would
/// make format 1 records, sealed without their metadata, acceptable again
/// through the migration), the encrypted store is refused, and nothing in
/// it changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_store_whose_format_entry_was_changed_is_refused() {
    let dir = dir();
    let file = file(dir.path());
    let state = open(&file, encrypted());
    state.create(path("kept", "value"), CreateOptions::default()).await.expect("create");
    drop(state);

    set_format(&file, 1);
    let err = RedbState::open(&file, encrypted()).expect_err("a format entry changed to 1");
    assert!(matches!(err, Error::FormatChanged { entry: 1, checked: 2, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("format entry says 1") && message.contains("written for format 2"), "{message}");
    assert!(message.contains(&file.display().to_string()), "{message}");

    // Refused again (nothing was migrated), and the store opens as it was once the entry is back.
    assert!(matches!(RedbState::open(&file, encrypted()), Err(Error::FormatChanged { .. })));
    set_format(&file, 2);
    let state = open(&file, encrypted());
    let kept = state.get::<PathResource>(&PathResource::pointer_in(NS, "kept")).await.expect("kept");
    assert_eq!(kept.value, "value");
}

#[test]
fn a_new_store_file_is_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;

    let dir = dir();
    let path = file(dir.path());
    // With the usual umask (022) a file created by redb alone is readable by everyone.
    let state = open(&path, Options::default());
    let mode = std::fs::metadata(&path).expect("the file exists").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "a new store must be readable by its owner only, got {mode:o}");
    drop(state);
}

#[test]
fn a_store_is_opened_once() {
    let dir = dir();
    let _state = open(&file(dir.path()), Options::default());
    let err = RedbState::open(file(dir.path()), Options::default()).expect_err("opened twice");
    assert!(err.to_string().contains("already open"), "{err}");
}

#[test]
fn foreign_and_damaged_files_are_errors() {
    let dir = dir();
    let text = dir.path().join("text");
    std::fs::write(&text, "this is not a database\n".repeat(400)).expect("write");
    let err = RedbState::open(&text, Options::default()).expect_err("a text file");
    assert!(!err.to_string().is_empty());

    let other = dir.path().join("other.redb");
    {
        let db = redb::Database::create(&other).expect("create");
        let txn = db.begin_write().expect("begin");
        let table: redb::TableDefinition<'_, &str, u64> = redb::TableDefinition::new("inventory");
        txn.open_table(table).expect("table").insert("apples", 3).expect("insert");
        txn.commit().expect("commit");
    }
    let err = RedbState::open(&other, Options::default()).expect_err("another program's redb file");
    assert!(matches!(err, Error::NotAStore { .. }), "{err:?}");
}

/// Damage a real store byte by byte: every open either fails with an error or
/// loads a state; none panics or hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_stores_never_panic() {
    let dir = dir();
    let good = file(dir.path());
    let state = open(&good, Options::default());
    for i in 0..20 {
        state.create(path(&format!("r{i}"), "some value"), CreateOptions::default()).await.expect("create");
    }
    drop(state);
    let bytes = std::fs::read(&good).expect("read");

    // Silence the panic messages of redb's internal checks while damaged files are opened.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let damaged = dir.path().join("damaged.redb");
    let mut errors = 0;
    let step = (bytes.len() / 200).max(1);
    for at in (0..bytes.len()).step_by(step) {
        let mut copy = bytes.clone();
        copy[at] ^= 0x5a;
        std::fs::write(&damaged, &copy).expect("write");
        match RedbState::open(&damaged, Options::default()) {
            Ok(state) => drop(state),
            Err(err) => {
                assert!(!err.to_string().is_empty());
                errors += 1;
            }
        }
    }
    for len in [0, 1, 100, 511, 4096, bytes.len() / 2] {
        std::fs::write(&damaged, &bytes[..len.min(bytes.len())]).expect("write");
        if let Ok(state) = RedbState::open(&damaged, Options::default()) {
            drop(state);
        }
    }
    std::panic::set_hook(hook);
    assert!(errors > 0, "no damage was noticed");
}
