//! The in-memory state: one [`Collection`] per (namespace, type).
//!
//! A [`BackingStore`] makes it durable, as Go COSI's `inmem.WithBackingStore`
//! does: each write is handed to the store after every check and before the
//! resource changes in memory or an event is published, so the history of a
//! collection is in the order the store made its writes durable, and a write
//! the store refuses changes nothing.

mod by_type;
mod collection;

use std::hash::{BuildHasher, RandomState};
use std::ops::Deref;
use std::sync::Arc;

use async_trait::async_trait;
use hashbrown::HashMap;
use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard};

use crate::resource::{DynamicResource, Kind, Pointer};
use crate::state::{
    CreateOptions, DestroyOptions, Error, Immediate, InProcess, ListOptions, Observation, Observer, Result, State,
    UpdateOptions, Watch, WatchKindOptions, WatchOptions,
};

use by_type::ByType;
use collection::{Collection, Submitted};

/// How much history each (namespace, type) keeps for watches.
///
/// The history serves tail events and bookmarks, and it bounds how far a
/// watcher may fall behind: one that is more than the capacity behind gets an
/// [`Event::Errored`](crate::state::Event::Errored) and its watch ends. Writers
/// never wait for watchers.
#[derive(Clone, Debug)]
pub struct MemoryOptions {
    /// The capacity a collection starts with; it doubles up to the maximum as events arrive.
    pub history_initial_capacity: usize,
    /// The most events a collection keeps.
    pub history_max_capacity: usize,
    /// How many of the oldest kept events are not offered for tail events and
    /// bookmarks, so a watch that starts there is not overrun at once.
    pub history_gap: usize,
}

impl Default for MemoryOptions {
    /// Talos' settings: start at 8, grow to 1024, gap 4.
    fn default() -> Self {
        MemoryOptions { history_initial_capacity: 8, history_max_capacity: 1024, history_gap: 4 }
    }
}

/// Where a [`MemoryState`] writes through to, so that what it holds survives a restart.
///
/// The state calls [`load`](BackingStore::load) once, when it is built, and
/// [`write`](BackingStore::write) for its writes, after they passed every
/// check and before anything changes in memory. A write fails with the
/// store's error, and changes nothing, when the store fails.
///
/// Writes to one (namespace, type) that arrive while the store is busy with
/// that collection's previous batch are checked against it and handed over
/// together in the next call, in order; writes to different collections
/// reach the store concurrently. So a store that commits what it is handed
/// (and what arrives meanwhile) together needs one commit for many writes.
///
/// `write` blocks until the batch is durable: call the state's writes where
/// blocking is allowed (`tokio::task::spawn_blocking`), as the durable
/// backends built on this do.
pub trait BackingStore: Send + Sync + 'static {
    /// Everything stored.
    fn load(&self) -> Result<Vec<DynamicResource>>;

    /// Makes `batch` durable, in order and all or nothing; returns once it is.
    fn write(&self, batch: &[StoreWrite<'_>]) -> Result<()>;
}

/// One write handed to a [`BackingStore`].
#[derive(Clone, Copy, Debug)]
pub enum StoreWrite<'a> {
    /// Store this resource, replacing the stored one with the same pointer.
    Put(&'a DynamicResource),
    /// Remove the resource at this pointer.
    Destroy(&'a Pointer),
}

/// A [`State`] that keeps everything in memory.
///
/// Each (namespace, type) is a collection of its own with its own lock and
/// history, so writers of different kinds never contend. A collection exists
/// while it holds resources, was ever written, or is watched: reads of a kind
/// nobody wrote create nothing, and the collection a watch of such a kind
/// needs is freed when its last watcher leaves (see [`MemoryState::watch_kind_dynamic`]).
pub struct MemoryState {
    options: MemoryOptions,
    collections: Arc<Collections>,
    /// The written (or loaded) collections of resource types again, found by the type's number.
    by_type: ByType,
    /// Seeds each collection's bookmark cookie together with its (namespace, type).
    seed: RandomState,
    /// Where writes go through to; `None` for a plain in-memory state.
    store: Option<Arc<dyn BackingStore>>,
}

/// The collections by kind, looked up by a [`KindRef`]: one hash of both
/// names and one probe per operation.
///
/// Lock order: this map, then a collection's locks. Whatever makes a
/// collection hold something (a write, a watcher) is registered with the
/// collection while this map is locked, and a collection is freed only under
/// its write lock after checking it holds nothing, so a collection is never
/// freed under a writer or a watcher that found it. A collection that was
/// written (or loaded from the store) is never freed, so the table of
/// resource types ([`ByType`]) hands such collections out without this map.
type Collections = RwLock<HashMap<Kind, Arc<Collection>>>;

/// A collection found for one call: in the table of resource types (written,
/// so never freed), or in the map, which stays read-locked while this lives.
enum CollectionRef<'a> {
    Permanent(&'a Arc<Collection>),
    Locked(MappedRwLockReadGuard<'a, Arc<Collection>>),
}

impl Deref for CollectionRef<'_> {
    type Target = Arc<Collection>;

    fn deref(&self) -> &Arc<Collection> {
        match self {
            CollectionRef::Permanent(collection) => collection,
            CollectionRef::Locked(guard) => guard,
        }
    }
}

/// A kind by reference: looks a collection up without building a [`Kind`].
/// Its derived `Hash` hashes the two names in `Kind`'s order, as `Kind`'s does.
#[derive(Hash)]
struct KindRef<'a> {
    namespace: &'a str,
    r#type: &'a str,
}

impl hashbrown::Equivalent<Kind> for KindRef<'_> {
    fn equivalent(&self, kind: &Kind) -> bool {
        self.namespace == kind.namespace() && self.r#type == kind.r#type()
    }
}

impl Default for MemoryState {
    fn default() -> Self {
        MemoryState::with_options(MemoryOptions::default())
    }
}

impl std::fmt::Debug for MemoryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryState")
            .field("options", &self.options)
            .field("collections", &self.collections)
            .field("backed", &self.store.is_some())
            .finish()
    }
}

impl MemoryState {
    /// An empty state with the given history settings.
    ///
    /// Fails when the maximum capacity is zero or the gap leaves no room for history.
    pub fn new(options: MemoryOptions) -> Result<Self> {
        if options.history_max_capacity == 0 || options.history_gap >= options.history_max_capacity {
            return Err(Error::invalid_argument(format!(
                "history gap {} must be below the maximum history capacity {}",
                options.history_gap, options.history_max_capacity
            )));
        }
        let options = MemoryOptions {
            history_initial_capacity: options.history_initial_capacity.clamp(1, options.history_max_capacity),
            ..options
        };
        Ok(MemoryState::with_options(options))
    }

    fn with_options(options: MemoryOptions) -> Self {
        MemoryState {
            options,
            collections: Arc::default(),
            by_type: ByType::default(),
            seed: RandomState::new(),
            store: None,
        }
    }

    /// A state that holds what `store` holds and writes every change through to it.
    ///
    /// The loaded resources are the collections' contents; the history starts
    /// empty, and bookmarks from before are rejected (each collection has a new cookie).
    /// Fails when the history settings are invalid, the store cannot load, or
    /// it returns a resource with an invalid pointer or one pointer twice.
    pub fn with_store(options: MemoryOptions, store: Arc<dyn BackingStore>) -> Result<Self> {
        let resources = store.load()?;
        let state = MemoryState { store: Some(store), ..MemoryState::new(options)? };
        for resource in resources {
            let pointer = resource.metadata().pointer();
            pointer.validate().map_err(Error::InvalidArgument)?;
            state.collection(pointer.kind_ref())?.restore(resource)?;
        }
        Ok(state)
    }

    /// The collection of `kind`, if it exists: a resource type's written one
    /// from the table, any other from the map, read-locked.
    fn existing(&self, kind: &Kind) -> Option<CollectionRef<'_>> {
        let index = kind.type_index();
        if let Some(collection) = index.and_then(|index| self.by_type.get(index)) {
            return Some(CollectionRef::Permanent(collection));
        }
        let (namespace, r#type) = (kind.namespace(), kind.r#type());
        let found = RwLockReadGuard::try_map(self.collections.read(), |collections| {
            collections.get(&KindRef { namespace, r#type })
        })
        .ok()?;
        if let Some(index) = index
            && found.is_permanent()
        {
            self.by_type.insert(index, &found);
        }
        Some(CollectionRef::Locked(found))
    }

    /// The collection of `kind`, created if needed (see [`existing`](MemoryState::existing)).
    ///
    /// Checks the namespace and type before it creates anything, so bad input
    /// never leaves a collection behind.
    fn collection(&self, kind: &Kind) -> Result<CollectionRef<'_>> {
        loop {
            if let Some(collection) = self.existing(kind) {
                return Ok(collection);
            }
            kind.validate().map_err(Error::InvalidArgument)?;
            let mut collections = self.collections.write();
            collections.entry(kind.clone()).or_insert_with(|| {
                let cookie = self.seed.hash_one((kind.namespace(), kind.r#type()));
                let home = Arc::downgrade(&self.collections);
                Arc::new(Collection::new(kind.clone(), cookie, &self.options, self.store.clone(), home))
            });
            // Read it again under the read lock. A new collection holds
            // nothing, so a watcher leaving it meanwhile may have freed it
            // again; then the loop creates another.
        }
    }

    /// The resource at `pointer`: a lookup of its kind (by its type's number,
    /// or a hash of its names), a hash lookup of its ID, and a reference count.
    fn read(&self, pointer: &Pointer) -> Result<DynamicResource> {
        let found = self.existing(pointer.kind_ref()).and_then(|collection| collection.get(pointer.id()));
        found.ok_or_else(|| not_found(pointer))
    }

    /// The resources of `kind` that match `options`, sorted by ID.
    fn read_kind(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>> {
        options.validate()?;
        match self.existing(kind) {
            Some(collection) => Ok(collection.list(options)),
            None => {
                kind.validate().map_err(Error::InvalidArgument)?;
                Ok(Vec::new())
            }
        }
    }

    /// Hands a create to its collection: done at once, or queued for the backing store.
    fn submit_create(&self, resource: DynamicResource, options: &CreateOptions) -> Result<Pending> {
        let pointer = resource.metadata().pointer();
        // The collection checks the namespace and type when it is created,
        // so only the ID, new to the state, is left to check.
        let guard = self.collection(pointer.kind_ref())?;
        let refused = match crate::resource::validate_name("id", pointer.id()) {
            Err(reason) => Error::InvalidArgument(reason),
            Ok(()) => match guard.create(resource, options) {
                Submitted::Done(Ok(stored)) => return Ok(Pending::Done(Ok(stored))),
                Submitted::Queued(ticket) => return Ok(Pending::Queued(Arc::clone(&guard), ticket)),
                Submitted::Done(Err(error)) => error,
            },
        };
        // A refused create wrote nothing: a collection it created goes again
        // (released without the map's read lock, which `release` takes to write).
        let collection = Arc::clone(&guard);
        drop(guard);
        collection.release();
        Err(refused)
    }

    /// Hands an update to its collection: done at once, or queued for the backing store.
    fn submit_update(&self, resource: DynamicResource, options: &UpdateOptions) -> Pending {
        let pointer = resource.metadata().pointer();
        let Some(collection) = self.existing(pointer.kind_ref()) else {
            return Pending::Done(Err(not_found(pointer)));
        };
        match collection.update(resource, options) {
            Submitted::Done(result) => Pending::Done(result),
            Submitted::Queued(ticket) => Pending::Queued(Arc::clone(&collection), ticket),
        }
    }

    /// How many collections exist: what reads and watches must not leave behind.
    #[cfg(test)]
    fn collection_count(&self) -> usize {
        self.collections.read().len()
    }
}

/// Checks a pointer that found nothing, so the error says what is wrong with
/// it; one that finds a resource needs no check, since its names equal those
/// of a resource that was checked when it was written.
fn not_found(pointer: &Pointer) -> Error {
    match pointer.validate() {
        Ok(()) => Error::NotFound(pointer.clone()),
        Err(reason) => Error::InvalidArgument(reason),
    }
}

/// A put handed to a collection, with the state's map no longer locked.
enum Pending {
    Done(Result<DynamicResource>),
    /// Queued for the backing store: [`finish`](Pending::finish) waits for its batch.
    Queued(Arc<Collection>, u64),
}

impl Pending {
    /// The stored resource; a pointer that found nothing is checked, so a bad name is an `InvalidArgument`.
    fn finish(self) -> Result<DynamicResource> {
        let result = match self {
            Pending::Done(result) => result,
            Pending::Queued(collection, ticket) => {
                let stored = collection.wait(ticket).and_then(|stored| {
                    stored.ok_or_else(|| {
                        Error::backend(std::io::Error::other("a put through the backing store stored nothing"))
                    })
                });
                // A put refused (by the checks or the store) may leave a
                // collection that holds nothing, which goes again.
                if stored.is_err() {
                    collection.release();
                }
                stored
            }
        };
        match result {
            Err(Error::NotFound(pointer)) => Err(not_found(&pointer)),
            result => result,
        }
    }
}

#[async_trait]
impl State for MemoryState {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource> {
        self.read(pointer)
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>> {
        self.read_kind(kind, options)
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource> {
        self.submit_create(resource, &options)?.finish()
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource> {
        self.submit_update(resource, &options).finish()
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()> {
        let Some(found) = self.existing(pointer.kind_ref()) else {
            return Err(not_found(pointer));
        };
        let result = match found.destroy(pointer, options) {
            Submitted::Done(result) => result,
            Submitted::Queued(ticket) => {
                // Waits for the store without the state's map, as a put does.
                let collection = Arc::clone(&found);
                drop(found);
                collection.wait(ticket).map(drop)
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(Error::NotFound(pointer)) => Err(not_found(&pointer)),
            Err(err) => Err(err),
        }
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch> {
        pointer.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        let guard = self.collection(pointer.kind_ref())?;
        let collection = Arc::clone(&guard);
        let watch = Arc::clone(&collection).watch(pointer.id(), options);
        drop(guard);
        // A watch refused (a bookmark out of the history) leaves nothing behind.
        if watch.is_err() {
            collection.release();
        }
        watch
    }

    /// Watches every resource of a kind.
    ///
    /// Watching a kind nobody wrote creates its collection; when the last
    /// watcher leaves and still nobody wrote it, the collection is freed. A
    /// bookmark it handed out stays valid: such a collection only ever hands
    /// out the position before its first event, which means the same in the
    /// collection that replaces it (its cookie comes from the state and the
    /// kind, not from the collection).
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch> {
        kind.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        let guard = self.collection(kind)?;
        let collection = Arc::clone(&guard);
        let watch = Arc::clone(&collection).watch_kind(options);
        drop(guard);
        // A watch refused (a bookmark out of the history) leaves nothing behind.
        if watch.is_err() {
            collection.release();
        }
        watch
    }

    fn in_process(&self) -> Option<&dyn InProcess> {
        Some(self)
    }
}

/// Reads answer at once; writes too, unless they wait for the backing store.
impl InProcess for MemoryState {
    fn get_now(&self, pointer: &Pointer) -> Option<Result<DynamicResource>> {
        Some(self.read(pointer))
    }

    fn list_now(&self, kind: &Kind, options: &ListOptions) -> Option<Result<Vec<DynamicResource>>> {
        Some(self.read_kind(kind, options))
    }

    fn create_now(&self, resource: DynamicResource, options: &CreateOptions) -> Immediate<DynamicResource> {
        if self.store.is_some() {
            return Immediate::Deferred(resource);
        }
        Immediate::Done(self.submit_create(resource, options).and_then(Pending::finish))
    }

    fn update_now(&self, resource: DynamicResource, options: &UpdateOptions) -> Immediate<DynamicResource> {
        if self.store.is_some() {
            return Immediate::Deferred(resource);
        }
        Immediate::Done(self.submit_update(resource, options).finish())
    }

    fn observe_kind(&self, kind: &Kind, observer: Arc<dyn Observer>) -> Option<Result<Observation>> {
        let observe = || {
            let guard = self.collection(kind)?;
            Ok(Arc::clone(&guard).observe(observer))
        };
        Some(observe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{Metadata, Resource, ResourceDefinition, TypeNames, TypeSlot};
    use crate::state::{Bookmark, Event};

    fn resource(namespace: &str, id: &str) -> DynamicResource {
        DynamicResource::without_spec(Metadata::new(namespace, "Things.test.cosi.dev", id))
    }

    /// A read-only client must not grow the state: reads of kinds nobody
    /// wrote leave nothing, and a watch's collection goes with its last watcher.
    #[tokio::test]
    async fn reads_and_watches_of_unwritten_kinds_leave_nothing() {
        let state = MemoryState::default();
        for i in 0..100 {
            let namespace = format!("ns{i}");
            let kind = Kind::new(&namespace, "Things.test.cosi.dev");
            let pointer = kind.pointer("absent");
            assert!(matches!(state.get_dynamic(&pointer).await, Err(Error::NotFound(_))));
            assert!(state.list_dynamic(&kind, &ListOptions::default()).await.unwrap().is_empty());
            assert!(matches!(
                state.destroy_dynamic(&pointer, DestroyOptions::default()).await,
                Err(Error::NotFound(_))
            ));
            let update = resource(&namespace, "absent");
            assert!(matches!(state.update_dynamic(update, UpdateOptions::default()).await, Err(Error::NotFound(_))));
            let one = state.watch_dynamic(&pointer, WatchOptions::default()).await.unwrap();
            let all = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
            let again = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
            drop((one, all));
            assert_eq!(state.collection_count(), 1, "a collection stays while it is watched");
            drop(again);
            assert_eq!(state.collection_count(), 0, "the last watcher took the collection with it");
            let refused =
                WatchKindOptions { start_from: Some(Bookmark::from_bytes(&[0u8; 16][..])), ..Default::default() };
            assert!(state.watch_kind_dynamic(&kind, refused).await.is_err());
            assert_eq!(state.collection_count(), 0, "a refused watch leaves nothing");
        }
    }

    /// A create the state refuses writes nothing, so it leaves no collection either.
    #[tokio::test]
    async fn refused_creates_leave_nothing() {
        let plain = MemoryState::default();
        let backed = MemoryState::with_store(MemoryOptions::default(), Arc::new(RefusingStore)).unwrap();
        for state in [&plain, &backed] {
            let bad_id = resource("ns1", "");
            let refused = state.create_dynamic(bad_id, CreateOptions::default()).await;
            assert!(matches!(refused, Err(Error::InvalidArgument(_))), "{refused:?}");
            let mut owned = resource("ns2", "a");
            owned.metadata_mut().set_owner(Some("someone"));
            let other_owner = CreateOptions { owner: Some("someone-else".into()) };
            assert!(matches!(state.create_dynamic(owned, other_owner).await, Err(Error::InvalidArgument(_))));
            assert_eq!(state.collection_count(), 0);
        }
        assert!(backed.create_dynamic(resource("ns3", "a"), CreateOptions::default()).await.is_err());
        assert_eq!(backed.collection_count(), 0, "a create the store refused leaves nothing");
    }

    /// A resource type numbered as `#[derive(Resource)]` numbers one.
    #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Thing;

    impl Resource for Thing {
        const TYPE: &'static str = "Things.test.cosi.dev";
        const NAMESPACE: &'static str = "ns";
        const SENSITIVE: bool = false;

        fn type_names() -> &'static TypeNames {
            fn index() -> u32 {
                static SLOT: TypeSlot = TypeSlot::new();
                SLOT.index()
            }
            static NAMES: TypeNames = TypeNames::new("ns", "Things.test.cosi.dev", Some(index));
            &NAMES
        }

        fn definition() -> ResourceDefinition {
            unreachable!("not used by these tests")
        }
    }

    /// A resource type's collection is found by the type's number, without
    /// the map or its lock, once it was written; one only watched is not, and
    /// still goes with its last watcher.
    #[tokio::test]
    async fn written_collections_of_resource_types_need_no_map() {
        let state = Arc::new(MemoryState::default());
        let kind = Thing::kind();
        let index = kind.type_index().expect("a derived resource type has a number");
        let watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
        assert!(matches!(state.get_dynamic(&Thing::pointer("a")).await, Err(Error::NotFound(_))));
        assert!(state.by_type.get(index).is_none(), "a collection only watched was kept");
        drop(watch);
        assert_eq!(state.collection_count(), 0, "a collection only watched stayed");

        state.create_dynamic(resource("ns", "a"), CreateOptions::default()).await.unwrap();
        let got = state.get_dynamic(&Thing::pointer("a")).await.unwrap();
        let kept = state.by_type.get(index).expect("the written collection is kept by number");
        assert!(Arc::ptr_eq(kept, &state.collections.read()[&kind]));

        // With the map write-locked, a typed read still finds the resource.
        let map = state.collections.write();
        let (sent, received) = std::sync::mpsc::channel();
        let reader = Arc::clone(&state);
        let thread =
            std::thread::spawn(move || sent.send(reader.read(&Thing::pointer("a")).map(|found| found.id().to_owned())));
        let read = received.recv_timeout(std::time::Duration::from_secs(10));
        drop(map);
        thread.join().unwrap().unwrap();
        assert_eq!(read.expect("a typed read waited for the map's lock").unwrap(), "a");

        // Names given at run time find the same collection through the map.
        let by_name = state.get_dynamic(&Pointer::new("ns", "Things.test.cosi.dev", "a")).await.unwrap();
        assert!(DynamicResource::ptr_eq(&got, &by_name));
        assert!(matches!(state.get_dynamic(&Thing::pointer("b")).await, Err(Error::NotFound(_))));
        // The table is the state's own.
        let other = MemoryState::default();
        assert!(matches!(other.get_dynamic(&Thing::pointer("a")).await, Err(Error::NotFound(_))));
        assert!(other.by_type.get(index).is_none());
    }

    /// A collection loaded from the store holds resources, so it stays: it
    /// is kept by number before anything is written to it.
    #[tokio::test]
    async fn loaded_collections_of_resource_types_need_no_map() {
        let store = Arc::new(LoadingStore(vec![resource("ns", "a"), resource("ns", "b")]));
        let state = MemoryState::with_store(MemoryOptions::default(), store).unwrap();
        let index = Thing::kind().type_index().expect("a derived resource type has a number");
        assert_eq!(state.get_dynamic(&Thing::pointer("a")).await.unwrap().id(), "a");
        assert!(state.by_type.get(index).is_some(), "a loaded collection was not kept");
        for id in ["a", "b"] {
            state.destroy_dynamic(&Thing::pointer(id), DestroyOptions::default()).await.unwrap();
        }
        assert_eq!(state.collection_count(), 1, "an emptied collection that was loaded went");
        assert!(state.list_dynamic(&Thing::kind(), &ListOptions::default()).await.unwrap().is_empty());
    }

    /// A written collection keeps its history (and bookmarks) after its watchers leave.
    #[tokio::test]
    async fn written_collections_stay() {
        let state = MemoryState::default();
        let kind = Kind::new("ns", "Things.test.cosi.dev");
        let watch = state.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.unwrap();
        state.create_dynamic(resource("ns", "a"), CreateOptions::default()).await.unwrap();
        state.destroy_dynamic(&kind.pointer("a"), DestroyOptions::default()).await.unwrap();
        drop(watch);
        assert_eq!(state.collection_count(), 1);
        let tail = WatchKindOptions { tail_events: 2, ..Default::default() };
        let mut watch = state.watch_kind_dynamic(&kind, tail).await.unwrap();
        let events = watch.recv_batch().await.unwrap();
        assert_eq!(events.len(), 2, "{events:?}");
    }

    /// The bookmark of an unwritten kind's bootstrap still works after its collection was freed.
    #[tokio::test]
    async fn bookmarks_of_freed_collections_stay_valid() {
        let state = MemoryState::default();
        let kind = Kind::new("ns", "Things.test.cosi.dev");
        let options = WatchKindOptions { bootstrap_bookmark: true, ..Default::default() };
        let mut watch = state.watch_kind_dynamic(&kind, options).await.unwrap();
        let bookmark = match watch.recv().await {
            Some(Event::Noop { bookmark: Some(bookmark), .. }) => bookmark,
            other => panic!("expected the bootstrap bookmark, got {other:?}"),
        };
        drop(watch);
        assert_eq!(state.collection_count(), 0);
        state.create_dynamic(resource("ns", "a"), CreateOptions::default()).await.unwrap();
        let resumed = WatchKindOptions { start_from: Some(bookmark), ..Default::default() };
        let mut watch = state.watch_kind_dynamic(&kind, resumed).await.unwrap();
        match watch.recv().await {
            Some(Event::Created { resource, .. }) => assert_eq!(resource.id(), "a"),
            other => panic!("expected the create after the bookmark, got {other:?}"),
        }
    }

    /// Resources of one owner share one copy of its name, whether the owner
    /// came with the create's options, in the resource's metadata, with an
    /// update or from the store, and however short; owners that take turns
    /// each stay as they were written.
    #[tokio::test]
    async fn resources_of_one_owner_share_its_name() {
        const LONG: &str = "network.HostnameSpecController";
        const OTHER: &str = "network.AddressSpecController";
        let address = |resource: &DynamicResource| resource.metadata().owner().map(str::as_ptr);
        let mut loaded = Vec::new();
        for id in ["loaded-1", "loaded-2"] {
            let mut resource = resource("ns", id);
            resource.metadata_mut().set_owner(Some(LONG));
            loaded.push(resource);
        }
        assert_ne!(address(&loaded[0]), address(&loaded[1]), "two names decoded apart");
        let state = MemoryState::with_store(MemoryOptions::default(), Arc::new(LoadingStore(loaded))).unwrap();
        let kind = Kind::new("ns", "Things.test.cosi.dev");
        let get = |id: &'static str| state.read(&kind.pointer(id)).expect("stored");
        assert_eq!(address(&get("loaded-1")), address(&get("loaded-2")), "loaded owners are not shared");

        let plain = MemoryState::default();
        let by_options = CreateOptions::owner(LONG);
        let first = plain.create_dynamic(resource("ns", "a"), by_options.clone()).await.unwrap();
        let second = plain.create_dynamic(resource("ns", "b"), by_options.clone()).await.unwrap();
        let mut in_metadata = resource("ns", "c");
        in_metadata.metadata_mut().set_owner(Some(LONG));
        let third = plain.create_dynamic(in_metadata, CreateOptions::default()).await.unwrap();
        assert_eq!(first.metadata().owner(), Some(LONG));
        assert_eq!(address(&first), address(&second), "creates by one owner copied its name");
        assert_eq!(address(&first), address(&third), "an owner in the metadata was not shared");

        let other = plain.create_dynamic(resource("ns", "d"), CreateOptions::owner(OTHER)).await.unwrap();
        let fourth = plain.create_dynamic(resource("ns", "e"), by_options).await.unwrap();
        assert_eq!(other.metadata().owner(), Some(OTHER));
        assert_eq!(fourth.metadata().owner(), Some(LONG));
        let short = plain.create_dynamic(resource("ns", "f"), CreateOptions::owner("short")).await.unwrap();
        let also_short = plain.create_dynamic(resource("ns", "g"), CreateOptions::owner("short")).await.unwrap();
        assert_eq!(short.metadata().owner(), Some("short"));
        assert_eq!(address(&short), address(&also_short), "a short owner's name was copied");

        // A new owner arriving in the metadata is kept as it came, and shared from then on.
        let mut newcomer = resource("ns", "h");
        newcomer.metadata_mut().set_owner(Some(OTHER));
        let sent = address(&newcomer);
        let newcomer = plain.create_dynamic(newcomer, CreateOptions::default()).await.unwrap();
        assert_eq!(address(&newcomer), sent, "a new owner's name was copied");
        let after = plain.create_dynamic(resource("ns", "i"), CreateOptions::owner(OTHER)).await.unwrap();
        assert_eq!(address(&after), sent, "a new owner from the metadata was not shared");

        // An update sent with a copy of the name of its own (as a remote
        // writer's arrives) stores the stored version's.
        let mut update = first.clone();
        update.metadata_mut().set_owner(Some(LONG));
        assert_ne!(address(&update), address(&first));
        let updated = plain.update_dynamic(update, UpdateOptions::owner(LONG)).await.unwrap();
        assert_eq!(address(&updated), address(&first), "an update copied the owner's name");
    }

    /// Loads one resource of a kind without a type number, in namespace
    /// `a`; holds a batch that destroys until `release` has a message.
    struct GatedStore {
        entered: std::sync::mpsc::SyncSender<()>,
        release: parking_lot::Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl BackingStore for GatedStore {
        fn load(&self) -> Result<Vec<DynamicResource>> {
            Ok(vec![resource("a", "held")])
        }

        fn write(&self, batch: &[StoreWrite<'_>]) -> Result<()> {
            if batch.iter().any(|write| matches!(write, StoreWrite::Destroy(_))) {
                self.entered.send(()).expect("the test waits for the destroy");
                self.release.lock().recv().expect("the test releases the destroy");
            }
            Ok(())
        }
    }

    /// A destroy waits for its store write without the state's map locked, so
    /// a write that creates a collection meanwhile does not wait for it.
    #[test]
    fn a_destroy_waits_for_the_store_without_the_states_map() {
        let (entered, on_entered) = std::sync::mpsc::sync_channel(1);
        let (release, on_release) = std::sync::mpsc::sync_channel(1);
        let store = GatedStore { entered, release: parking_lot::Mutex::new(on_release) };
        let state = Arc::new(MemoryState::with_store(MemoryOptions::default(), Arc::new(store)).unwrap());
        fn block_on<F: std::future::Future>(future: F) -> F::Output {
            tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
        }
        let destroying = std::thread::spawn({
            let state = Arc::clone(&state);
            move || {
                let pointer = Kind::new("a", "Things.test.cosi.dev").pointer("held");
                block_on(state.destroy_dynamic(&pointer, DestroyOptions::default()))
            }
        });
        on_entered.recv().expect("the destroy reaches the store");
        let (created, on_created) = std::sync::mpsc::sync_channel(1);
        let creating = std::thread::spawn({
            let state = Arc::clone(&state);
            move || {
                let result = block_on(state.create_dynamic(resource("b", "new"), CreateOptions::default()));
                created.send(result.map(drop)).expect("the test waits for the create");
            }
        });
        // A bound on a wait that is over at once unless the create is stuck behind the destroy.
        let result = on_created.recv_timeout(std::time::Duration::from_secs(15));
        release.send(()).expect("the destroy waits");
        assert!(matches!(result, Ok(Ok(()))), "the create waited for the destroy's store write: {result:?}");
        destroying.join().unwrap().expect("the destroy");
        creating.join().unwrap();
    }

    struct NullStore;

    /// Loads the resources it holds; takes every write.
    struct LoadingStore(Vec<DynamicResource>);

    impl BackingStore for LoadingStore {
        fn load(&self) -> Result<Vec<DynamicResource>> {
            Ok(self.0.clone())
        }

        fn write(&self, _batch: &[StoreWrite<'_>]) -> Result<()> {
            Ok(())
        }
    }

    struct RefusingStore;

    impl BackingStore for RefusingStore {
        fn load(&self) -> Result<Vec<DynamicResource>> {
            Ok(Vec::new())
        }

        fn write(&self, _batch: &[StoreWrite<'_>]) -> Result<()> {
            Err(Error::backend(std::io::Error::other("refused")))
        }
    }

    impl BackingStore for NullStore {
        fn load(&self) -> Result<Vec<DynamicResource>> {
            Ok(Vec::new())
        }

        fn write(&self, _batch: &[StoreWrite<'_>]) -> Result<()> {
            Ok(())
        }
    }

    /// Writes happen at once only where nothing makes them wait: a backing
    /// store's writes block. Done at once, a write stores the allocation it
    /// was given when nobody else holds it.
    #[test]
    fn writes_are_immediate_without_a_backing_store() {
        let plain = MemoryState::default();
        let written = resource("ns", "a");
        let allocation: *const Metadata = written.metadata();
        match plain.create_now(written, &CreateOptions::default()) {
            Immediate::Done(Ok(stored)) => {
                assert_eq!(stored.metadata().version().get(), Some(1));
                assert!(std::ptr::eq(stored.metadata(), allocation), "the create copied its resource");
            }
            other => panic!("expected a create done at once, got {other:?}"),
        }
        let mut update = resource("ns", "a");
        update.metadata_mut().set_version(crate::resource::Version::new(1));
        let allocation: *const Metadata = update.metadata();
        match plain.update_now(update, &UpdateOptions::default()) {
            Immediate::Done(Ok(stored)) => {
                assert_eq!(stored.metadata().version().get(), Some(2));
                assert!(std::ptr::eq(stored.metadata(), allocation), "the update copied its resource");
            }
            other => panic!("expected an update done at once, got {other:?}"),
        }
        // A resource someone else still holds is copied, never changed under them.
        let stored = plain.read(&Kind::new("ns", "Things.test.cosi.dev").pointer("a")).expect("stored");
        let again = plain.update_now(stored.clone(), &UpdateOptions::default());
        assert!(matches!(again, Immediate::Done(Ok(ref next)) if next.metadata().version().get() == Some(3)));
        assert_eq!(stored.metadata().version().get(), Some(2), "the update changed a resource a reader holds");
        assert!(matches!(
            plain.update_now(resource("ns", "absent"), &UpdateOptions::default()),
            Immediate::Done(Err(Error::NotFound(_)))
        ));

        let backed = MemoryState::with_store(MemoryOptions::default(), Arc::new(NullStore)).unwrap();
        match backed.create_now(resource("ns", "a"), &CreateOptions::default()) {
            Immediate::Deferred(handed_back) => assert_eq!(handed_back.id(), "a"),
            other => panic!("expected the create handed back, got {other:?}"),
        }
        assert!(matches!(backed.update_now(resource("ns", "a"), &UpdateOptions::default()), Immediate::Deferred(_)));
    }
}
