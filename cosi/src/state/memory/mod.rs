//! The in-memory state: one [`Collection`] per (namespace, type).
//!
//! A [`BackingStore`] makes it durable, as Go COSI's `inmem.WithBackingStore`
//! does: each write is handed to the store after every check and before the
//! resource changes in memory or an event is published, so the history of a
//! collection is in the order the store made its writes durable, and a write
//! the store refuses changes nothing.

mod collection;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::RwLock;

use crate::resource::{DynamicResource, Kind, Pointer};
use crate::state::{
    CreateOptions, DestroyOptions, Error, ListOptions, Result, State, UpdateOptions, Watch, WatchKindOptions,
    WatchOptions,
};

use collection::Collection;

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
/// history, so writers of different kinds never contend.
#[derive(Default)]
pub struct MemoryState {
    options: MemoryOptions,
    /// Namespace, then type: two levels, so a lookup borrows the caller's strings.
    collections: RwLock<HashMap<String, HashMap<String, Arc<Collection>>>>,
    /// Where writes go through to; `None` for a plain in-memory state.
    store: Option<Arc<dyn BackingStore>>,
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
        Ok(MemoryState { options, collections: RwLock::default(), store: None })
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
            let pointer = resource.metadata.pointer();
            pointer.validate().map_err(Error::InvalidArgument)?;
            state.collection(pointer.namespace(), pointer.r#type()).restore(resource)?;
        }
        Ok(state)
    }

    /// The collection of (namespace, type), if anything ever touched it.
    fn existing(&self, namespace: &str, r#type: &str) -> Option<Arc<Collection>> {
        self.collections.read().get(namespace)?.get(r#type).cloned()
    }

    /// The collection of (namespace, type), created on first use.
    fn collection(&self, namespace: &str, r#type: &str) -> Arc<Collection> {
        if let Some(collection) = self.existing(namespace, r#type) {
            return collection;
        }
        let mut collections = self.collections.write();
        let types = collections.entry(namespace.to_owned()).or_default();
        let collection = types.entry(r#type.to_owned()).or_insert_with(|| {
            Arc::new(Collection::new(Kind::new(namespace, r#type), &self.options, self.store.clone()))
        });
        Arc::clone(collection)
    }
}

#[async_trait]
impl State for MemoryState {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<Arc<DynamicResource>> {
        pointer.validate().map_err(Error::InvalidArgument)?;
        self.existing(pointer.namespace(), pointer.r#type())
            .and_then(|collection| collection.get(pointer.id()))
            .ok_or_else(|| Error::NotFound(pointer.clone()))
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<Arc<DynamicResource>>> {
        kind.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        let collection = self.existing(kind.namespace(), kind.r#type());
        Ok(collection.map(|collection| collection.list(options)).unwrap_or_default())
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<Arc<DynamicResource>> {
        let pointer = resource.metadata.pointer();
        pointer.validate().map_err(Error::InvalidArgument)?;
        self.collection(pointer.namespace(), pointer.r#type()).create(resource, options)
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<Arc<DynamicResource>> {
        let pointer = resource.metadata.pointer();
        pointer.validate().map_err(Error::InvalidArgument)?;
        match self.existing(pointer.namespace(), pointer.r#type()) {
            Some(collection) => collection.update(resource, options),
            None => Err(Error::NotFound(pointer.clone())),
        }
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()> {
        pointer.validate().map_err(Error::InvalidArgument)?;
        match self.existing(pointer.namespace(), pointer.r#type()) {
            Some(collection) => collection.destroy(pointer, options),
            None => Err(Error::NotFound(pointer.clone())),
        }
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch> {
        pointer.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        self.collection(pointer.namespace(), pointer.r#type()).watch(pointer.id(), options)
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch> {
        kind.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        self.collection(kind.namespace(), kind.r#type()).watch_kind(options)
    }
}
