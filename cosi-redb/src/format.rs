//! The stored format: two redb tables, one record per resource.
//!
//! - `cosi.meta` (`&str` → bytes): `format` = `[2]`, the version of this
//!   layout; `key-check`, present when specs are encrypted, is a sealed known
//!   text, so a wrong key is told at open even in an empty store. Its
//!   associated data is `key-check\0format\0` and the format byte, so the
//!   key check also authenticates the format entry: an entry set back to 1,
//!   which would let format 1 records in through the migration, no longer
//!   matches it and the store is refused. A key check sealed before that
//!   (associated data `key-check` alone, as format 1 and earlier format 2
//!   stores have it) is sealed again, bound, at open: in the transaction of
//!   the migration for a format 1 store, in one of its own for a format 2 one.
//! - `cosi.resources` (`(namespace, type, ID)` → record), so a kind's
//!   resources sit together in ID order, as Go COSI's bolt buckets keep them.
//!
//! A record is
//!
//! ```text
//! 0x02                      record format
//! u32 LE n, n bytes         the metadata as JSON (cosi's serde form of `Metadata`)
//! u8 tag                    0 no spec, 1 encoded spec, 2 typed spec as YAML
//! spec body                 to the end; sealed (see `crypto`) when the store encrypts
//! ```
//!
//! An encoded spec's body is `u32 LE n, n proto bytes, u8 has-YAML, u32 LE m,
//! m bytes of YAML`, so `EncodedSpec { proto, yaml }` comes back byte for
//! byte. A typed spec's body is `u32 LE m, m bytes of YAML`: it comes back as
//! an encoded spec with that YAML and no proto bytes, which typed reads decode
//! (`Typed::try_from`, `get::<T>`). Every part has its length, so a cut
//! record never reads as a shorter one.
//!
//! When the store encrypts, the body is sealed, even an empty one, with the
//! record's key and its whole clear header (format, metadata with the
//! version, owner, labels and finalizers, spec tag) as associated data: any
//! change to the metadata, or an older sealed body put back under newer
//! metadata, fails to open. (A whole older record put back, header and body,
//! is as authentic as it was when written: detecting that needs a counter
//! kept outside the file.)
//!
//! Record format 1 (store format 1) sealed only the body, bound to the key.
//! Opening a format 1 store rewrites its encrypted records in format 2 and
//! marks the store format 2, in one transaction; a format 2 store refuses a
//! format 1 encrypted record. Unencrypted records of either format read alike.
//!
//! Decoding never trusts the bytes: every length is checked, and a record
//! whose metadata names another resource than its key is refused.

use cosi::resource::EncodedSpec;
use cosi::{DynamicResource, Metadata};
use redb::TableDefinition;

use crate::Error;
use crate::crypto::Cipher;

/// Resources by (namespace, type, ID).
pub(crate) const RESOURCES: TableDefinition<'static, (&str, &str, &str), &[u8]> =
    TableDefinition::new("cosi.resources");
/// What the file is: format version and key check.
pub(crate) const META: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("cosi.meta");

pub(crate) const FORMAT_KEY: &str = "format";
/// The store format this version writes.
pub(crate) const FORMAT_VERSION: u8 = 2;
/// The store format before records were authenticated whole; migrated at open.
pub(crate) const LEGACY_FORMAT_VERSION: u8 = 1;
pub(crate) const KEY_CHECK_KEY: &str = "key-check";
pub(crate) const KEY_CHECK_TEXT: &[u8] = b"cosi-redb key check";

/// The associated data of a key check bound to the store format `format`.
pub(crate) fn key_check_aad(format: u8) -> Vec<u8> {
    let mut aad = Vec::with_capacity(KEY_CHECK_KEY.len() + 9);
    aad.extend_from_slice(KEY_CHECK_KEY.as_bytes());
    aad.extend_from_slice(b"\0format\0");
    aad.push(format);
    aad
}

/// The associated data of a key check bound to no format: format 1 stores',
/// and format 2 stores' until they were opened by a version that binds it.
pub(crate) fn unbound_key_check_aad() -> &'static [u8] {
    KEY_CHECK_KEY.as_bytes()
}

/// The record format this version writes.
const RECORD_FORMAT: u8 = 2;
/// Records whose sealed body was bound to their key only.
const LEGACY_RECORD_FORMAT: u8 = 1;
const SPEC_EMPTY: u8 = 0;
const SPEC_ENCODED: u8 = 1;
const SPEC_YAML: u8 = 2;

/// The associated data that binds a sealed spec to its record.
pub(crate) fn aad(namespace: &str, r#type: &str, id: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(namespace.len() + r#type.len() + id.len() + 2);
    for (i, part) in [namespace, r#type, id].into_iter().enumerate() {
        if i > 0 {
            aad.push(0);
        }
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

/// The associated data of a format 2 record's sealed body: its key, then its clear header.
fn record_aad(namespace: &str, r#type: &str, id: &str, header: &[u8]) -> Vec<u8> {
    let mut aad = aad(namespace, r#type, id);
    aad.push(0);
    aad.extend_from_slice(header);
    aad
}

/// The record of `resource`.
pub(crate) fn encode(resource: &DynamicResource, cipher: Option<&Cipher>) -> Result<Vec<u8>, Error> {
    let pointer = resource.metadata().pointer();
    let metadata = serde_json::to_vec(resource.metadata())
        .map_err(|err| Error::Encode { pointer: pointer.to_string(), reason: err.to_string() })?;
    let metadata_len = u32::try_from(metadata.len())
        .map_err(|_| Error::Encode { pointer: pointer.to_string(), reason: "the metadata is over 4 GiB".to_owned() })?;

    let (tag, body) = match (resource.spec().as_encoded(), resource.spec().as_serialize()) {
        (Some(encoded), _) => {
            let proto_len = u32::try_from(encoded.proto.len()).map_err(|_| Error::Encode {
                pointer: pointer.to_string(),
                reason: "the proto spec is over 4 GiB".to_owned(),
            })?;
            let yaml = encoded.yaml.as_deref();
            let mut body = Vec::with_capacity(4 + encoded.proto.len() + 5 + yaml.map_or(0, str::len));
            body.extend_from_slice(&proto_len.to_le_bytes());
            body.extend_from_slice(&encoded.proto);
            body.push(u8::from(yaml.is_some()));
            put_text(&mut body, yaml.unwrap_or_default(), pointer)?;
            (SPEC_ENCODED, body)
        }
        (None, Some(spec)) => {
            let yaml = serde_yaml_ng::to_string(spec).map_err(|err| Error::Encode {
                pointer: pointer.to_string(),
                reason: format!("cannot write the spec as YAML: {err}"),
            })?;
            let mut body = Vec::with_capacity(4 + yaml.len());
            put_text(&mut body, &yaml, pointer)?;
            (SPEC_YAML, body)
        }
        (None, None) => (SPEC_EMPTY, Vec::new()),
    };
    let mut record = Vec::with_capacity(1 + 4 + metadata.len() + 1 + body.len() + 64);
    record.push(RECORD_FORMAT);
    record.extend_from_slice(&metadata_len.to_le_bytes());
    record.extend_from_slice(&metadata);
    record.push(tag);
    match cipher {
        Some(cipher) => {
            let aad = record_aad(pointer.namespace(), pointer.r#type(), pointer.id(), &record);
            let sealed = cipher.seal(&body, &aad)?;
            record.extend_from_slice(&sealed);
        }
        None => record.extend_from_slice(&body),
    }
    Ok(record)
}

/// The resource stored under `key` as `record`, in a store of the current format.
pub(crate) fn decode(
    key: (&str, &str, &str),
    record: &[u8],
    cipher: Option<&Cipher>,
) -> Result<DynamicResource, Error> {
    decode_with(key, record, cipher, false)
}

/// The resource stored under `key` as `record`, accepting the legacy record
/// format even when encrypted: for migrating a format 1 store only.
pub(crate) fn decode_legacy(
    key: (&str, &str, &str),
    record: &[u8],
    cipher: Option<&Cipher>,
) -> Result<DynamicResource, Error> {
    decode_with(key, record, cipher, true)
}

fn decode_with(
    (namespace, r#type, id): (&str, &str, &str),
    record: &[u8],
    cipher: Option<&Cipher>,
    legacy: bool,
) -> Result<DynamicResource, Error> {
    let corrupt =
        |reason: &str| Error::Corrupt { record: format!("{type}({namespace}/{id})"), reason: reason.to_owned() };
    let mut bytes = Reader(record);
    let format = match bytes.u8() {
        Some(RECORD_FORMAT) => RECORD_FORMAT,
        // Without encryption the formats are the same but for this byte.
        Some(LEGACY_RECORD_FORMAT) if legacy || cipher.is_none() => LEGACY_RECORD_FORMAT,
        Some(LEGACY_RECORD_FORMAT) => {
            return Err(corrupt("an encrypted record of format 1, not authenticated whole, in a format 2 store"));
        }
        Some(other) => return Err(corrupt(&format!("unknown record format {other}"))),
        None => return Err(corrupt("the record is empty")),
    };
    let metadata_len = bytes.u32().ok_or_else(|| corrupt("the record ends inside the metadata length"))?;
    let metadata = bytes.take(metadata_len as usize).ok_or_else(|| corrupt("the record ends inside the metadata"))?;
    let metadata: Metadata =
        serde_json::from_slice(metadata).map_err(|err| corrupt(&format!("unreadable metadata: {err}")))?;
    if (metadata.namespace(), metadata.r#type(), metadata.id()) != (namespace, r#type, id) {
        return Err(corrupt(&format!("the record holds another resource, {}", metadata.pointer())));
    }
    let tag = bytes.u8().ok_or_else(|| corrupt("the record ends before the spec"))?;
    let header = &record[..record.len() - bytes.0.len()];
    let open = |aad: &[u8]| -> Result<Vec<u8>, Error> {
        match cipher {
            Some(cipher) => cipher.open(bytes.0, aad).map_err(|err| match err {
                Error::Encryption(reason) => Error::Encryption(format!("{type}({namespace}/{id}): {reason}")),
                other => other,
            }),
            None => Ok(bytes.0.to_vec()),
        }
    };
    let body = match (format, tag) {
        // Format 1 left an empty spec unsealed.
        (LEGACY_RECORD_FORMAT, SPEC_EMPTY) => bytes.0.to_vec(),
        (LEGACY_RECORD_FORMAT, _) => open(&aad(namespace, r#type, id))?,
        _ => open(&record_aad(namespace, r#type, id, header))?,
    };
    if tag == SPEC_EMPTY {
        return match body.is_empty() {
            true => Ok(DynamicResource::without_spec(metadata)),
            false => Err(corrupt("bytes follow an empty spec")),
        };
    }
    let spec = match tag {
        SPEC_ENCODED => {
            let mut body = Reader(&body);
            let proto_len = body.u32().ok_or_else(|| corrupt("the spec ends inside the proto length"))?;
            let proto = body.take(proto_len as usize).ok_or_else(|| corrupt("the spec ends inside the proto bytes"))?;
            let has_yaml = body.u8().ok_or_else(|| corrupt("the spec ends before its YAML marker"))?;
            let yaml = body.text().ok_or_else(|| corrupt("the YAML of the spec is cut or not UTF-8"))?;
            let yaml = match (has_yaml, yaml.is_empty()) {
                (0, true) => None,
                (1, _) => Some(yaml),
                _ => return Err(corrupt("the spec's YAML marker is malformed")),
            };
            if !body.0.is_empty() {
                return Err(corrupt("bytes follow the spec"));
            }
            EncodedSpec { proto: proto.to_vec(), yaml }
        }
        SPEC_YAML => {
            let mut body = Reader(&body);
            let yaml = body.text().ok_or_else(|| corrupt("the YAML of the spec is cut or not UTF-8"))?;
            if !body.0.is_empty() {
                return Err(corrupt("bytes follow the spec"));
            }
            EncodedSpec { proto: Vec::new(), yaml: Some(yaml) }
        }
        other => return Err(corrupt(&format!("unknown spec tag {other}"))),
    };
    Ok(DynamicResource::encoded(metadata, spec))
}

/// A cursor over untrusted bytes: every read is checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes)
    }

    /// A `u32` length, then that many bytes of UTF-8.
    fn text(&mut self) -> Option<String> {
        let len = self.u32()?;
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec()).ok()
    }
}

/// Appends `text` with its `u32` length.
fn put_text(out: &mut Vec<u8>, text: &str, pointer: &cosi::Pointer) -> Result<(), Error> {
    let len = u32::try_from(text.len()).map_err(|_| Error::Encode {
        pointer: pointer.to_string(),
        reason: "the YAML spec is over 4 GiB".to_owned(),
    })?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// A record as format 1 wrote it: the sealed body bound to the key only,
/// an empty spec unsealed.
#[cfg(test)]
pub(crate) fn encode_legacy(resource: &DynamicResource, cipher: &Cipher) -> Vec<u8> {
    let pointer = resource.metadata().pointer();
    let record = encode(resource, None).expect("encode");
    let mut bytes = Reader(&record[1..]);
    let metadata_len = bytes.u32().expect("length") as usize;
    let header_len = 1 + 4 + metadata_len + 1;
    let (header, body) = record.split_at(header_len);
    let mut legacy = header.to_vec();
    legacy[0] = LEGACY_RECORD_FORMAT;
    match header[header_len - 1] {
        SPEC_EMPTY => (),
        _ => legacy.extend(cipher.seal(body, &aad(pointer.namespace(), pointer.r#type(), pointer.id())).expect("seal")),
    }
    legacy
}

#[cfg(test)]
mod tests {
    use cosi::testing::resources::PathResource;
    use cosi::{Metadata, Typed};

    use super::*;
    use crate::EncryptionKey;

    fn encoded(proto: &[u8], yaml: Option<&str>) -> DynamicResource {
        let mut metadata = Metadata::new("ns", "Things.test.dev", "a");
        metadata.labels_mut().set("k", "v");
        metadata.finalizers_mut().add("f");
        DynamicResource::encoded(metadata, EncodedSpec { proto: proto.to_vec(), yaml: yaml.map(str::to_owned) })
    }

    const KEY: (&str, &str, &str) = ("ns", "Things.test.dev", "a");

    #[test]
    fn encoded_specs_round_trip_byte_for_byte() {
        let cipher = Cipher::new(&EncryptionKey::new([1; 32]));
        for cipher in [None, Some(&cipher)] {
            for resource in [encoded(b"\x00\x01\xff", Some("a: 1\n")), encoded(b"", None), encoded(b"x", Some(""))] {
                let record = encode(&resource, cipher).expect("encode");
                assert_eq!(decode(KEY, &record, cipher).expect("decode"), resource);
            }
        }
    }

    #[test]
    fn typed_specs_come_back_as_yaml() {
        let typed = Typed::new_in("ns", "p", PathResource { value: "hello".into() });
        let resource = DynamicResource::from(typed);
        let record = encode(&resource, None).expect("encode");
        let back = decode(("ns", <PathResource as cosi::Resource>::TYPE, "p"), &record, None).expect("decode");
        let typed: Typed<PathResource> = Typed::try_from(back).expect("typed read of the YAML");
        assert_eq!(typed.value, "hello");
    }

    #[test]
    fn damaged_records_are_errors() {
        let record = encode(&encoded(b"abc", Some("y")), None).expect("encode");
        for len in 0..record.len() {
            assert!(decode(KEY, &record[..len], None).is_err(), "a record cut at {len} bytes was accepted");
        }
        assert!(matches!(decode(("ns", "Things.test.dev", "b"), &record, None), Err(Error::Corrupt { .. })));
        let mut extra = encode(&DynamicResource::tombstone(&cosi::Pointer::new("ns", "Things.test.dev", "a")), None)
            .expect("encode");
        extra.push(0);
        assert!(decode(KEY, &extra, None).is_err());
    }

    #[test]
    fn sealed_specs_need_the_key() {
        let cipher = Cipher::new(&EncryptionKey::new([1; 32]));
        let record = encode(&encoded(b"abc", Some("y")), Some(&cipher)).expect("encode");
        assert!(!record.windows(3).any(|w| w == b"abc"), "the spec is stored in the clear");
        let wrong = Cipher::new(&EncryptionKey::new([2; 32]));
        assert!(matches!(decode(KEY, &record, Some(&wrong)), Err(Error::Encryption(_))));
        assert!(decode(("ns", "Things.test.dev", "b"), &record, Some(&cipher)).is_err());
    }

    #[test]
    fn encrypted_records_are_authenticated_whole() {
        let cipher = Cipher::new(&EncryptionKey::new([1; 32]));
        let older = encoded(b"old secret", Some("a: old\n"));
        let mut newer = encoded(b"new secret", Some("a: new\n"));
        newer.metadata_mut().set_version(cosi::Version::new(2));
        let older_record = encode(&older, Some(&cipher)).expect("encode");
        let newer_record = encode(&newer, Some(&cipher)).expect("encode");
        assert_eq!(decode(KEY, &newer_record, Some(&cipher)).expect("decode"), newer);

        // An older sealed spec put back under the newer metadata.
        let header_len =
            |record: &[u8]| 1 + 4 + u32::from_le_bytes(record[1..5].try_into().expect("4 bytes")) as usize + 1;
        let mut spliced = newer_record[..header_len(&newer_record)].to_vec();
        spliced.extend_from_slice(&older_record[header_len(&older_record)..]);
        assert!(
            matches!(decode(KEY, &spliced, Some(&cipher)), Err(Error::Encryption(_))),
            "an older ciphertext under newer metadata was accepted"
        );

        // Metadata edited in the clear: a label, the version, a finalizer.
        for (from, to) in [(&b"\"k\":\"v\""[..], &b"\"k\":\"w\""[..]), (b"\"f\"", b"\"g\"")] {
            let at = newer_record.windows(from.len()).position(|w| w == from).expect("the clear metadata");
            let mut edited = newer_record.clone();
            edited[at..at + from.len()].copy_from_slice(to);
            assert!(
                matches!(decode(KEY, &edited, Some(&cipher)), Err(Error::Encryption(_))),
                "metadata edited from {} to {} was accepted",
                String::from_utf8_lossy(from),
                String::from_utf8_lossy(to)
            );
        }

        // A resource without a spec is sealed too, so its metadata is authenticated.
        let tombstone = DynamicResource::tombstone(&cosi::Pointer::new("ns", "Things.test.dev", "a"));
        let record = encode(&tombstone, Some(&cipher)).expect("encode");
        assert_eq!(decode(KEY, &record, Some(&cipher)).expect("decode"), tombstone);
        let mut edited = record.clone();
        let at = edited.windows(9).position(|w| w == b"\"running\"").expect("the phase in the clear");
        edited[at..at + 9].copy_from_slice(b"\"runnin_\"");
        assert!(decode(KEY, &edited, Some(&cipher)).is_err(), "an unsealed empty spec left the metadata open");
    }

    #[test]
    fn legacy_encrypted_records_are_read_only_for_migration() {
        let cipher = Cipher::new(&EncryptionKey::new([1; 32]));
        let resource = encoded(b"abc", Some("y"));
        let legacy = encode_legacy(&resource, &cipher);
        assert!(
            matches!(decode(KEY, &legacy, Some(&cipher)), Err(Error::Corrupt { .. })),
            "a format 1 encrypted record is refused in a format 2 store"
        );
        assert_eq!(decode_legacy(KEY, &legacy, Some(&cipher)).expect("migration reads it"), resource);

        // The defect format 2 fixes: format 1 took an older sealed spec under newer metadata.
        let mut newer = encoded(b"new", Some("n"));
        newer.metadata_mut().set_version(cosi::Version::new(2));
        let newer_legacy = encode_legacy(&newer, &cipher);
        let header_len =
            |record: &[u8]| 1 + 4 + u32::from_le_bytes(record[1..5].try_into().expect("4 bytes")) as usize + 1;
        let mut spliced = newer_legacy[..header_len(&newer_legacy)].to_vec();
        spliced.extend_from_slice(&legacy[header_len(&legacy)..]);
        let read = decode_legacy(KEY, &spliced, Some(&cipher)).expect("format 1 cannot tell");
        assert_eq!((read.metadata().version(), &read.spec()), (cosi::Version::new(2), &resource.spec()));
        // Without encryption the formats read alike.
        let mut plain = encode(&resource, None).expect("encode");
        plain[0] = LEGACY_RECORD_FORMAT;
        assert_eq!(decode(KEY, &plain, None).expect("decode"), resource);
    }
}
