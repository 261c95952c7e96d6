//! The backing store: redb behind one committer thread that commits concurrent writes together.
//!
//! Writers encode their record, append it to a queue and wait. The committer
//! takes everything queued, writes it in one redb transaction (in queue
//! order) and commits it durably; then every writer of that batch returns.
//! While it commits, the next batch gathers, so under load one commit (and
//! its fsyncs) serves many writes, and an idle store commits a single write
//! at once, without waiting for company.
//!
//! Invariants:
//!
//! - A writer returns `Ok` only after the transaction holding its write has
//!   committed with `Durability::Immediate`.
//! - A batch from the memory state is queued at once, so it lands in one
//!   transaction, in order: all of it is durable or none. The memory state
//!   hands over a collection's next batch only after the previous one is
//!   durable, so the history order is the durable order.
//! - After a failed commit the store refuses every later write (redb asks for
//!   a reopen after an I/O error): no write is acknowledged that might not be
//!   durable, and memory never moves ahead of the file. Writes queued while
//!   the failing commit ran fail with it and are dropped, and the committer
//!   stops: nothing whose writer was told it failed is ever committed.

use std::sync::Arc;
use std::thread::JoinHandle;

use cosi::state::{BackingStore, StoreWrite};
use cosi::{DynamicResource, Pointer};
use parking_lot::{Condvar, Mutex};
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use crate::Error;
use crate::crypto::Cipher;
use crate::format::{self, RESOURCES};

/// One queued write.
enum Op {
    Put { key: Pointer, record: Vec<u8> },
    Delete { key: Pointer },
}

#[derive(Default)]
struct Queue {
    ops: Vec<Op>,
    /// The sequence number of the last queued write; numbers start at 1.
    queued: u64,
    /// Every write up to this number is durable.
    durable: u64,
    /// How many transactions have committed since open.
    commits: u64,
    /// Why the store stopped accepting writes.
    failed: Option<Arc<Error>>,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the committer when there is work.
    work: Condvar,
    /// Wakes writers when a batch is done.
    done: Condvar,
}

/// The redb file as a [`BackingStore`].
pub(crate) struct RedbStore {
    shared: Arc<Shared>,
    cipher: Option<Arc<Cipher>>,
    /// What the file held at open, until the memory state takes it.
    loaded: Mutex<Vec<DynamicResource>>,
    committer: Mutex<Option<JoinHandle<()>>>,
}

impl RedbStore {
    /// Reads everything stored, then hands the database to a committer thread.
    pub(crate) fn start(db: Database, cipher: Option<Cipher>) -> Result<Self, Error> {
        RedbStore::start_with(db, cipher, commit)
    }

    /// [`RedbStore::start`], with `fail` asked before each commit (see
    /// `RedbState::open_failing`).
    #[cfg(feature = "testing")]
    pub(crate) fn start_failing(
        db: Database,
        cipher: Option<Cipher>,
        fail: impl Fn() -> std::io::Result<()> + Send + 'static,
    ) -> Result<Self, Error> {
        RedbStore::start_with(db, cipher, move |db: &Database, ops: &[Op]| {
            fail().map_err(redb::Error::Io)?;
            commit(db, ops)
        })
    }

    /// [`RedbStore::start`] with the function that commits a batch: tests
    /// inject failures through it.
    fn start_with(
        db: Database,
        cipher: Option<Cipher>,
        commit: impl Fn(&Database, &[Op]) -> Result<(), redb::Error> + Send + 'static,
    ) -> Result<Self, Error> {
        let loaded = read_all(&db, cipher.as_ref())?;
        let shared =
            Arc::new(Shared { queue: Mutex::new(Queue::default()), work: Condvar::new(), done: Condvar::new() });
        let committer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("cosi-redb-commit".to_owned())
                .spawn(move || {
                    commit_loop(&shared, &db, commit);
                    // Closing writes the allocator state; a panic there is
                    // redb's, and the next open checks the file anyway.
                    let closed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(db)));
                    if closed.is_err() {
                        tracing::error!("redb panicked while closing the store file; the next open checks it");
                    }
                })
                .map_err(|err| Error::Io(Arc::new(err)))?
        };
        Ok(RedbStore {
            shared,
            cipher: cipher.map(Arc::new),
            loaded: Mutex::new(loaded),
            committer: Mutex::new(Some(committer)),
        })
    }

    /// Queues `ops`, together, and waits until they are durable.
    fn submit(&self, ops: Vec<Op>) -> cosi::Result<()> {
        let mut queue = self.shared.queue.lock();
        if let Some(failed) = &queue.failed {
            return Err(cosi::Error::Backend(Arc::clone(failed) as _));
        }
        if queue.closed {
            return Err(cosi::Error::backend(Error::Closed));
        }
        queue.queued += ops.len() as u64;
        queue.ops.extend(ops);
        let seq = queue.queued;
        self.shared.work.notify_one();
        loop {
            if queue.durable >= seq {
                return Ok(());
            }
            if let Some(failed) = &queue.failed {
                return Err(cosi::Error::Backend(Arc::clone(failed) as _));
            }
            self.shared.done.wait(&mut queue);
        }
    }

    /// How many transactions have committed since open.
    pub(crate) fn commits(&self) -> u64 {
        self.shared.queue.lock().commits
    }

    /// Stops the committer after it has committed what is queued.
    pub(crate) fn close(&self) {
        self.shared.queue.lock().closed = true;
        self.shared.work.notify_all();
        if let Some(committer) = self.committer.lock().take() {
            // The committer catches redb's panics, so joining it cannot fail.
            let _ = committer.join();
        }
    }
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        self.close();
    }
}

impl BackingStore for RedbStore {
    /// What the file held at open; read there, so that its errors are open errors.
    fn load(&self) -> cosi::Result<Vec<DynamicResource>> {
        Ok(std::mem::take(&mut *self.loaded.lock()))
    }

    fn write(&self, batch: &[StoreWrite<'_>]) -> cosi::Result<()> {
        // Encoding happens here, on the writer's thread, so that a spec that
        // cannot be written fails its own batch and nobody else's.
        let ops = batch
            .iter()
            .map(|write| match write {
                StoreWrite::Put(resource) => format::encode(resource, self.cipher.as_deref())
                    .map(|record| Op::Put { key: resource.metadata().pointer().clone(), record })
                    .map_err(cosi::Error::backend),
                StoreWrite::Destroy(pointer) => Ok(Op::Delete { key: Pointer::clone(pointer) }),
            })
            .collect::<cosi::Result<Vec<_>>>()?;
        self.submit(ops)
    }
}

/// Every stored resource, decoded.
fn read_all(db: &Database, cipher: Option<&Cipher>) -> Result<Vec<DynamicResource>, Error> {
    let read = db.begin_read().map_err(redb::Error::from)?;
    let table = match read.open_table(RESOURCES) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(err) => return Err(redb::Error::from(err).into()),
    };
    // The count is the file's word, not checked against what it holds: a
    // damaged file must not size an allocation (one that fails aborts).
    let stated = table.len().map_err(redb::Error::from)?;
    let mut resources = Vec::with_capacity(usize::try_from(stated.min(1 << 16)).unwrap_or(0));
    for entry in table.iter().map_err(redb::Error::from)? {
        let (key, value) = entry.map_err(redb::Error::from)?;
        resources.push(format::decode(key.value(), value.value(), cipher)?);
    }
    Ok(resources)
}

fn commit_loop(shared: &Shared, db: &Database, commit: impl Fn(&Database, &[Op]) -> Result<(), redb::Error>) {
    loop {
        let (ops, last) = {
            let mut queue = shared.queue.lock();
            while queue.ops.is_empty() && !queue.closed {
                shared.work.wait(&mut queue);
            }
            if queue.ops.is_empty() {
                return;
            }
            (std::mem::take(&mut queue.ops), queue.queued)
        };
        // A panic inside redb must fail the batch's writers, not leave them waiting.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit(db, &ops)))
            .unwrap_or_else(|_| Err(redb::Error::Corrupted("redb panicked while committing".to_owned())));
        let mut queue = shared.queue.lock();
        match result {
            Ok(()) => {
                queue.durable = last;
                queue.commits += 1;
                shared.done.notify_all();
            }
            Err(err) => {
                // Every write queued meanwhile was waiting on this store too:
                // each of them fails now (their writers see `failed`), and
                // none is ever committed, since the committer stops here.
                queue.failed = Some(Arc::new(Error::Failed(Box::new(err))));
                queue.ops.clear();
                shared.done.notify_all();
                return;
            }
        }
    }
}

/// Writes one batch in one durable transaction.
fn commit(db: &Database, ops: &[Op]) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    // The allocator state is saved with each commit (with a two-phase commit),
    // so that opening after a crash needs no repair pass over the whole file.
    txn.set_quick_repair(true);
    {
        let mut table = txn.open_table(RESOURCES)?;
        for op in ops {
            match op {
                Op::Put { key, record } => {
                    table.insert((key.namespace(), key.r#type(), key.id()), record.as_slice())?;
                }
                Op::Delete { key } => {
                    table.remove((key.namespace(), key.r#type(), key.id()))?;
                }
            }
        }
    }
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::time::Duration;

    use cosi::Metadata;
    use redb::StorageBackend;
    use redb::backends::InMemoryBackend;

    use super::*;

    const WORKING: u8 = 0;
    /// The next commit is held until released, then fails without touching
    /// the file; later commits work.
    const HOLD_THEN_FAIL: u8 = 1;

    /// A commit function whose next call can be held and failed.
    #[derive(Clone)]
    struct Injector {
        mode: Arc<AtomicU8>,
        /// Set while a commit is held; cleared to release it.
        held: Arc<(Mutex<bool>, Condvar)>,
    }

    impl Injector {
        fn commit(&self, db: &Database, ops: &[Op]) -> Result<(), redb::Error> {
            if self.mode.compare_exchange(HOLD_THEN_FAIL, WORKING, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                return commit(db, ops);
            }
            let (held, changed) = &*self.held;
            let mut held = held.lock();
            *held = true;
            changed.notify_all();
            while *held {
                changed.wait(&mut held);
            }
            Err(redb::Error::Io(std::io::Error::other("injected commit failure")))
        }

        fn wait_held(&self) {
            let (held, changed) = &*self.held;
            let mut held = held.lock();
            while !*held {
                changed.wait(&mut held);
            }
        }

        fn release(&self) {
            let (held, changed) = &*self.held;
            *held.lock() = false;
            changed.notify_all();
        }
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

    fn resource(id: &str) -> DynamicResource {
        DynamicResource::without_spec(Metadata::new("ns", "Things.test.cosi.dev", id))
    }

    fn stored_ids(backend: Shared) -> Vec<String> {
        let db = redb::Builder::new().create_with_backend(backend).expect("reopen");
        read_all(&db, None).expect("read").into_iter().map(|resource| resource.metadata().id().to_owned()).collect()
    }

    #[test]
    fn writes_queued_with_a_failed_commit_fail_and_are_never_committed() {
        let backend = Shared(Arc::new(InMemoryBackend::new()));
        let injector =
            Injector { mode: Arc::new(AtomicU8::new(WORKING)), held: Arc::new((Mutex::new(false), Condvar::new())) };
        let db = redb::Builder::new().create_with_backend(backend.clone()).expect("database");
        let commits = injector.clone();
        let store = RedbStore::start_with(db, None, move |db: &Database, ops: &[Op]| commits.commit(db, ops));
        let store = Arc::new(store.expect("store"));
        store.write(&[StoreWrite::Put(&resource("before"))]).expect("a write before the failure");
        let commits = store.commits();

        // The commit of `first` is held while `second` queues behind it.
        injector.mode.store(HOLD_THEN_FAIL, Ordering::SeqCst);
        let writer = |id: &'static str| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || store.write(&[StoreWrite::Put(&resource(id))]))
        };
        let first = writer("first");
        injector.wait_held();
        let second = writer("second");
        while store.shared.queue.lock().queued < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The held commit fails; committing works again from now on.
        injector.release();
        let first = first.join().expect("first writer");
        let second = second.join().expect("second writer");
        assert!(first.is_err(), "the failed commit's own write must fail");
        assert!(second.is_err(), "a write queued with the failed commit must fail, got {second:?}");

        // Give a committer that kept the queue every chance to commit it.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(store.commits(), commits, "nothing was committed after the failure");
        let later = store.write(&[StoreWrite::Put(&resource("later"))]);
        assert!(later.is_err(), "the store refuses writes after a failed commit");
        store.close();
        drop(store);
        assert_eq!(stored_ids(backend), ["before"], "only what was acknowledged is stored");
    }
}
