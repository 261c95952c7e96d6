//! A durable COSI [`State`] on [redb](https://www.redb.org), an embedded, pure-Rust, ACID store.
//!
//! ```no_run
//! use cosi::prelude::*;
//! use cosi_redb::{Options, RedbState};
//!
//! # async fn example() -> cosi::Result<()> {
//! let state = RedbState::open("/var/lib/example/state.redb", Options::default())?;
//! // Use it like any other state: `Arc<dyn State>`, a `NamespacedState` route...
//! let nodes = state.list_dynamic(&Kind::new("config", "Nodes.example.org"), &ListOptions::default()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What it promises
//!
//! - **Write-through.** A create, update or destroy returns only after the
//!   change is committed to the file with redb's `Durability::Immediate`
//!   (fsync), so an acknowledged write survives `kill -9` and power loss.
//! - **Group commit.** Concurrent writes share commits: one redb
//!   transaction, one set of fsyncs for all of them, whether they write to
//!   one (namespace, type) or to many.
//! - **Watches and history as in memory.** Reads, lists and watches are
//!   served by a [`MemoryState`] that holds everything; the file is read once,
//!   at open. The history starts empty at each open and every collection gets
//!   a fresh bookmark cookie, so a bookmark from before a restart is rejected
//!   with [`Error::InvalidBookmark`](cosi::Error::InvalidBookmark), never misread.
//! - **Encryption at rest** of specs, AES-256-GCM with a key the caller
//!   supplies ([`Options::encryption_key`]). Metadata stays readable but is
//!   authenticated: each record is sealed whole (metadata, version, spec), so
//!   an edited record, or an older spec put back under newer metadata, fails
//!   to open. The key is wiped from memory when it is dropped.
//! - **Bad files are errors.** A foreign, damaged or wrong-key file fails
//!   [`RedbState::open`] with a [`Error`] that says so; it never panics.
//!   redb trusts a file it wrote, so open has it check the file's integrity
//!   first (every page's checksum, the allocator state rebuilt): a panic
//!   whose unwinding panics again aborts the process, past any
//!   `catch_unwind`. A panic that still comes is caught (at open, at each
//!   commit, at close) and becomes an error or a log line; redb keeps no
//!   process-wide state a caught panic could leave broken. The fuzz target
//!   `redb_file` feeds it damaged files.
//! - **Private files.** A new store file is made 0600. A store file or key
//!   file that group or others may read or write is opened with a warning,
//!   or refused with [`Options::require_private_files`] ([`check_private`]).
//!
//! # Design
//!
//! Go COSI makes its bolt store an in-memory state with a backing store:
//! `Put`/`Destroy` write through to the file before the in-memory change,
//! and a lazy load replays the stored resources. This crate does the same on
//! `cosi`'s [`MemoryState`] through its [`BackingStore`](cosi::state::BackingStore)
//! hook, so the history ring, bookmarks, watches and every rule of the
//! conformance suite are the in-memory backend's own, not a second copy.
//!
//! Each (namespace, type) hands its writes to the hook in batches:
//!
//! 1. one writer of the collection (the leader) takes every write waiting
//!    for it, checks each against the stored resources plus the batch's
//!    earlier writes, and hands the batch to the store;
//! 2. the store encodes the records (and encrypts the specs) and queues them
//!    at once; one committer thread takes everything queued, from every
//!    collection, writes it in one redb transaction and commits it durably;
//! 3. then the leader applies the batch to memory in order and publishes its
//!    events, and the writers of the batch return. Writes that arrived
//!    meanwhile form the next batch.
//!
//! So the history of a collection is in the order its writes became durable,
//! and a write that fails to persist returns an error and leaves memory
//! untouched. A batch the store refuses is retried one write at a time, so
//! a write that cannot be stored (a spec with no YAML form) fails alone.
//! Since a writer blocks while it waits for its commit, writes run on tokio's
//! blocking pool (`spawn_blocking`), never on the runtime's workers.
//!
//! After a commit fails (an I/O error, a full disk), the store accepts no
//! more writes and every write returns that error: redb asks for a reopen
//! after an I/O error, and no write is acknowledged that might not be durable.
//!
//! Every commit saves redb's allocator state (redb's "quick repair", with a
//! two-phase commit), so opening after a crash needs no repair pass over the
//! whole file.
//!
//! # Stored format
//!
//! Two tables: `cosi.meta` (format version, encryption key check) and
//! `cosi.resources`, keyed by `(namespace, type, ID)`. A record is the
//! metadata as JSON followed by the spec: an encoded spec
//! ([`EncodedSpec`](cosi::resource::EncodedSpec)) byte for byte, a typed spec
//! as its YAML.
//! After a reopen a typed spec is an encoded one holding that YAML, which
//! typed reads ([`StateExt::get`](cosi::StateExt::get), `Typed::try_from`)
//! decode, each time, until the resource is written again (then its spec is
//! the written Rust value, shared by reads as in memory). With encryption, a
//! spec is stored as `0x01 || 12-byte nonce || ciphertext` (Go COSI's
//! layout), bound to its record's key and clear header (record format 2; a
//! store of format 1 is rewritten at open). The key check in `cosi.meta`
//! authenticates the format entry too, so an encrypted store whose entry was
//! set back to 1 is refused ([`Error::FormatChanged`]) rather than migrated.
//! `format.rs` has the byte layout.
//!
//! # Using it
//!
//! - One process at a time: redb locks the file, and a second open (in this
//!   process or another) fails with an error saying it is already open.
//! - Dropping the `RedbState` commits what is queued and closes the file;
//!   watches still open then get no new events.
//! - Everything is in memory as well as on disk: the store is for the state
//!   of a machine (configuration, a few hundred thousand resources), not for bulk data.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod crypto;
mod files;
mod format;
mod state;
mod store;

use std::path::PathBuf;
use std::sync::Arc;

pub use crypto::EncryptionKey;
pub use files::{KeyFileError, NotPrivate, check_private};

/// Not API: the record codec, for the fuzz targets of the workspace's `fuzz/`.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use cosi::DynamicResource;

    use crate::crypto::Cipher;
    use crate::{EncryptionKey, Error};

    /// The record of `resource`, as the store writes it.
    pub fn encode_record(resource: &DynamicResource, key: Option<&EncryptionKey>) -> Result<Vec<u8>, Error> {
        crate::format::encode(resource, key.map(Cipher::new).as_ref())
    }

    /// The resource a record under `key` holds, as the store reads it at open.
    pub fn decode_record(
        record_key: (&str, &str, &str),
        record: &[u8],
        key: Option<&EncryptionKey>,
    ) -> Result<DynamicResource, Error> {
        crate::format::decode(record_key, record, key.map(Cipher::new).as_ref())
    }

    /// As [`decode_record`], accepting format 1 records as a migration does.
    pub fn decode_legacy_record(
        record_key: (&str, &str, &str),
        record: &[u8],
        key: Option<&EncryptionKey>,
    ) -> Result<DynamicResource, Error> {
        crate::format::decode_legacy(record_key, record, key.map(Cipher::new).as_ref())
    }
}
pub use state::{Options, RedbState};

#[doc(no_inline)]
pub use cosi::State;
#[doc(no_inline)]
pub use cosi::state::MemoryState;

/// Why a store cannot be opened or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// redb failed: the file cannot be opened, read or written.
    #[error("redb: {0}")]
    Redb(#[from] redb::Error),

    /// The file is not a store of this crate, or of a format this version cannot read.
    #[error("{path} is not a cosi-redb store: {reason}")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A stored record cannot be read.
    #[error("stored record {record} is corrupt: {reason}")]
    Corrupt {
        /// The record's key, `type(namespace/id)`.
        record: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A resource cannot be written, for example a typed spec that has no YAML form.
    #[error("cannot store {pointer}: {reason}")]
    Encode {
        /// The resource.
        pointer: String,
        /// Why.
        reason: String,
    },

    /// A spec cannot be encrypted or decrypted, or the key is malformed.
    #[error("encryption: {0}")]
    Encryption(String),

    /// The store's specs are encrypted and no key was given.
    #[error("the store's specs are encrypted: open it with its key")]
    KeyRequired,

    /// A key was given for a store created without encryption.
    #[error("the store was created without encryption: open it without a key")]
    NotEncrypted,

    /// Group or others may read or write the store file, and the options
    /// refuse that ([`Options::require_private_files`]).
    #[error("{path}: {source}")]
    NotPrivate {
        /// The file.
        path: PathBuf,
        /// Its mode, or why it cannot be read.
        source: NotPrivate,
    },

    /// The key file gives no key, or is not private and the options refuse that.
    #[error("cannot use the encryption key file {path}: {source}")]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: KeyFileError,
    },

    /// The store's format entry is not the format its key check was sealed
    /// for: it was changed (set back to 1, say, which would let records
    /// sealed without their metadata in), so the store is not opened.
    #[error(
        "{path}: its format entry says {entry}, but its key check was written for format {checked}: the entry \
         was changed, so the store is not opened"
    )]
    FormatChanged {
        /// The file.
        path: PathBuf,
        /// What the format entry says.
        entry: u8,
        /// The format the key check authenticates.
        checked: u8,
    },

    /// The key is not the one the store was created with.
    #[error("wrong encryption key: it does not open the store's key check")]
    WrongKey,

    /// A commit failed earlier; the store accepts no more writes until it is reopened.
    #[error("a commit failed, the store accepts no more writes; reopen it: {0}")]
    Failed(Box<redb::Error>),

    /// The store was closed.
    #[error("the store is closed")]
    Closed,

    /// The stored resources cannot be loaded into the state.
    #[error("cannot load the stored resources: {0}")]
    Load(#[source] cosi::Error),

    /// An I/O error outside redb.
    #[error("I/O: {0}")]
    Io(#[source] Arc<std::io::Error>),
}

/// As a [`cosi::Error::Other`], for `?` in a
/// function returning `cosi::Result`.
impl From<Error> for cosi::Error {
    fn from(error: Error) -> Self {
        cosi::Error::other(error)
    }
}

macro_rules! from_redb {
    ($($error:ty),*) => {$(
        impl From<$error> for Error {
            fn from(err: $error) -> Self {
                Error::Redb(redb::Error::from(err))
            }
        }
    )*};
}

from_redb!(redb::DatabaseError, redb::TransactionError, redb::TableError, redb::StorageError, redb::CommitError);
