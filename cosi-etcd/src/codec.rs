//! How resources, kinds and bookmarks map to etcd keys and values.
//!
//! Invariants:
//! - A kind's keys all start with its prefix `<prefix>/<namespace>/<type>/`, and
//!   no other kind's prefix starts with it: `/` and `%` in namespaces and types
//!   are percent-escaped, and IDs come last, so they need no escaping.
//! - The kind's own key, its prefix with an empty ID (no resource has an empty
//!   ID), is written in the same transaction as every change of the kind; its
//!   `mod_revision` is the revision of the kind's last event.
//! - Decoding never panics: a value that is not ours is a [`DecodeError`].
//! - A value that is not ours is left out of lists and watches (with a
//!   warning), and is an error for reads of its own key: [`decode_or_skip`].

use std::time::SystemTime;

use cosi::resource::{DynamicResource, EncodedSpec, Kind, Metadata, Pointer};
use cosi::state::Bookmark;

use crate::client::proto::mvccpb::KeyValue;

/// The value format this crate writes; values of other formats are rejected.
const FORMAT: u32 = 1;

/// A stored resource: the value of a resource key.
#[derive(Clone, PartialEq, prost::Message)]
struct StoredValue {
    /// [`FORMAT`].
    #[prost(uint32, tag = "1")]
    format: u32,
    /// The metadata, as JSON (the serde form of `Metadata`).
    #[prost(bytes = "vec", tag = "2")]
    metadata: Vec<u8>,
    /// The protobuf bytes of an encoded spec, exactly as received.
    #[prost(bytes = "vec", optional, tag = "3")]
    spec_proto: Option<Vec<u8>>,
    /// The YAML text of the spec: an encoded spec's own, or a typed spec's rendering.
    #[prost(string, optional, tag = "4")]
    spec_yaml: Option<String>,
}

/// A value under the prefix that is not a resource this crate wrote.
#[derive(Debug, thiserror::Error)]
#[error("etcd key {key:?} does not hold a COSI resource: {reason}")]
pub struct DecodeError {
    key: String,
    reason: String,
}

impl DecodeError {
    fn new(key: &[u8], reason: impl Into<String>) -> Self {
        DecodeError { key: String::from_utf8_lossy(key).into_owned(), reason: reason.into() }
    }
}

/// A spec that cannot be stored, for example a typed spec whose serializer fails.
#[derive(Debug, thiserror::Error)]
#[error("cannot store the spec of {pointer}: {reason}")]
pub struct EncodeError {
    pointer: Pointer,
    reason: String,
}

/// The key layout under one prefix.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix`, which loses any trailing slash.
    pub(crate) fn new(prefix: &str) -> Self {
        Keys { prefix: prefix.trim_end_matches('/').to_owned() }
    }

    /// `<prefix>/<namespace>/<type>/`: every key of the kind starts with it, and
    /// the key itself is the kind's key.
    pub(crate) fn kind_prefix(&self, kind: &Kind) -> Vec<u8> {
        let mut key = String::with_capacity(self.prefix.len() + kind.namespace().len() + kind.r#type().len() + 3);
        key.push_str(&self.prefix);
        key.push('/');
        escape_into(&mut key, kind.namespace());
        key.push('/');
        escape_into(&mut key, kind.r#type());
        key.push('/');
        key.into_bytes()
    }

    /// The key of one resource: the kind prefix followed by the ID.
    pub(crate) fn resource(&self, pointer: &Pointer) -> Vec<u8> {
        let mut key = self.kind_prefix(&pointer.kind());
        key.extend_from_slice(pointer.id().as_bytes());
        key
    }

    /// The key of the leader election `name`, outside every kind's range.
    pub(crate) fn election(&self, name: &str) -> String {
        format!("{}!election/{name}", self.prefix)
    }
}

fn escape_into(out: &mut String, name: &str) {
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
}

/// The value stored for `resource`.
pub(crate) fn encode(resource: &DynamicResource) -> Result<Vec<u8>, EncodeError> {
    let error = |reason: String| EncodeError { pointer: resource.metadata().pointer().clone(), reason };
    let metadata = serde_json::to_vec(resource.metadata()).map_err(|err| error(err.to_string()))?;
    let (spec_proto, spec_yaml) = match (resource.spec().as_encoded(), resource.spec().as_serialize()) {
        (Some(encoded), _) => (Some(encoded.proto.clone()), encoded.yaml.clone()),
        (None, Some(typed)) => (None, Some(serde_yaml_ng::to_string(typed).map_err(|err| error(err.to_string()))?)),
        (None, None) => (None, None),
    };
    Ok(prost::Message::encode_to_vec(&StoredValue { format: FORMAT, metadata, spec_proto, spec_yaml }))
}

/// The resource stored as `value` under `key`; `kind_prefix` is the key's kind prefix.
///
/// The metadata must name the resource the key belongs to, so a value copied
/// to another key is noticed.
pub(crate) fn decode(keys: &Keys, key: &[u8], value: &[u8]) -> Result<DynamicResource, DecodeError> {
    let stored: StoredValue =
        prost::Message::decode(value).map_err(|err| DecodeError::new(key, format!("not a stored resource: {err}")))?;
    if stored.format != FORMAT {
        return Err(DecodeError::new(key, format!("unknown value format {}, expected {FORMAT}", stored.format)));
    }
    let metadata: Metadata = serde_json::from_slice(&stored.metadata)
        .map_err(|err| DecodeError::new(key, format!("malformed metadata: {err}")))?;
    if keys.resource(metadata.pointer()) != key {
        return Err(DecodeError::new(key, format!("the value names another resource, {}", metadata.pointer())));
    }
    Ok(match (stored.spec_proto, stored.spec_yaml) {
        (None, None) => DynamicResource::without_spec(metadata),
        (proto, yaml) => DynamicResource::encoded(metadata, EncodedSpec { proto: proto.unwrap_or_default(), yaml }),
    })
}

/// The resource stored in `kv`, or `None` when its value is not one (see
/// [`decode`]), which is logged as a warning naming the key.
///
/// Lists and watches read whole ranges of keys: one foreign value (written
/// by another program under the prefix, or corrupted) must not make every
/// list of its kind fail, so they leave it out. Reads of that one key
/// (`get`, a single-resource watch, the checks before a write) fail instead,
/// with the [`DecodeError`] that says which key holds what.
pub(crate) fn decode_or_skip(keys: &Keys, kv: &KeyValue) -> Option<DynamicResource> {
    match decode(keys, &kv.key, &kv.value) {
        Ok(resource) => Some(resource),
        Err(error) => {
            tracing::warn!(%error, "leaving out a value under the prefix that is not a COSI resource");
            None
        }
    }
}

/// Sets what the state owns in the metadata of a resource it is about to write.
pub(crate) fn stamp(metadata: &mut Metadata, version: cosi::Version, created: SystemTime) {
    metadata.set_version(version);
    metadata.set_timestamps(created, SystemTime::now());
}

/// Bookmarks: `kind hash (8) | revision (8) | check (8)`, big-endian.
///
/// The kind hash ties a bookmark to its kind (a single-resource watch accepts
/// its kind's bookmarks); the check catches any corrupted byte. Both are
/// FNV-1a, stable across processes and builds, so every process sharing the
/// etcd cluster can resume from any other's bookmarks.
pub(crate) struct Bookmarks {
    kind_hash: u64,
}

const BOOKMARK_LEN: usize = 24;

impl Bookmarks {
    pub(crate) fn new(kind_prefix: &[u8]) -> Self {
        Bookmarks { kind_hash: fnv1a(kind_prefix) }
    }

    pub(crate) fn encode(&self, revision: i64) -> Bookmark {
        let mut bytes = [0u8; BOOKMARK_LEN];
        bytes[..8].copy_from_slice(&self.kind_hash.to_be_bytes());
        bytes[8..16].copy_from_slice(&revision.to_be_bytes());
        let check = fnv1a(&bytes[..16]);
        bytes[16..].copy_from_slice(&check.to_be_bytes());
        Bookmark::from_bytes(&bytes[..])
    }

    /// The revision a bookmark names, or why it is not one of this kind's.
    pub(crate) fn decode(&self, bookmark: &Bookmark) -> Result<i64, &'static str> {
        let bytes: &[u8; BOOKMARK_LEN] = bookmark.as_bytes().try_into().map_err(|_| "it has the wrong length")?;
        let (body, check) = bytes.split_at(16);
        let (kind_hash, revision) = body.split_at(8);
        if fnv1a(body).to_be_bytes() != check {
            return Err("it is corrupted");
        }
        if u64::from_be_bytes(kind_hash.try_into().map_err(|_| "it has the wrong length")?) != self.kind_hash {
            return Err("it belongs to another namespace or type");
        }
        let revision = i64::from_be_bytes(revision.try_into().map_err(|_| "it has the wrong length")?);
        if revision < 0 {
            return Err("it names a negative revision");
        }
        Ok(revision)
    }
}

/// 64-bit FNV-1a: a fixed, dependency-free hash for bookmark checks (not a MAC).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_prefixes_do_not_nest() {
        let keys = Keys::new("/cosi/");
        let a = keys.kind_prefix(&Kind::new("a", "b/c"));
        let b = keys.kind_prefix(&Kind::new("a/b", "c"));
        assert_eq!(a, b"/cosi/a/b%2Fc/");
        assert_eq!(b, b"/cosi/a%2Fb/c/");
        assert!(!a.starts_with(&b) && !b.starts_with(&a));
        assert_eq!(keys.kind_prefix(&Kind::new("%2F", "t")), b"/cosi/%252F/t/");
        assert_eq!(keys.resource(&Pointer::new("n", "t", "a/b")), b"/cosi/n/t/a/b");
    }

    #[test]
    fn values_round_trip_and_garbage_is_an_error() {
        let keys = Keys::new("/p");
        let pointer = Pointer::new("ns", "Things.example.org", "x");
        let spec = EncodedSpec { proto: vec![0, 1, 2, 255], yaml: Some("value: x\n".into()) };
        let mut resource =
            DynamicResource::encoded(Metadata::new(pointer.namespace(), pointer.r#type(), pointer.id()), spec.clone());
        resource.metadata_mut().labels_mut().set("a", "");
        let key = keys.resource(&pointer);
        let decoded = decode(&keys, &key, &encode(&resource).unwrap()).unwrap();
        assert_eq!(decoded, resource);
        assert_eq!(decoded.spec().as_encoded(), Some(&spec));

        for garbage in [&b""[..], b"hello", &[0xff; 40]] {
            let err = decode(&keys, &key, garbage).unwrap_err().to_string();
            assert!(err.contains("does not hold a COSI resource"), "{err}");
        }
        // A valid value under another resource's key.
        let other = keys.resource(&Pointer::new("ns", "Things.example.org", "y"));
        let err = decode(&keys, &other, &encode(&resource).unwrap()).unwrap_err().to_string();
        assert!(err.contains("names another resource"), "{err}");
    }

    #[test]
    fn bookmarks_check_every_byte() {
        let bookmarks = Bookmarks::new(b"/p/ns/t/");
        let bookmark = bookmarks.encode(42);
        assert_eq!(bookmarks.decode(&bookmark), Ok(42));
        for index in 0..BOOKMARK_LEN {
            let mut bytes = bookmark.as_bytes().to_vec();
            bytes[index] ^= 0x01;
            assert!(bookmarks.decode(&Bookmark::from_bytes(bytes)).is_err(), "byte {index}");
        }
        assert!(Bookmarks::new(b"/p/ns/u/").decode(&bookmark).is_err());
    }
}
