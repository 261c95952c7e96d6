//! The resources the conformance cases write: for the state suite one typed
//! and one that only exists in encoded form; for the runtime suite integers,
//! strings and sentences.
//!
//! Covering both matters because a backend handles them differently: a typed
//! spec may stay a Rust value in an in-process backend but must be encoded by
//! a remote or durable one, while an encoded spec must come back byte for byte.

use serde::{Deserialize, Serialize};

use crate::resource::{DynamicResource, EncodedSpec, Metadata};

/// The typed spec of the conformance cases, after Go's `PathResource`.
#[derive(crate::Resource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[resource(type = "PathResources.os.cosi.dev", namespace = "default")]
pub struct PathResource {
    /// Free text; the cases store the resource's ID here, so a spec that comes
    /// back from another resource is noticed.
    pub value: String,
}

/// The type of [`encoded_resource`]s. No Rust type is registered for it, so
/// its specs only ever exist in encoded form.
pub const ENCODED_TYPE: &str = "EncodedResources.os.cosi.dev";

/// A resource of [`ENCODED_TYPE`] carrying `spec` as it is.
pub fn encoded_resource(namespace: &str, id: &str, spec: EncodedSpec) -> DynamicResource {
    DynamicResource::encoded(Metadata::new(namespace, ENCODED_TYPE, id), spec)
}

/// An integer, the input of most runtime conformance controllers (Go's `IntResource`).
#[derive(crate::Resource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[resource(type = "IntResources.test.cosi.dev", namespace = "default")]
pub struct IntResource {
    /// The value.
    pub value: i64,
}

/// A string (Go's `StrResource`).
#[derive(crate::Resource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[resource(type = "StrResources.test.cosi.dev", namespace = "default")]
pub struct StrResource {
    /// The value.
    pub value: String,
}

/// A sentence (Go's `SentenceResource`).
#[derive(crate::Resource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[resource(type = "SentenceResources.test.cosi.dev", namespace = "default")]
pub struct SentenceResource {
    /// The value.
    pub value: String,
}
