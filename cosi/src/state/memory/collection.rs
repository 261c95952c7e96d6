//! One (namespace, type) of the in-memory state: its resources and its event history.
//!
//! Writers append to a ring of events under a short lock and wake the
//! watchers through one `tokio::sync::Notify`. Watchers own a read position
//! into the ring and pull from it when woken, so a writer never waits for a
//! watcher and a watcher costs nothing while it is idle. A watcher whose
//! position has fallen out of the ring gets one `Errored` event instead of a
//! silent gap.

use std::sync::{Arc, Weak};
use std::time::SystemTime;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arcstr::ArcStr;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::resource::{DynamicResource, Kind, Metadata, Phase, Pointer};
use crate::state::memory::{BackingStore, Collections, MemoryOptions};

mod backed;
mod resources;

use crate::state::{
    Bookmark, CreateOptions, DestroyOptions, Error, Event, ListOptions, Observation, Observer, Result, UpdateOptions,
    Watch, WatchKindOptions, WatchOptions, WatchProgress, phase_matches,
};
use backed::{Combiner, Write};
use resources::Resources;

/// A write handed to a collection: done, or queued for the backing store
/// (wait for it with [`Collection::wait`], without holding the state's map).
pub(super) enum Submitted<T> {
    Done(Result<T>),
    Queued(u64),
}

pub(super) struct Collection {
    kind: Kind,
    /// Where writes go through to, before they change anything here.
    store: Option<Arc<dyn BackingStore>>,
    /// With a store: the writes waiting for the next batch (see `backed`).
    combiner: Combiner,
    /// Random per state and kind, so a bookmark from another collection or
    /// from before a restart is rejected rather than misread, while one from
    /// a freed collection of the same kind stays valid (see `release`).
    cookie: u64,
    /// The state's map, to leave it when this collection no longer holds anything.
    home: Weak<Collections>,
    inner: Mutex<Inner>,
    /// Woken after every event, when anyone watches.
    written: Notify,
    /// How many watches are open: writers skip the wake-up when there are none.
    watchers: AtomicUsize,
    /// The owner of the last owned resource created or loaded here (see [`Owners`]).
    owners: Owners,
    /// Set at the first event or the first resource loaded from the store.
    /// Such a collection is never freed (see [`release`](Collection::release):
    /// it has an event, or a resource whose removal would be one), so it may
    /// be found without the state's map.
    permanent: AtomicBool,
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection").field("kind", &self.kind).field("inner", &self.inner).finish_non_exhaustive()
    }
}

struct Inner {
    resources: Resources,
    /// Event `p` lives at `history[p % capacity]` while `write_pos - p <= capacity`.
    history: Vec<Event>,
    capacity: usize,
    max_capacity: usize,
    gap: usize,
    /// The position the next event gets; positions never repeat.
    write_pos: u64,
    /// Called with each event as it is published, with their registration numbers.
    observers: Vec<(u64, Arc<dyn Observer>)>,
    next_observer: u64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("resources", &self.resources)
            .field("history", &self.history)
            .field("write_pos", &self.write_pos)
            .field("observers", &self.observers.len())
            .finish_non_exhaustive()
    }
}

impl Collection {
    pub(super) fn new(
        kind: Kind,
        cookie: u64,
        options: &MemoryOptions,
        store: Option<Arc<dyn BackingStore>>,
        home: Weak<Collections>,
    ) -> Self {
        Collection {
            kind,
            store,
            combiner: Combiner::default(),
            cookie,
            home,
            inner: Mutex::new(Inner {
                resources: Resources::default(),
                history: Vec::with_capacity(options.history_initial_capacity),
                capacity: options.history_initial_capacity,
                max_capacity: options.history_max_capacity,
                gap: options.history_gap,
                write_pos: 0,
                observers: Vec::new(),
                next_observer: 0,
            }),
            written: Notify::new(),
            watchers: AtomicUsize::new(0),
            owners: Owners::default(),
            permanent: AtomicBool::new(false),
        }
    }

    /// Whether it was ever written or loaded, and so stays in the state's map for good.
    pub(super) fn is_permanent(&self) -> bool {
        self.permanent.load(Ordering::Relaxed)
    }

    /// Puts back a resource loaded from the backing store: no history, no store write.
    pub(super) fn restore(&self, mut resource: DynamicResource) -> Result<()> {
        let metadata = resource.metadata_mut();
        metadata.prepare_to_store(&self.kind);
        self.owners.share(metadata);
        let mut inner = self.inner.lock();
        if inner.resources.get(resource.id()).is_some() {
            return Err(Error::AlreadyExists(resource.metadata().pointer().clone()));
        }
        inner.resources.insert(resource)?;
        self.permanent.store(true, Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn get(&self, id: &str) -> Option<DynamicResource> {
        self.inner.lock().resources.get(id).cloned()
    }

    pub(super) fn list(&self, options: &ListOptions) -> Vec<DynamicResource> {
        let mut inner = self.inner.lock();
        if options.labels.is_empty() && options.id.is_none() {
            // An exact size hint: one allocation for the whole list.
            return inner.resources.sorted().cloned().collect();
        }
        inner.resources.sorted().filter(|resource| options.matches(resource)).cloned().collect()
    }

    /// Stores `resource` (its allocation itself when nobody else holds it).
    pub(super) fn create(&self, mut resource: DynamicResource, options: &CreateOptions) -> Submitted<DynamicResource> {
        // Made unique once: the preparation below edits it in place.
        let metadata = resource.metadata_mut();
        metadata.prepare_to_store(&self.kind);
        if let Err(err) = prepare_create(metadata, options, &self.owners) {
            return Submitted::Done(Err(err));
        }
        if self.store.is_some() {
            return Submitted::Queued(self.enqueue(Write::Create(resource)));
        }
        let mut inner = self.inner.lock();
        Submitted::Done(
            check_create(inner.resources.get(resource.id()), &resource, inner.resources.room())
                .and_then(|()| self.apply_create(&mut inner, resource)),
        )
    }

    /// Replaces the stored resource with `resource` (its allocation itself
    /// when nobody else holds it).
    pub(super) fn update(&self, mut resource: DynamicResource, options: &UpdateOptions) -> Submitted<DynamicResource> {
        // Made unique once: the checks below edit it in place.
        let metadata = resource.metadata_mut();
        metadata.prepare_to_store(&self.kind);
        if self.store.is_some() {
            return Submitted::Queued(self.enqueue(Write::Update(resource, options.clone())));
        }
        let mut inner = self.inner.lock();
        // One lookup for the check and the replacement.
        let slot = inner.resources.slot_of(metadata.id());
        let current = slot.and_then(|slot| inner.resources.at(slot));
        let checked = check_update(current, metadata, options);
        Submitted::Done(checked.map(|()| self.apply_update(&mut inner, resource, slot)))
    }

    pub(super) fn destroy(&self, pointer: &Pointer, options: DestroyOptions) -> Submitted<()> {
        if self.store.is_some() {
            return Submitted::Queued(self.enqueue(Write::Destroy(pointer.clone(), options)));
        }
        let mut inner = self.inner.lock();
        Submitted::Done(
            check_destroy(inner.resources.get(pointer.id()), pointer, &options)
                .map(|()| self.apply_destroy(&mut inner, pointer)),
        )
    }

    /// Stores a checked create and publishes its event.
    ///
    /// Fails only when the collection already holds the most resources it can.
    fn apply_create(&self, inner: &mut Inner, stored: DynamicResource) -> Result<DynamicResource> {
        inner.resources.insert(stored.clone())?;
        self.publish(inner, |bookmark| Event::Created { resource: stored.clone(), bookmark });
        Ok(stored)
    }

    /// Stores a checked update and publishes its event.
    fn apply_update(&self, inner: &mut Inner, stored: DynamicResource, slot: Option<u32>) -> DynamicResource {
        if let Some(old) = inner.resources.replace(stored.clone(), slot) {
            self.publish(inner, |bookmark| Event::Updated { resource: stored.clone(), old, bookmark });
        }
        stored
    }

    /// Removes a checked destroy and publishes its event.
    fn apply_destroy(&self, inner: &mut Inner, pointer: &Pointer) {
        if let Some(old) = inner.resources.remove(pointer.id()) {
            self.publish(inner, |bookmark| Event::destroyed(old, bookmark));
        }
    }

    /// Leaves the state's map if this collection holds nothing: no resource,
    /// no event ever written, no watcher and no write waiting for the store.
    ///
    /// Such a collection was only ever watched, and its only bookmark (the
    /// position before its first event) means the same in a collection of
    /// the same kind created later, which gets the same cookie; so freeing it
    /// changes nothing a client can see. A collection that was ever written
    /// keeps its history, and its bookmarks, for as long as the state lives.
    pub(super) fn release(&self) {
        let Some(home) = self.home.upgrade() else {
            return;
        };
        let mut collections = home.write();
        // Another collection of this kind may have replaced this one already.
        if !collections.get(&self.kind).is_some_and(|current| std::ptr::eq(Arc::as_ptr(current), self)) {
            return;
        }
        // Watchers and writes register under the map's lock, which is held
        // here: what these checks see stays true until the collection is gone.
        let unused = {
            let inner = self.inner.lock();
            inner.write_pos == 0 && inner.resources.is_empty()
        } && self.watchers.load(Ordering::Acquire) == 0
            && self.combiner.is_idle();
        if unused {
            collections.remove(&self.kind);
        }
    }

    pub(super) fn watch(self: Arc<Self>, id: &str, options: WatchOptions) -> Result<Watch> {
        let inner = self.inner.lock();
        let mut initial = Vec::new();
        let start = if let Some(bookmark) = &options.start_from {
            let pos = self.decode(bookmark, &inner, false)?;
            (pos + 1) as u64
        } else if options.tail_events > 0 {
            let oldest = inner.oldest_offered();
            let mut start = inner.write_pos;
            let mut found = 0;
            while start > oldest && found < options.tail_events {
                start -= 1;
                if inner.event_at(start).pointer().is_some_and(|pointer| pointer.id() == id) {
                    found += 1;
                }
            }
            start
        } else {
            initial.push(match inner.resources.get(id) {
                Some(resource) => Event::Created { resource: resource.clone(), bookmark: None },
                None => Event::Destroyed { pointer: self.kind.pointer(id), resource: None, bookmark: None },
            });
            inner.write_pos
        };
        drop(inner);
        Ok(Cursor::start(self, start, initial, Filter::Id(id.to_owned())))
    }

    pub(super) fn watch_kind(self: Arc<Self>, options: WatchKindOptions) -> Result<Watch> {
        let mut inner = self.inner.lock();
        let mut initial = Vec::new();
        let start = if let Some(bookmark) = &options.start_from {
            let pos = self.decode(bookmark, &inner, true)?;
            (pos + 1) as u64
        } else if options.tail_events > 0 {
            let tail = options.tail_events.min(inner.max_capacity - inner.gap) as u64;
            inner.write_pos.saturating_sub(tail)
        } else {
            inner.write_pos
        };
        let before_start = self.encode(start as i64 - 1);
        if options.bootstrap_contents {
            initial.extend(
                inner
                    .resources
                    .sorted()
                    .filter(|resource| options.matches(resource))
                    .map(|resource| Event::Created { resource: resource.clone(), bookmark: None }),
            );
            initial.push(Event::Bootstrapped { kind: self.kind.clone(), bookmark: Some(before_start.clone()) });
        }
        if options.bootstrap_bookmark {
            initial.push(Event::Noop { kind: self.kind.clone(), bookmark: Some(before_start) });
        }
        drop(inner);
        Ok(Cursor::start(self, start, initial, Filter::Kind(options)))
    }

    /// Appends an event to the history and wakes the watchers.
    fn publish(&self, inner: &mut Inner, event: impl FnOnce(Option<Bookmark>) -> Event) {
        let pos = inner.write_pos;
        // The ring grows only while it is filled for the first time, when every
        // slot holds the event of the same position, so indices stay valid.
        if pos == inner.capacity as u64 && inner.capacity < inner.max_capacity {
            inner.capacity = (inner.capacity * 2).min(inner.max_capacity);
            inner.history.reserve(inner.capacity - inner.history.len());
        }
        let event = event(Some(self.encode(pos as i64)));
        let slot = (pos % inner.capacity as u64) as usize;
        if slot < inner.history.len() {
            inner.history[slot] = event;
        } else {
            inner.history.push(event);
        }
        inner.write_pos = pos + 1;
        if pos == 0 {
            self.permanent.store(true, Ordering::Relaxed);
        }
        for (_, observer) in &inner.observers {
            observer.observe(&inner.history[slot]);
        }
        if self.watchers.load(Ordering::Acquire) > 0 {
            self.written.notify_waiters();
        }
    }

    /// Calls `observer` with every event published from now on, until the
    /// returned observation is dropped. It counts as a watcher: the
    /// collection stays while it is observed.
    pub(super) fn observe(self: Arc<Self>, observer: Arc<dyn Observer>) -> Observation {
        let number = {
            let mut inner = self.inner.lock();
            let number = inner.next_observer;
            inner.next_observer += 1;
            inner.observers.push((number, observer));
            number
        };
        self.watchers.fetch_add(1, Ordering::AcqRel);
        Observation::new(Observed { collection: self, number })
    }

    fn encode(&self, pos: i64) -> Bookmark {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.cookie.to_be_bytes());
        bytes[8..].copy_from_slice(&pos.to_be_bytes());
        Bookmark::from_slice(&bytes)
    }

    /// The position a bookmark names, if it is one of ours and still in the history.
    ///
    /// Kind watches also accept the position before the first event, which a
    /// bootstrap of an empty collection hands out.
    fn decode(&self, bookmark: &Bookmark, inner: &Inner, kind_watch: bool) -> Result<i64> {
        let invalid = |reason: &str| Error::InvalidBookmark { kind: self.kind.clone(), reason: reason.to_owned() };
        let bytes: &[u8; 16] = bookmark.as_bytes().try_into().map_err(|_| invalid("it has the wrong length"))?;
        let (cookie, pos) = bytes.split_at(8);
        if u64::from_be_bytes(cookie.try_into().expect("8 bytes")) != self.cookie {
            return Err(invalid("it was issued by another collection or before a restart"));
        }
        let pos = i64::from_be_bytes(pos.try_into().expect("8 bytes"));
        let write_pos = inner.write_pos as i64;
        let oldest = write_pos + inner.gap as i64 - inner.max_capacity as i64;
        let lowest = if kind_watch { -1 } else { 0 };
        if pos < lowest || pos >= write_pos || pos < oldest {
            return Err(invalid("it is no longer in the history"));
        }
        Ok(pos)
    }
}

impl Inner {
    /// The oldest position offered to tails and bookmarks: the history minus its gap.
    ///
    /// Measured against the maximum capacity: while the ring is still growing it
    /// holds every event ever written, and once grown the two are equal.
    fn oldest_offered(&self) -> u64 {
        (self.write_pos + self.gap as u64).saturating_sub(self.max_capacity as u64)
    }

    fn event_at(&self, pos: u64) -> &Event {
        &self.history[(pos % self.capacity as u64) as usize]
    }
}

/// A destroy's or a teardown's owner against the stored one; an empty owner
/// is none, as `Metadata::set_owner` has it.
fn check_owner(pointer: &Pointer, stored: &DynamicResource, owner: Option<&str>) -> Result<()> {
    if stored.metadata().owner() == owner.filter(|owner| !owner.is_empty()) {
        return Ok(());
    }
    Err(Error::OwnerConflict { pointer: pointer.clone(), owner: stored.metadata().owner().map(Into::into) })
}

/// The names of the owners of a collection's resources, one copy each.
///
/// A resource holds its owner's name as a counted string (`ArcStr`, 8 bytes
/// in the resource). A collection's resources mostly have one owner, the
/// controller that writes them, so this keeps the last name seen: a create or
/// a load with an equal name takes a count of it instead of a copy of its
/// own (a 48-byte allocation per resource with glibc, for a 30-byte name),
/// and an update takes the stored version's (`Metadata::keep_owner`).
#[derive(Default)]
struct Owners(Mutex<Option<ArcStr>>);

impl Owners {
    /// `owner` (not empty) as the resource stores it.
    fn name(&self, owner: &str) -> ArcStr {
        let mut last = self.0.lock();
        match &*last {
            Some(shared) if shared.as_str() == owner => shared.clone(),
            _ => {
                let name = ArcStr::from(owner);
                *last = Some(name.clone());
                name
            }
        }
    }

    /// Gives `metadata`'s owner the shared copy, or makes its copy the shared one.
    fn share(&self, metadata: &mut Metadata) {
        let Some(owner) = metadata.owner_name() else { return };
        let mut last = self.0.lock();
        let shared = match &*last {
            Some(shared) if ArcStr::ptr_eq(shared, owner) => return,
            Some(shared) if shared == owner => shared.clone(),
            _ => {
                *last = Some(owner.clone());
                return;
            }
        };
        metadata.set_owner_name(shared);
    }
}

/// Sets the owner, version and timestamps of a new resource; checks nothing stored.
fn prepare_create(metadata: &mut Metadata, options: &CreateOptions, owners: &Owners) -> Result<()> {
    match (metadata.owner(), options.owner.as_deref()) {
        (Some(existing), Some(requested)) if existing != requested => {
            return Err(Error::invalid_argument(format!(
                "cannot create {} owned by {requested:?}: its metadata names the owner {existing:?}",
                metadata.pointer()
            )));
        }
        // An empty owner is none, as `Metadata::set_owner` has it.
        (_, Some("")) => {}
        (_, Some(requested)) => metadata.set_owner_name(owners.name(requested)),
        (_, None) => owners.share(metadata),
    }
    metadata.set_version(crate::resource::Version::new(1));
    metadata.stamp_created(SystemTime::now());
    Ok(())
}

/// A create against what is stored under its ID now, with `room` for that many more resources.
fn check_create(current: Option<&DynamicResource>, resource: &DynamicResource, room: usize) -> Result<()> {
    match current {
        Some(_) => Err(Error::AlreadyExists(resource.metadata().pointer().clone())),
        None if room == 0 => Err(Error::backend(std::io::Error::other(format!(
            "cannot create {}: its collection holds as many resources as it can",
            resource.metadata().pointer()
        )))),
        None => Ok(()),
    }
}

/// An update against what is stored under its ID now; sets the version
/// and the timestamps of the resource to store, and gives it the stored
/// owner's string.
fn check_update(current: Option<&DynamicResource>, metadata: &mut Metadata, options: &UpdateOptions) -> Result<()> {
    let pointer = metadata.pointer();
    let Some(old) = current else {
        return Err(Error::NotFound(pointer.clone()));
    };
    let stored = old.metadata();
    options.check_owner(metadata, stored)?;
    if metadata.version() != stored.version() {
        return Err(Error::VersionConflict {
            pointer: pointer.clone(),
            given: metadata.version(),
            stored: stored.version(),
        });
    }
    if !phase_matches(options.expected_phase, stored.phase()) {
        let expected = options.expected_phase.unwrap_or(Phase::Running);
        return Err(Error::PhaseConflict { pointer: pointer.clone(), expected });
    }
    metadata.set_version(stored.version().next());
    metadata.stamp_updated(stored, SystemTime::now());
    metadata.keep_owner(stored);
    Ok(())
}

/// A destroy against what is stored under its ID now.
fn check_destroy(current: Option<&DynamicResource>, pointer: &Pointer, options: &DestroyOptions) -> Result<()> {
    let Some(old) = current else {
        return Err(Error::NotFound(pointer.clone()));
    };
    check_owner(pointer, old, options.owner.as_deref())?;
    if !old.metadata().finalizers().is_empty() {
        return Err(Error::PendingFinalizers {
            pointer: pointer.clone(),
            finalizers: old.metadata().finalizers().clone(),
        });
    }
    Ok(())
}

/// Which events a watcher sees.
enum Filter {
    Id(String),
    Kind(WatchKindOptions),
}

impl Filter {
    /// The event as this watcher sees it, if at all (see `WatchKindOptions::filter`).
    fn apply(&self, event: &Event) -> Option<Event> {
        match self {
            Filter::Id(id) => event.pointer().is_some_and(|pointer| pointer.id() == id).then(|| event.clone()),
            Filter::Kind(options) => options.filter(event),
        }
    }
}

/// A watcher's read position in a collection's history.
struct Cursor {
    collection: Arc<Collection>,
    pos: u64,
    /// `pos`, as the watch's [`WatchProgress`] reports it.
    progress: Arc<Progress>,
    filter: Filter,
    initial: Vec<Event>,
    finished: bool,
}

/// What a watcher has read of its collection, against what has been written:
/// the watch's [`WatchProgress`].
struct Progress {
    collection: Arc<Collection>,
    read: AtomicU64,
}

impl WatchProgress for Progress {
    fn written(&self) -> u64 {
        self.collection.inner.lock().write_pos
    }

    fn read(&self) -> u64 {
        self.read.load(Ordering::Acquire)
    }
}

impl Cursor {
    fn start(collection: Arc<Collection>, pos: u64, initial: Vec<Event>, filter: Filter) -> Watch {
        collection.watchers.fetch_add(1, Ordering::AcqRel);
        let progress = Arc::new(Progress { collection: Arc::clone(&collection), read: AtomicU64::new(pos) });
        let cursor = Cursor { collection, pos, progress: Arc::clone(&progress), filter, initial, finished: false };
        Watch::from_batches(futures_util::stream::unfold(cursor, |mut cursor| async move {
            let batch = cursor.next_batch().await?;
            Some((batch, cursor))
        }))
        .with_progress(progress)
    }

    async fn next_batch(&mut self) -> Option<Vec<Event>> {
        if !self.initial.is_empty() {
            return Some(std::mem::take(&mut self.initial));
        }
        let collection = Arc::clone(&self.collection);
        while !self.finished {
            // Registered before reading, so a write after the read wakes us:
            // `notify_waiters` reaches every enabled `Notified`.
            let notified = collection.written.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let pending = {
                let inner = collection.inner.lock();
                let behind = inner.write_pos - self.pos;
                if behind > inner.capacity as u64 {
                    self.finished = true;
                    let error =
                        Error::BufferOverrun { kind: collection.kind.clone(), behind, capacity: inner.capacity };
                    return Some(vec![Event::Errored { error }]);
                }
                let pending: Vec<Event> = (self.pos..inner.write_pos).map(|pos| inner.event_at(pos).clone()).collect();
                self.pos = inner.write_pos;
                self.progress.read.store(self.pos, Ordering::Release);
                pending
            };
            let batch: Vec<Event> = pending.iter().filter_map(|event| self.filter.apply(event)).collect();
            if !batch.is_empty() {
                return Some(batch);
            }
            if pending.is_empty() {
                notified.await;
            }
        }
        None
    }
}

/// An observer's registration with its collection.
struct Observed {
    collection: Arc<Collection>,
    number: u64,
}

impl Drop for Observed {
    fn drop(&mut self) {
        self.collection.inner.lock().observers.retain(|(number, _)| *number != self.number);
        if self.collection.watchers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.collection.release();
        }
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        if self.collection.watchers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.collection.release();
        }
    }
}
