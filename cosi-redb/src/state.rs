//! [`RedbState`]: opening the file, and the `State` that writes through to it.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use cosi::state::{
    CreateOptions, DestroyOptions, InProcess, ListOptions, MemoryOptions, MemoryState, UpdateOptions, Watch,
    WatchKindOptions, WatchOptions,
};
use cosi::{DynamicResource, Kind, Pointer, State};
use redb::{Database, ReadableDatabase, ReadableTable};

use crate::Error;
use crate::crypto::{Cipher, EncryptionKey};
use crate::format::{
    self, FORMAT_KEY, FORMAT_VERSION, KEY_CHECK_KEY, KEY_CHECK_TEXT, LEGACY_FORMAT_VERSION, META, RESOURCES,
    key_check_aad, unbound_key_check_aad,
};
use crate::store::RedbStore;

/// How to open a [`RedbState`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Options {
    /// The history each (namespace, type) keeps for watches, as in memory.
    pub history: MemoryOptions,
    /// The key that encrypts specs at rest; `None` stores them in the clear.
    ///
    /// A store is encrypted or not from its creation on: opening it with a
    /// key it was not created with, or without its key, fails.
    pub encryption_key: Option<EncryptionKey>,
    /// A file holding the key (see [`EncryptionKey::from_file`]), read at
    /// open, its mode checked as the store's is; instead of `encryption_key`.
    pub encryption_key_file: Option<PathBuf>,
    /// Refuse ([`Error::NotPrivate`]) a store file or key file that group or
    /// others may read or write, rather than open it and log a warning.
    ///
    /// A warning by default, since an existing file keeps the mode it was
    /// given (a new store file is made 0600): refusing would stop a machine
    /// from booting over a mode.
    pub require_private_files: bool,
}

impl Options {
    /// Sets the watch history settings.
    #[must_use]
    pub fn history(mut self, history: MemoryOptions) -> Self {
        self.history = history;
        self
    }

    /// Encrypts specs at rest with `key` (AES-256-GCM).
    #[must_use]
    pub fn encryption_key(mut self, key: impl Into<EncryptionKey>) -> Self {
        self.encryption_key = Some(key.into());
        self
    }

    /// Encrypts specs at rest with the key in the file at `path`, read at open.
    #[must_use]
    pub fn encryption_key_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.encryption_key_file = Some(path.into());
        self
    }

    /// Refuses a store file or key file that group or others may read or write.
    #[must_use]
    pub fn require_private_files(mut self) -> Self {
        self.require_private_files = true;
        self
    }
}

/// A [`State`] stored in a redb file: durable, write-through, group-committed.
///
/// See the [crate documentation](crate) for what it promises and how.
pub struct RedbState {
    memory: Arc<MemoryState>,
    store: Arc<RedbStore>,
    path: PathBuf,
}

impl RedbState {
    /// Opens the store at `path`, creating it when the file is missing or empty,
    /// and loads every stored resource.
    ///
    /// A missing file is created with mode 0600, whatever the process umask:
    /// the store holds the state of the machine, and its metadata is never
    /// encrypted. An existing file keeps its mode: when group or others may
    /// read or write it (or the key file), this logs a warning, or fails with
    /// [`Options::require_private_files`].
    ///
    /// This blocks on file I/O; from async code, call it in `spawn_blocking`.
    /// Fails with a clear [`Error`] when the file is another program's, damaged,
    /// encrypted with another key, or already open (by this process or another).
    /// A damaged file is told by redb's integrity check, which open runs
    /// (every page's checksum; it costs about a third more than the read).
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Self, Error> {
        RedbState::open_with(path.as_ref(), options, RedbStore::start)
    }

    /// [`RedbState::open`], with `fail` asked before each commit: the commit
    /// fails, as a failing disk fails it, when `fail` returns an error; the
    /// store then refuses every later write, until the file is opened again
    /// (feature `testing`, for tests that inject store failures).
    #[cfg(feature = "testing")]
    pub fn open_failing(
        path: impl AsRef<Path>,
        options: Options,
        fail: impl Fn() -> std::io::Result<()> + Send + 'static,
    ) -> Result<Self, Error> {
        RedbState::open_with(path.as_ref(), options, |db, cipher| RedbStore::start_failing(db, cipher, fail))
    }

    /// Opens the file at `path` and starts its store with `start`.
    fn open_with(
        path: &Path,
        options: Options,
        start: impl FnOnce(Database, Option<Cipher>) -> Result<RedbStore, Error>,
    ) -> Result<Self, Error> {
        let path = path.to_path_buf();
        create_private(&path).map_err(|err| Error::Io(Arc::new(err)))?;
        let refuse = options.require_private_files;
        if let Err(source) = crate::files::check_private(&path) {
            match refuse {
                true => return Err(Error::NotPrivate { path, source }),
                false => tracing::warn!("the store {}: {source}", path.display()),
            }
        }
        let options = options.read_key_file()?;
        // redb trusts a file it wrote, and may panic on one damaged since;
        // a panic whose unwinding panics again (a lock poisoned on the way)
        // aborts the process, which no `catch_unwind` prevents. Checking
        // integrity at open verifies every page's checksum and rebuilds the
        // allocator state instead of trusting it, so a damaged file is an
        // error (redb's `Corrupted`) before anything writes to it.
        let db = guard(&path, || {
            redb::Builder::new().set_check_integrity_on_open(true).create(&path).map_err(|err| open_error(&path, err))
        })?;
        RedbState::start_with(db, path, options, start)
    }

    /// A state on an open database, which `path` names in errors.
    #[cfg(test)]
    fn start(db: Database, path: PathBuf, options: Options) -> Result<Self, Error> {
        RedbState::start_with(db, path, options, RedbStore::start)
    }

    fn start_with(
        db: Database,
        path: PathBuf,
        options: Options,
        start: impl FnOnce(Database, Option<Cipher>) -> Result<RedbStore, Error>,
    ) -> Result<Self, Error> {
        let cipher = options.encryption_key.as_ref().map(Cipher::new);
        let store = guard(&path, || {
            prepare(&db, &path, cipher.as_ref())?;
            start(db, cipher)
        })?;
        let store = Arc::new(store);
        let memory = MemoryState::with_store(options.history, Arc::clone(&store) as _).map_err(Error::Load)?;
        Ok(RedbState { memory: Arc::new(memory), store, path })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many redb transactions have committed since open: with concurrent
    /// writers, fewer than the writes, since writes share commits.
    pub fn commits(&self) -> u64 {
        self.store.commits()
    }

    /// Runs a write of the memory state where it may block until its commit.
    async fn write<T, F, Fut>(&self, write: F) -> cosi::Result<T>
    where
        F: FnOnce(Arc<MemoryState>) -> Fut + Send + 'static,
        Fut: Future<Output = cosi::Result<T>> + Send,
        T: Send + 'static,
    {
        let memory = Arc::clone(&self.memory);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let runtime = handle.clone();
                // The memory state's writes never wait for anything but the
                // store, so `block_on` only waits for the commit.
                handle
                    .spawn_blocking(move || runtime.block_on(write(memory)))
                    .await
                    .map_err(|err| cosi::Error::backend(Error::Io(Arc::new(std::io::Error::other(err)))))?
            }
            // Outside tokio, the caller's executor thread waits for the commit.
            Err(_) => write(memory).await,
        }
    }
}

impl Drop for RedbState {
    /// Commits what is queued and closes the file.
    fn drop(&mut self) {
        self.store.close();
    }
}

impl std::fmt::Debug for RedbState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbState").field("path", &self.path).finish_non_exhaustive()
    }
}

#[async_trait]
impl State for RedbState {
    async fn get_dynamic(&self, pointer: &Pointer) -> cosi::Result<DynamicResource> {
        self.memory.get_dynamic(pointer).await
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> cosi::Result<Vec<DynamicResource>> {
        self.memory.list_dynamic(kind, options).await
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> cosi::Result<DynamicResource> {
        self.write(move |memory| async move { memory.create_dynamic(resource, options).await }).await
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> cosi::Result<DynamicResource> {
        self.write(move |memory| async move { memory.update_dynamic(resource, options).await }).await
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> cosi::Result<()> {
        let pointer = pointer.clone();
        self.write(move |memory| async move { memory.destroy_dynamic(&pointer, options).await }).await
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> cosi::Result<Watch> {
        self.memory.watch_dynamic(pointer, options).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<Watch> {
        self.memory.watch_kind_dynamic(kind, options).await
    }

    fn in_process(&self) -> Option<&dyn InProcess> {
        // Reads are the memory state's own: they never touch the file. Its
        // writes wait for the file, so it hands them back to the methods
        // above; they reach memory once durable, and are observed then.
        self.memory.in_process()
    }
}

impl Options {
    /// The options with the key of `encryption_key_file` read into
    /// `encryption_key`, after the file's mode is checked.
    fn read_key_file(mut self) -> Result<Options, Error> {
        let Some(path) = self.encryption_key_file.take() else { return Ok(self) };
        if self.encryption_key.is_some() {
            return Err(Error::Encryption("both a key and a key file were given: give one".to_owned()));
        }
        if let Err(source) = crate::files::check_private(&path) {
            match self.require_private_files {
                true => return Err(Error::KeyFile { path, source: source.into() }),
                false => tracing::warn!("the encryption key file {}: {source}", path.display()),
            }
        }
        let key = EncryptionKey::from_file(&path).map_err(|source| Error::KeyFile { path, source })?;
        self.encryption_key = Some(key);
        Ok(self)
    }
}

/// Creates `path` empty with mode 0600 unless something is there already, so
/// that redb never creates it with the process umask.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;

    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

/// Runs `read`, which reads the file, turning a panic into an error: redb
/// may panic on a damaged file instead of returning an error, and a damaged
/// file must be an error like any other bad input.
fn guard<T>(path: &Path, read: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    catch_unwind(AssertUnwindSafe(read)).unwrap_or_else(|_| {
        Err(Error::NotAStore { path: path.to_path_buf(), reason: "the file is damaged (reading it failed)".to_owned() })
    })
}

fn open_error(path: &Path, err: redb::DatabaseError) -> Error {
    match err {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(reason)) => {
            Error::NotAStore { path: path.to_path_buf(), reason: format!("redb finds it corrupted: {reason}") }
        }
        redb::DatabaseError::Storage(redb::StorageError::Io(io)) if io.kind() == std::io::ErrorKind::InvalidData => {
            Error::NotAStore { path: path.to_path_buf(), reason: format!("it is not a redb file: {io}") }
        }
        other => Error::Redb(other.into()),
    }
}

/// Checks that the file is a store of this format with the given key, or makes a new file one.
fn prepare(db: &Database, path: &Path, cipher: Option<&Cipher>) -> Result<(), Error> {
    let not_a_store = |reason: &str| Error::NotAStore { path: path.to_path_buf(), reason: reason.to_owned() };
    let read = db.begin_read()?;
    let meta = match read.open_table(META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => {
            if read.list_tables()?.next().is_some() {
                return Err(not_a_store("it is a redb database of another program"));
            }
            drop(read);
            return initialize(db, cipher);
        }
        Err(err) => return Err(err.into()),
    };
    let format = match meta.get(FORMAT_KEY)?.map(|version| version.value().to_vec()).as_deref() {
        Some(&[version]) if version == FORMAT_VERSION || version == LEGACY_FORMAT_VERSION => version,
        Some(other) => return Err(not_a_store(&format!("unknown format version {other:?}"))),
        None => return Err(not_a_store("it has no format version")),
    };
    let check = meta.get(KEY_CHECK_KEY)?.map(|check| check.value().to_vec());
    let bound = match (check, cipher) {
        (None, None) => true,
        (None, Some(_)) => return Err(Error::NotEncrypted),
        (Some(_), None) => return Err(Error::KeyRequired),
        (Some(check), Some(cipher)) => check_key(cipher, &check, format, path)?,
    };
    drop(meta);
    drop(read);
    match (format, bound) {
        (LEGACY_FORMAT_VERSION, _) => migrate(db, cipher),
        (_, false) => bind_key_check(db, cipher),
        (_, true) => Ok(()),
    }
}

/// Opens the key check of a store whose format entry says `format`:
/// whether it is bound to that format (`false`: sealed before key checks
/// were bound to a format). Fails when the key is wrong, or when the check
/// is bound to another format than the entry says: the entry was changed.
fn check_key(cipher: &Cipher, check: &[u8], format: u8, path: &Path) -> Result<bool, Error> {
    let opens = |aad: &[u8]| cipher.open(check, aad).is_ok_and(|text| text == KEY_CHECK_TEXT);
    if opens(&key_check_aad(format)) {
        return Ok(true);
    }
    if opens(unbound_key_check_aad()) {
        return Ok(false);
    }
    for other in [FORMAT_VERSION, LEGACY_FORMAT_VERSION] {
        if other != format && opens(&key_check_aad(other)) {
            return Err(Error::FormatChanged { path: path.to_path_buf(), entry: format, checked: other });
        }
    }
    Err(Error::WrongKey)
}

/// The key check, sealed bound to the current format.
fn seal_key_check(cipher: &Cipher) -> Result<Vec<u8>, Error> {
    cipher.seal(KEY_CHECK_TEXT, &key_check_aad(FORMAT_VERSION))
}

/// Seals the key check of a format 2 store again, bound to its format.
fn bind_key_check(db: &Database, cipher: Option<&Cipher>) -> Result<(), Error> {
    let Some(cipher) = cipher else { return Ok(()) };
    let mut txn = db.begin_write()?;
    txn.set_quick_repair(true);
    txn.open_table(META)?.insert(KEY_CHECK_KEY, seal_key_check(cipher)?.as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Brings a format 1 store to format 2 in one transaction: its encrypted
/// records are rewritten so that each is authenticated whole (see
/// `format.rs`), and its key check is sealed again, bound to format 2.
fn migrate(db: &Database, cipher: Option<&Cipher>) -> Result<(), Error> {
    let mut txn = db.begin_write()?;
    txn.set_quick_repair(true);
    {
        let mut table = txn.open_table(RESOURCES)?;
        if let Some(cipher) = cipher {
            let mut records = Vec::new();
            for entry in table.iter()? {
                let (key, value) = entry?;
                let (namespace, r#type, id) = key.value();
                let resource = format::decode_legacy((namespace, r#type, id), value.value(), Some(cipher))?;
                records.push(((namespace.to_owned(), r#type.to_owned(), id.to_owned()), resource));
            }
            for ((namespace, r#type, id), resource) in records {
                let record = format::encode(&resource, Some(cipher))?;
                table.insert((namespace.as_str(), r#type.as_str(), id.as_str()), record.as_slice())?;
            }
        }
        let mut meta = txn.open_table(META)?;
        meta.insert(FORMAT_KEY, [FORMAT_VERSION].as_slice())?;
        if let Some(cipher) = cipher {
            meta.insert(KEY_CHECK_KEY, seal_key_check(cipher)?.as_slice())?;
        }
    }
    txn.commit()?;
    Ok(())
}

/// Writes the format version and, with a key, the key check into a new file.
fn initialize(db: &Database, cipher: Option<&Cipher>) -> Result<(), Error> {
    let mut txn = db.begin_write()?;
    txn.set_quick_repair(true);
    {
        let mut meta = txn.open_table(META)?;
        meta.insert(FORMAT_KEY, [FORMAT_VERSION].as_slice())?;
        if let Some(cipher) = cipher {
            meta.insert(KEY_CHECK_KEY, seal_key_check(cipher)?.as_slice())?;
        }
        txn.open_table(RESOURCES)?;
    }
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use cosi::prelude::*;
    use cosi::testing::resources::PathResource;
    use redb::StorageBackend;
    use redb::backends::InMemoryBackend;

    use super::*;

    /// A database in memory whose writes and flushes fail while `fail` is set.
    #[derive(Debug)]
    struct FailingBackend {
        inner: InMemoryBackend,
        fail: Arc<AtomicBool>,
    }

    impl FailingBackend {
        fn check(&self) -> std::io::Result<()> {
            match self.fail.load(Ordering::SeqCst) {
                true => Err(std::io::Error::other("injected I/O failure")),
                false => Ok(()),
            }
        }
    }

    impl StorageBackend for FailingBackend {
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }

        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.inner.read(offset, out)
        }

        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.check()?;
            self.inner.set_len(len)
        }

        fn sync_data(&self) -> std::io::Result<()> {
            self.check()?;
            self.inner.sync_data()
        }

        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.check()?;
            self.inner.write(offset, data)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_commit_changes_nothing_and_stops_writes() {
        let fail = Arc::new(AtomicBool::new(false));
        let backend = FailingBackend { inner: InMemoryBackend::new(), fail: Arc::clone(&fail) };
        let db = redb::Builder::new().create_with_backend(backend).expect("database");
        let state = RedbState::start(db, PathBuf::from("failing"), Options::default()).expect("state");

        let first = state.create(Typed::new("first", PathResource::default()), CreateOptions::default()).await;
        let first = first.expect("a write before the failure");
        let mut watch =
            state.watch_kind_dynamic(&PathResource::kind(), WatchKindOptions::default()).await.expect("watch");

        fail.store(true, Ordering::SeqCst);
        let err = state
            .create(Typed::new("second", PathResource::default()), CreateOptions::default())
            .await
            .expect_err("a write whose commit fails");
        assert!(matches!(err, cosi::Error::Backend(_)), "{err:?}");
        assert!(err.to_string().contains("injected I/O failure"), "{err}");
        let missing = state.get_dynamic(&PathResource::pointer("second")).await.expect_err("not in memory");
        assert!(missing.is_not_found(), "{missing:?}");

        // The store stays closed to writes, even once the disk works again.
        fail.store(false, Ordering::SeqCst);
        let err = state.update(first, UpdateOptions::default()).await.expect_err("a write after the failure");
        assert!(err.to_string().contains("reopen"), "{err}");
        let stored = state.get_dynamic(&PathResource::pointer("first")).await.expect("first");
        assert_eq!(stored.metadata().version(), Version::new(1));

        let nothing = tokio::time::timeout(std::time::Duration::from_millis(50), watch.recv()).await;
        assert!(nothing.is_err(), "a failed write published {nothing:?}");
    }

    /// A database in memory, shared so that it can be reopened.
    #[derive(Debug, Clone)]
    struct Shared(Arc<InMemoryBackend>);

    impl StorageBackend for Shared {
        fn len(&self) -> std::io::Result<u64> {
            self.0.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.0.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.0.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.0.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.0.write(offset, data)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_format_1_store_is_migrated_at_open() {
        let key = EncryptionKey::new([9; 32]);
        let cipher = Cipher::new(&key);
        let backend = Shared(Arc::new(InMemoryBackend::new()));
        let resource = DynamicResource::from(Typed::new("old", PathResource { value: "kept".into() }));
        let pointer = resource.metadata().pointer().clone();
        {
            // The file as format 1 left it.
            let db = redb::Builder::new().create_with_backend(backend.clone()).expect("database");
            let txn = db.begin_write().expect("write");
            {
                let mut meta = txn.open_table(META).expect("meta");
                meta.insert(FORMAT_KEY, [LEGACY_FORMAT_VERSION].as_slice()).expect("format");
                let check = cipher.seal(KEY_CHECK_TEXT, KEY_CHECK_KEY.as_bytes()).expect("seal");
                meta.insert(KEY_CHECK_KEY, check.as_slice()).expect("check");
                let mut resources = txn.open_table(RESOURCES).expect("resources");
                let record = format::encode_legacy(&resource, &cipher);
                resources
                    .insert((pointer.namespace(), pointer.r#type(), pointer.id()), record.as_slice())
                    .expect("record");
            }
            txn.commit().expect("commit");
        }

        let db = redb::Builder::new().create_with_backend(backend.clone()).expect("database");
        let state = RedbState::start(db, PathBuf::from("legacy"), Options::default().encryption_key(key.clone()))
            .expect("a format 1 store opens");
        let read: Typed<PathResource> = state.get(&pointer).await.expect("the record reads back");
        assert_eq!(read.value, "kept");
        drop(state);

        let db = redb::Builder::new().create_with_backend(backend).expect("database");
        let txn = db.begin_read().expect("read");
        let meta = txn.open_table(META).expect("meta");
        assert_eq!(meta.get(FORMAT_KEY).expect("get").expect("format").value(), [FORMAT_VERSION]);
        let check = meta.get(KEY_CHECK_KEY).expect("get").expect("key check");
        let opened = cipher.open(check.value(), &key_check_aad(FORMAT_VERSION));
        assert_eq!(opened.expect("the key check is bound to format 2"), KEY_CHECK_TEXT);
        let resources = txn.open_table(RESOURCES).expect("resources");
        let record =
            resources.get((pointer.namespace(), pointer.r#type(), pointer.id())).expect("get").expect("record");
        assert_eq!(record.value()[0], 2, "the record was rewritten in format 2");
        let decoded =
            format::decode((pointer.namespace(), pointer.r#type(), pointer.id()), record.value(), Some(&cipher));
        assert_eq!(decoded.expect("decodes").metadata(), resource.metadata());
    }

    /// A format 2 store whose key check predates binding it to the format
    /// opens, and its key check is bound then: the format entry set back to
    /// 1 afterwards is refused.
    #[test]
    fn an_unbound_key_check_of_format_2_is_bound_at_open() {
        let key = EncryptionKey::new([3; 32]);
        let cipher = Cipher::new(&key);
        let backend = Shared(Arc::new(InMemoryBackend::new()));
        let write_meta = |format: u8, check: Option<Vec<u8>>| {
            let db = redb::Builder::new().create_with_backend(backend.clone()).expect("database");
            let txn = db.begin_write().expect("write");
            {
                let mut meta = txn.open_table(META).expect("meta");
                meta.insert(FORMAT_KEY, [format].as_slice()).expect("format");
                if let Some(check) = check {
                    meta.insert(KEY_CHECK_KEY, check.as_slice()).expect("check");
                }
                txn.open_table(RESOURCES).expect("resources");
            }
            txn.commit().expect("commit");
        };
        let open = || {
            let db = redb::Builder::new().create_with_backend(backend.clone()).expect("database");
            RedbState::start(db, PathBuf::from("unbound"), Options::default().encryption_key(key.clone()))
        };
        let unbound = cipher.seal(KEY_CHECK_TEXT, unbound_key_check_aad()).expect("seal");
        write_meta(FORMAT_VERSION, Some(unbound));
        drop(open().expect("a format 2 store with an unbound key check opens"));

        let db = redb::Builder::new().create_with_backend(backend.clone()).expect("database");
        let check = {
            let txn = db.begin_read().expect("read");
            let meta = txn.open_table(META).expect("meta");
            meta.get(KEY_CHECK_KEY).expect("get").expect("key check").value().to_vec()
        };
        drop(db);
        let opened = cipher.open(&check, &key_check_aad(FORMAT_VERSION));
        assert_eq!(opened.expect("the key check is bound to format 2 now"), KEY_CHECK_TEXT);

        write_meta(LEGACY_FORMAT_VERSION, None);
        let refused = open().expect_err("the format entry set back to 1");
        assert!(matches!(refused, Error::FormatChanged { entry: 1, checked: 2, .. }), "{refused:?}");
        let wrong = {
            let db = redb::Builder::new().create_with_backend(backend.clone()).expect("database");
            RedbState::start(db, PathBuf::from("unbound"), Options::default().encryption_key([4; 32]))
        };
        assert!(matches!(wrong, Err(Error::WrongKey)), "another key is a wrong key, not a changed format");
    }
}
