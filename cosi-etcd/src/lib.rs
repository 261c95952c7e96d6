//! A COSI [`State`](cosi::State) kept in etcd, shared by every process and
//! machine connected to the same cluster, and a leader election on etcd leases.
//!
//! ```no_run
//! use cosi::prelude::*;
//! use cosi_etcd::{EtcdState, Options};
//!
//! # async fn example() -> cosi::Result<()> {
//! let state = EtcdState::connect(&["http://127.0.0.1:2379"], Options::prefix("/my-control-plane")).await?;
//! let resources = state.list_dynamic(&Kind::new("default", "Things.example.org"), &ListOptions::default()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Connecting
//!
//! [`EtcdState::connect`] takes `http://` endpoints, or `https://` ones with
//! [`Options::tls`]: the CA that signed etcd's certificate, and a client
//! certificate when etcd requires one (`--client-cert-auth`). With
//! [`Options::credentials`] it authenticates as an etcd user and sends the
//! token with every call; when etcd drops the token (it expired, the password
//! changed) the call authenticates again, once, and is retried. Credentials
//! are refused over `http://` unless every endpoint is on loopback: the
//! password would cross the network in plaintext. A failed call
//! is an [`Error::Backend`](cosi::Error::Backend) holding an [`EtcdError`],
//! which keeps etcd's gRPC status.
//!
//! ```no_run
//! use cosi_etcd::{ClientCertificate, Credentials, EtcdState, Options, Tls};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let read = std::fs::read_to_string;
//! let tls = Tls {
//!     server_ca: read("/etc/cosi/etcd-ca.pem")?,
//!     client: Some(ClientCertificate { certificate: read("/etc/cosi/client.pem")?, key: read("/etc/cosi/client-key.pem")? }),
//!     server_name: None,
//! };
//! let credentials = Credentials { user: "cosi".into(), password: std::env::var("COSI_ETCD_PASSWORD")? };
//! let options = Options { tls: Some(tls), credentials: Some(credentials), ..Options::prefix("/my-control-plane") };
//! let state = EtcdState::connect(&["https://127.0.0.1:2379"], options).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The crate speaks etcd's v3 gRPC API through bindings of its own, generated
//! at build time from the `.proto` files in its `proto/` directory by protox
//! (a protobuf compiler written in Rust) and tonic, as `cosi-grpc` does, so
//! building it needs no system `protoc`. The `etcd-client` crate, which it
//! used before, runs `protoc` in its build script with no way to skip it, and
//! the other etcd crates either do the same or bring a second gRPC stack.
//! Messages are bounded (64 MiB either way): listings are read in pages at one
//! revision, and watches ask etcd to split large responses.
//!
//! # The rules, across processes
//!
//! Every write is one etcd transaction whose comparison is the key's
//! `mod_revision` at the time the checks (existence, owner, version, phase,
//! finalizers) were made. When another process wrote in between, the
//! transaction fails, returns the value stored now, and the checks run again
//! against it: two processes racing on one resource never both succeed, no
//! update is lost, and nobody writes through another controller's ownership.
//! A create compares `create_revision` with 0, so exactly one of two racing
//! creates succeeds.
//!
//! # Stored format
//!
//! - Resource `(namespace, type, id)` lives at `<prefix>/<namespace>/<type>/<id>`,
//!   with `%` and `/` in the namespace and type percent-escaped (`%25`, `%2F`),
//!   so no kind's keys fall in another kind's range. A list is a range read at
//!   one revision (in pages when it is large), sorted by ID byte-wise like etcd's keys.
//! - The kind key `<prefix>/<namespace>/<type>/` (an empty ID, which no
//!   resource can have) holds nothing; every change of the kind rewrites it in
//!   the same transaction, so its `mod_revision` is the kind's last event.
//!   Watches with tail events use it to know where the history ends.
//! - A value is a protobuf message: `1: format` (always 1), `2: metadata` (the
//!   serde JSON of [`Metadata`](cosi::Metadata)), `3: spec proto bytes`
//!   (optional), `4: spec YAML text` (optional). An encoded spec keeps its proto
//!   bytes and YAML exactly; a typed spec is stored as its `serde_yaml_ng`
//!   rendering and reads back as an encoded spec with that YAML, which typed
//!   reads (`get::<T>`, `Typed::try_from`) decode. A value that is not in this
//!   format, or names another resource than its key (a foreign value), is
//!   left out of lists, bootstrap listings and watches with a logged warning,
//!   so that one stray key does not make every list of its kind fail; a read
//!   of its own key (`get`, a single-resource watch, an update or destroy of
//!   it) is an [`Error::Backend`](cosi::Error::Backend) holding a
//!   [`DecodeError`] that says which key holds it. In a watch, a resource
//!   replaced by a foreign value is destroyed, and a foreign value replaced
//!   by a resource is created. Nothing panics.
//! - `create` and `update` return the resource as written (a typed spec stays
//!   the caller's typed value, shared); `get`, `list` and watches return what
//!   etcd holds, with specs in encoded form.
//! - Leader elections live at `<prefix>!election/<name>`, outside every kind's range.
//!
//! # Watches
//!
//! Positions are etcd revisions: an event's bookmark is the revision that
//! wrote it (with a hash of its kind and a checksum), and a watch resumes
//! after it by watching from the next revision. A bookmark of a revision etcd
//! has compacted (or not reached) is rejected with
//! [`Error::InvalidBookmark`](cosi::Error::InvalidBookmark) when the watch is
//! set up. Bookmarks stay valid across processes and etcd restarts. A watch
//! whose etcd stream breaks reopens it from the revision after the last event
//! it delivered, so a dropped connection loses and repeats nothing. Tail
//! events replay the kind's history that etcd kept (since its last
//! compaction), reading it from the kind's first event on. etcd no longer has
//! the value before an event at its compaction revision: such an update
//! still reads as `Updated` (the key's version says it existed), with a
//! tombstone as its old resource, and a resource replaced there by a foreign
//! value as `Destroyed` without its last state. A watcher more than
//! [`Options::watch_buffer`] events behind gets one `Errored` (`BufferOverrun`)
//! and its watch ends; writers never wait for watchers.
//!
//! A broken stream is reopened with a backoff, each failed attempt logged,
//! for at most [`Options::watch_reconnect_timeout`] (60 s): then the reader
//! gets one `Errored` holding a [`WatchLost`] and the watch ends. A response
//! the client can never receive (an event larger than the 64 MiB message
//! limit, which etcd allows only with a `--max-request-bytes` above 32 MiB)
//! ends the watch at once with an `Errored` that says so, since reopening
//! would receive it again.
//!
//! # Leader election
//!
//! [`EtcdState::election`] gives a [`LeaderElection`]; its
//! [`campaign`](LeaderElection::campaign) resolves with a [`Leadership`] once
//! this process leads, and [`Leadership::lost`] resolves if it stops leading.
//! [`LeaderElection::run`] runs a controller runtime only while this process
//! leads: replicas of a control plane share one etcd, one of them runs the
//! controllers, and when it dies another takes over within the lease's time
//! to live, carrying on from what is in etcd.
//!
//! # Controllers in several processes
//!
//! Runtimes in different processes on one etcd prefix cooperate through the
//! state as runtimes in one process do: each watches the kinds its
//! controllers read, so one process's outputs are another's inputs, and
//! finalizers hold a resource across processes. The runtime does not check
//! declarations across processes: two processes must not run controllers
//! that write the same outputs, unless only one runs at a time
//! ([`LeaderElection::run`]).
//!
//! # Testing
//!
//! The feature `testing` adds `testing::EtcdServer`, which starts a
//! throwaway etcd on loopback for tests and benchmarks (plain, TLS with client
//! certificates, or with authentication), `testing::Raw`, the etcd calls
//! that tests make behind a state's back, and `testing::Proxy`, which cuts one
//! client off etcd as a network partition would.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod client;
mod codec;
mod election;
mod state;
#[cfg(feature = "testing")]
pub mod testing;
mod watch;

/// Not API: the value and bookmark codecs, for the fuzz targets of the workspace's `fuzz/`.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use cosi::resource::{DynamicResource, Kind, Pointer};
    use cosi::state::Bookmark;

    use crate::codec::{self, Bookmarks, Keys};
    use crate::{DecodeError, EncodeError};

    /// The value the state stores for `resource`.
    pub fn encode_value(resource: &DynamicResource) -> Result<Vec<u8>, EncodeError> {
        codec::encode(resource)
    }

    /// The key of `pointer` under `prefix`.
    pub fn resource_key(prefix: &str, pointer: &Pointer) -> Vec<u8> {
        Keys::new(prefix).resource(pointer)
    }

    /// The resource stored as `value` under `key`, as reads, lists and watches decode it.
    pub fn decode_value(prefix: &str, key: &[u8], value: &[u8]) -> Result<DynamicResource, DecodeError> {
        codec::decode(&Keys::new(prefix), key, value)
    }

    /// The revision a client's bookmark names for `kind`, as a watch resuming from it reads it.
    pub fn decode_bookmark(prefix: &str, kind: &Kind, bookmark: &[u8]) -> Result<i64, &'static str> {
        Bookmarks::new(&Keys::new(prefix).kind_prefix(kind)).decode(&Bookmark::from_bytes(bookmark))
    }

    /// The bookmark of `revision` for `kind`.
    pub fn encode_bookmark(prefix: &str, kind: &Kind, revision: i64) -> Vec<u8> {
        Bookmarks::new(&Keys::new(prefix).kind_prefix(kind)).encode(revision).as_bytes().to_vec()
    }
}

pub use client::{ClientCertificate, Credentials, EtcdError, Tls};
pub use codec::{DecodeError, EncodeError};
pub use election::{ElectionError, ElectionOptions, LeaderElection, Leadership};
pub use state::{EtcdState, Options};
pub use watch::WatchLost;
