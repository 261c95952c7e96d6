//! [`EtcdState`]: the COSI rules checked inside etcd transactions.
//!
//! Every write is one transaction that compares the key's `mod_revision` with
//! the revision the checks were made against, so two processes racing on one
//! resource never both succeed: the loser's transaction returns the stored
//! value instead, and the checks run again against it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cosi::resource::{DynamicResource, Kind, Metadata, Phase, Pointer, Version};
use cosi::state::{
    CreateOptions, DestroyOptions, Error, ListOptions, Result, State, UpdateOptions, Watch, WatchKindOptions,
    WatchOptions,
};
use parking_lot::Mutex;

use crate::client::proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::client::proto::etcdserverpb::request_op::Request;
use crate::client::proto::etcdserverpb::response_op::Response;
use crate::client::proto::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use crate::client::proto::mvccpb::KeyValue;
use crate::client::{Client, Connection, Credentials, EtcdError, Tls};
use crate::codec::{self, Keys};
use crate::watch::{self, WatchSpec};

/// How to connect and where to keep resources.
#[derive(Clone, Debug)]
pub struct Options {
    /// Every key this state writes starts with this prefix (a trailing `/` is ignored).
    pub prefix: String,
    /// How many undelivered events a watch buffers before it fails with
    /// [`Error::BufferOverrun`]: etcd never waits for a slow watcher, and neither does this state.
    pub watch_buffer: usize,
    /// How long a watch whose etcd stream broke keeps reopening it before it
    /// gives up: its reader then gets one `Errored` event
    /// ([`Error::Backend`] holding a [`WatchLost`](crate::WatchLost)) and the
    /// watch ends. Each failed attempt is logged as a warning. The outage
    /// counts from the break until a reopened stream delivers a response or
    /// stays open this long. 60 s: long enough for an etcd restart or a leader
    /// election, short enough that a reader learns of a lasting outage.
    pub watch_reconnect_timeout: Duration,
    /// How long to wait for a connection to etcd.
    pub connect_timeout: Duration,
    /// How to verify etcd, and be verified by it, on `https://` endpoints;
    /// required for them, and refused with `http://` ones.
    pub tls: Option<Tls>,
    /// The etcd user to act as, when etcd has authentication enabled.
    /// Refused with `http://` endpoints off loopback, where the password
    /// would cross the network in plaintext.
    pub credentials: Option<Credentials>,
}

impl Default for Options {
    /// Prefix `/cosi`, a watch buffer of 1024 events (the in-memory history's
    /// size), 60 s for a broken watch to reconnect, 5 s to connect, no TLS, no user.
    fn default() -> Self {
        Options {
            prefix: "/cosi".to_owned(),
            watch_buffer: 1024,
            watch_reconnect_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            tls: None,
            credentials: None,
        }
    }
}

impl Options {
    /// The default options with another key prefix.
    pub fn prefix(prefix: impl Into<String>) -> Self {
        Options { prefix: prefix.into(), ..Options::default() }
    }
}

/// A [`State`] kept in etcd, shared by every process connected to the same cluster and prefix.
///
/// Cloning it is cheap and shares the connection.
#[derive(Clone)]
pub struct EtcdState {
    pub(crate) client: Client,
    pub(crate) keys: Keys,
    pub(crate) options: Arc<Options>,
    /// The metadata and `mod_revision` this process last wrote or read per key.
    ///
    /// Only a hint, to save the read before a write: a write based on a stale
    /// entry fails its transaction, and no error is returned before the checks
    /// ran against a fresh read.
    known: Arc<Mutex<Known>>,
}

/// Metadata and `mod_revision` by key.
type Known = HashMap<Vec<u8>, (Metadata, i64)>;

/// Entries of `known` beyond this are dropped all at once: it is only a hint.
const KNOWN_LIMIT: usize = 16 * 1024;

impl std::fmt::Debug for EtcdState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdState").field("options", &self.options).finish_non_exhaustive()
    }
}

/// A failure talking to etcd, carried as [`Error::Backend`].
pub(crate) fn backend(err: EtcdError) -> Error {
    Error::backend(err)
}

impl EtcdState {
    /// Connects to the etcd cluster at `endpoints` (such as `http://127.0.0.1:2379`,
    /// or `https://...` with [`Options::tls`]), authenticating as
    /// [`Options::credentials`] when they are given.
    ///
    /// Connections are made when calls need them: an unreachable cluster fails
    /// the first call rather than this one, unless credentials make this one
    /// authenticate.
    pub async fn connect(endpoints: &[impl AsRef<str>], options: Options) -> Result<Self> {
        let connection = Connection {
            connect_timeout: options.connect_timeout,
            tls: options.tls.as_ref(),
            credentials: options.credentials.as_ref(),
        };
        let client = Client::connect(endpoints, connection).await.map_err(backend)?;
        Ok(EtcdState { client, keys: Keys::new(&options.prefix), options: Arc::new(options), known: Arc::default() })
    }

    /// The stored resource at `key` and its `mod_revision`, if any.
    async fn read(&self, key: &[u8]) -> Result<Option<(DynamicResource, i64)>> {
        let response = self.client.get(key.to_vec()).await.map_err(backend)?;
        response.kvs.first().map(|kv| self.decode(kv)).transpose()
    }

    fn decode(&self, kv: &KeyValue) -> Result<(DynamicResource, i64)> {
        let resource = codec::decode(&self.keys, &kv.key, &kv.value).map_err(Error::backend)?;
        Ok((resource, kv.mod_revision))
    }

    /// Runs `ops` if `key` is still at `mod_revision` (0: absent); otherwise returns what is stored now.
    async fn write_if(&self, key: &[u8], mod_revision: i64, ops: Vec<RequestOp>) -> Result<Outcome> {
        let (target, value) = match mod_revision {
            0 => (CompareTarget::Create, TargetUnion::CreateRevision(0)),
            revision => (CompareTarget::Mod, TargetUnion::ModRevision(revision)),
        };
        let compare = Compare {
            result: CompareResult::Equal.into(),
            target: target.into(),
            key: key.to_vec(),
            target_union: Some(value),
        };
        let read = RequestOp {
            request: Some(Request::RequestRange(RangeRequest { key: key.to_vec(), ..Default::default() })),
        };
        let txn = TxnRequest { compare: vec![compare], success: ops, failure: vec![read] };
        let response = self.client.txn(txn).await.map_err(backend)?;
        if response.succeeded {
            return Ok(Outcome::Written(response.header.map_or(0, |header| header.revision)));
        }
        for op in &response.responses {
            if let Some(Response::ResponseRange(range)) = &op.response {
                let stored = range.kvs.first().map(|kv| self.decode(kv)).transpose()?;
                return Ok(Outcome::Stored(stored.map(|(resource, revision)| (Box::new(resource), revision))));
            }
        }
        Ok(Outcome::Stored(None))
    }

    /// What is stored at `key` as far as this process knows, else as etcd says now.
    ///
    /// The flag says whether it came from etcd just now.
    async fn current(&self, key: &[u8]) -> Result<(Option<(Metadata, i64)>, bool)> {
        if let Some(known) = self.known.lock().get(key).cloned() {
            return Ok((Some(known), false));
        }
        let stored = self.read(key).await?.map(|(resource, revision)| (resource.metadata().clone(), revision));
        if let Some((metadata, revision)) = &stored {
            self.remember(key.to_vec(), metadata.clone(), *revision);
        }
        Ok((stored, true))
    }

    fn remember(&self, key: Vec<u8>, metadata: Metadata, revision: i64) {
        let mut known = self.known.lock();
        if known.len() >= KNOWN_LIMIT {
            known.clear();
        }
        known.insert(key, (metadata, revision));
    }

    fn forget(&self, key: &[u8]) {
        self.known.lock().remove(key);
    }

    /// The operations that write `value` at `key` and mark the kind as changed.
    fn put_ops(&self, kind_key: Vec<u8>, key: Vec<u8>, value: Vec<u8>) -> Vec<RequestOp> {
        vec![put(key, value), put(kind_key, Vec::new())]
    }
}

fn put(key: Vec<u8>, value: Vec<u8>) -> RequestOp {
    RequestOp { request: Some(Request::RequestPut(PutRequest { key, value })) }
}

fn delete(key: Vec<u8>) -> RequestOp {
    RequestOp { request: Some(Request::RequestDeleteRange(DeleteRangeRequest { key })) }
}

enum Outcome {
    /// Written at this revision.
    Written(i64),
    /// The transaction's comparison failed; this is stored now.
    Stored(Option<(Box<DynamicResource>, i64)>),
}

/// COSI's checks of an update, in order: owner (the writer's, and the one
/// the new metadata names), version, phase.
fn check_update(pointer: &Pointer, old: &Metadata, resource: &DynamicResource, options: &UpdateOptions) -> Result<()> {
    options.check_owner(resource.metadata(), old)?;
    if resource.metadata().version() != old.version() {
        return Err(Error::VersionConflict {
            pointer: pointer.clone(),
            given: resource.metadata().version(),
            stored: old.version(),
        });
    }
    if !options.expected_phase.is_none_or(|expected| expected == old.phase()) {
        let expected = options.expected_phase.unwrap_or(Phase::Running);
        return Err(Error::PhaseConflict { pointer: pointer.clone(), expected });
    }
    Ok(())
}

/// COSI's checks of a destroy, in order: owner, finalizers.
fn check_destroy(pointer: &Pointer, old: &Metadata, options: &DestroyOptions) -> Result<()> {
    check_owner(pointer, old, options.owner.as_deref())?;
    if !old.finalizers().is_empty() {
        return Err(Error::PendingFinalizers { pointer: pointer.clone(), finalizers: old.finalizers().clone() });
    }
    Ok(())
}

/// A destroy's or a teardown's owner against the stored one; an empty owner
/// is none, as `Metadata::set_owner` has it.
fn check_owner(pointer: &Pointer, stored: &Metadata, owner: Option<&str>) -> Result<()> {
    if stored.owner() == owner.filter(|owner| !owner.is_empty()) {
        return Ok(());
    }
    Err(Error::OwnerConflict { pointer: pointer.clone(), owner: stored.owner().map(Into::into) })
}

#[async_trait]
impl State for EtcdState {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource> {
        pointer.validate().map_err(Error::InvalidArgument)?;
        let key = self.keys.resource(pointer);
        match self.read(&key).await? {
            Some((resource, revision)) => {
                self.remember(key, resource.metadata().clone(), revision);
                Ok(resource)
            }
            None => Err(Error::NotFound(pointer.clone())),
        }
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>> {
        kind.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        let prefix = self.keys.kind_prefix(kind);
        let listing = self.client.list(&prefix).await.map_err(backend)?;
        let mut listed = Vec::with_capacity(listing.kvs.len());
        for kv in &listing.kvs {
            if kv.key == prefix {
                continue;
            }
            // A foreign value is left out (with a warning), not the list's failure.
            let Some(resource) = codec::decode_or_skip(&self.keys, kv) else { continue };
            if options.matches(&resource) {
                listed.push(resource);
            }
        }
        Ok(listed)
    }

    async fn create_dynamic(&self, mut resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource> {
        let pointer = resource.metadata().pointer().clone();
        pointer.validate().map_err(Error::InvalidArgument)?;
        // Taken for editing once: only the first `metadata_mut` may copy.
        let metadata = resource.metadata_mut();
        match (metadata.owner(), options.owner.as_deref()) {
            (Some(existing), Some(requested)) if existing != requested => {
                return Err(Error::invalid_argument(format!(
                    "cannot create {pointer} owned by {requested:?}: its metadata names the owner {existing:?}"
                )));
            }
            (_, Some(requested)) => metadata.set_owner(Some(requested)),
            (_, None) => {}
        }
        let now = std::time::SystemTime::now();
        metadata.set_version(Version::new(1));
        metadata.set_timestamps(now, now);
        let value = codec::encode(&resource).map_err(Error::backend)?;
        let key = self.keys.resource(&pointer);
        let ops = self.put_ops(self.keys.kind_prefix(&pointer.kind()), key.clone(), value);
        match self.write_if(&key, 0, ops).await? {
            Outcome::Written(revision) => {
                self.remember(key, resource.metadata().clone(), revision);
                Ok(resource)
            }
            Outcome::Stored(_) => Err(Error::AlreadyExists(pointer)),
        }
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource> {
        let pointer = resource.metadata().pointer().clone();
        pointer.validate().map_err(Error::InvalidArgument)?;
        let key = self.keys.resource(&pointer);
        let kind_key = self.keys.kind_prefix(&pointer.kind());
        let (mut stored, mut fresh) = self.current(&key).await?;
        loop {
            let checked = match &stored {
                None => Err(Error::NotFound(pointer.clone())),
                Some((old, _)) => check_update(&pointer, old, &resource, &options),
            };
            let (old, mod_revision) = match (checked, stored.take()) {
                (Ok(()), Some(stored)) => stored,
                // A hint from this process's memory proves nothing: ask etcd.
                (Err(_), _) if !fresh => {
                    self.forget(&key);
                    (stored, fresh) = self.current(&key).await?;
                    continue;
                }
                (Err(err), _) => return Err(err),
                (Ok(()), None) => return Err(Error::NotFound(pointer)),
            };
            let mut next = resource.clone();
            let metadata = next.metadata_mut();
            codec::stamp(metadata, old.version().next(), old.created());
            // The owner, checked unchanged: the stored one.
            metadata.set_owner(old.owner());
            let value = codec::encode(&next).map_err(Error::backend)?;
            match self.write_if(&key, mod_revision, self.put_ops(kind_key.clone(), key.clone(), value)).await? {
                Outcome::Written(revision) => {
                    self.remember(key, next.metadata().clone(), revision);
                    return Ok(next);
                }
                Outcome::Stored(now) => {
                    stored = now.map(|(resource, revision)| (resource.metadata().clone(), revision));
                    fresh = true;
                }
            }
        }
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()> {
        pointer.validate().map_err(Error::InvalidArgument)?;
        let key = self.keys.resource(pointer);
        let kind_key = self.keys.kind_prefix(&pointer.kind());
        let (mut stored, mut fresh) = self.current(&key).await?;
        loop {
            let checked = match &stored {
                None => Err(Error::NotFound(pointer.clone())),
                Some((old, _)) => check_destroy(pointer, old, &options),
            };
            let mod_revision = match (checked, &stored) {
                (Ok(()), Some((_, mod_revision))) => *mod_revision,
                (Err(_), _) if !fresh => {
                    self.forget(&key);
                    (stored, fresh) = self.current(&key).await?;
                    continue;
                }
                (Err(err), _) => return Err(err),
                (Ok(()), None) => return Err(Error::NotFound(pointer.clone())),
            };
            let ops = vec![delete(key.clone()), put(kind_key.clone(), Vec::new())];
            match self.write_if(&key, mod_revision, ops).await? {
                Outcome::Written(_) => {
                    self.forget(&key);
                    return Ok(());
                }
                Outcome::Stored(now) => {
                    stored = now.map(|(resource, revision)| (resource.metadata().clone(), revision));
                    fresh = true;
                }
            }
        }
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch> {
        pointer.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        watch::start(self, WatchSpec::single(pointer, options)).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch> {
        kind.validate().map_err(Error::InvalidArgument)?;
        options.validate()?;
        watch::start(self, WatchSpec::kind(kind, options)).await
    }
}
