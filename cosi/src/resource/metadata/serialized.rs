//! The serialized form of [`Metadata`].

use std::time::SystemTime;

use arcstr::ArcStr;
use serde::{Deserialize, Serialize};

use super::{Extra, Finalizers, Labels, Metadata, Packed, Phase, Version};
use crate::resource::Pointer;

/// The serialized form: every field at the top level, empty collections left out.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetadataRef<'a> {
    #[serde(flatten)]
    pointer: &'a Pointer,
    version: Version,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    phase: Phase,
    #[serde(with = "timestamp")]
    created: SystemTime,
    #[serde(with = "timestamp")]
    updated: SystemTime,
    #[serde(skip_serializing_if = "no_labels")]
    labels: &'a Labels,
    #[serde(skip_serializing_if = "no_labels")]
    annotations: &'a Labels,
    #[serde(skip_serializing_if = "no_finalizers")]
    finalizers: &'a Finalizers,
}

fn no_labels(labels: &&Labels) -> bool {
    labels.is_empty()
}

fn no_finalizers(finalizers: &&Finalizers) -> bool {
    finalizers.is_empty()
}

/// The deserialized form, the same as [`MetadataRef`]'s.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetadataRepr {
    #[serde(flatten)]
    pointer: Pointer,
    version: Version,
    #[serde(default)]
    owner: Option<ArcStr>,
    #[serde(default)]
    phase: Phase,
    #[serde(with = "timestamp")]
    created: SystemTime,
    #[serde(with = "timestamp")]
    updated: SystemTime,
    #[serde(default)]
    labels: Labels,
    #[serde(default)]
    annotations: Labels,
    #[serde(default)]
    finalizers: Finalizers,
}

impl Serialize for Metadata {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        MetadataRef {
            pointer: &self.pointer,
            version: self.version(),
            owner: self.owner.as_deref(),
            phase: self.phase(),
            created: self.created(),
            updated: self.updated(),
            labels: self.labels(),
            annotations: self.annotations(),
            finalizers: self.finalizers(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = MetadataRepr::deserialize(deserializer)?;
        let mut metadata = Metadata {
            pointer: repr.pointer,
            owner: repr.owner.filter(|owner| !owner.is_empty()),
            version: 0,
            packed: Packed { secs: [0; 2], nanos: [0; 2] },
            extra: Some(Box::new(Extra {
                labels: repr.labels,
                annotations: repr.annotations,
                finalizers: repr.finalizers,
            })),
        };
        metadata.set_version(repr.version);
        metadata.set_phase(repr.phase);
        metadata.set_timestamps(repr.created, repr.updated);
        metadata.compact();
        Ok(metadata)
    }
}

/// Timestamps as RFC 3339 text would need a date crate; seconds and nanoseconds
/// since the Unix epoch say the same without one.
mod timestamp {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Repr {
        seconds: u64,
        nanos: u32,
    }

    pub(super) fn serialize<S: Serializer>(time: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Repr { seconds: since.as_secs(), nanos: since.subsec_nanos() }.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SystemTime, D::Error> {
        let repr = Repr::deserialize(deserializer)?;
        if repr.nanos >= 1_000_000_000 {
            return Err(serde::de::Error::custom("timestamp nanos must be below 1e9"));
        }
        UNIX_EPOCH
            .checked_add(Duration::new(repr.seconds, repr.nanos))
            .ok_or_else(|| serde::de::Error::custom("timestamp out of range"))
    }
}
