//! Resources whose type is known only at run time.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::resource::{Metadata, Pointer, Resource};

/// A resource whose spec type is not known statically: metadata plus an opaque [`Spec`].
///
/// States store and stream these. Typed code converts with [`Typed::try_from`](crate::Typed)
/// and [`From<Typed<S>>`](crate::Typed), which move `Arc`s and never copy a spec.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// let typed = Typed::new("default", HostnameSpec { hostname: "talos".into() });
/// let dynamic = DynamicResource::from(typed);
/// assert_eq!(dynamic.metadata().r#type(), "HostnameSpecs.net.example.org");
///
/// let typed = Typed::<HostnameSpec>::try_from(dynamic)?;
/// assert_eq!(typed.hostname, "talos");
/// # Ok::<(), cosi::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicResource {
    /// The metadata.
    pub metadata: Metadata,
    /// The spec.
    pub spec: Spec,
}

impl DynamicResource {
    /// A resource with the given metadata and spec.
    pub fn new(metadata: Metadata, spec: Spec) -> Self {
        DynamicResource { metadata, spec }
    }

    /// The marker of a resource that does not exist (any more): undefined version, no spec.
    ///
    /// A single-resource watch starts with a `Destroyed` event carrying one when
    /// the resource is absent.
    pub fn tombstone(pointer: &Pointer) -> Self {
        DynamicResource {
            metadata: Metadata::new(pointer.namespace(), pointer.r#type(), pointer.id()),
            spec: Spec::empty(),
        }
    }

    /// Whether this is a tombstone rather than a stored resource.
    pub fn is_tombstone(&self) -> bool {
        self.metadata.version().is_undefined() && self.spec.is_empty()
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The ID.
    pub fn id(&self) -> &str {
        self.metadata.id()
    }
}

/// The spec of a [`DynamicResource`]: opaque to the state, shared, never copied.
///
/// It is one of three things: empty (tombstones), a typed value written by Rust
/// code, or an encoded value that arrived from elsewhere (another client, a file,
/// a store) and is kept byte for byte.
#[derive(Clone)]
pub struct Spec(Option<Arc<dyn ErasedSpec>>);

/// A spec kept in its encoded form, exactly as it was received.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedSpec {
    /// The protobuf encoding, as COSI's wire format carries it.
    pub proto: Vec<u8>,
    /// The YAML rendering, when the writer sent one.
    pub yaml: Option<String>,
}

impl Spec {
    /// No spec: the spec of a tombstone.
    pub fn empty() -> Self {
        Spec(None)
    }

    /// A typed spec.
    pub fn typed<S: Resource>(spec: S) -> Self {
        Spec::from_arc(Arc::new(spec))
    }

    /// A typed spec that is already shared.
    pub fn from_arc<S: Resource>(spec: Arc<S>) -> Self {
        Spec(Some(spec))
    }

    /// A spec in encoded form.
    pub fn encoded(spec: EncodedSpec) -> Self {
        Spec(Some(Arc::new(spec)))
    }

    /// Whether this is the empty spec.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The typed value, if this spec holds an `S`; shares it, never copies.
    pub fn downcast<S: Resource>(&self) -> Option<Arc<S>> {
        self.typed_ref::<S>()?;
        let spec = Arc::clone(self.0.as_ref()?);
        (spec as Arc<dyn Any + Send + Sync>).downcast::<S>().ok()
    }

    /// The typed value, if this spec holds an `S`, by reference.
    pub(crate) fn typed_ref<S: Resource>(&self) -> Option<&S> {
        (&**self.0.as_ref()? as &dyn Any).downcast_ref::<S>()
    }

    /// The encoded form, if the spec arrived encoded.
    pub fn as_encoded(&self) -> Option<&EncodedSpec> {
        (&**self.0.as_ref()? as &dyn Any).downcast_ref::<EncodedSpec>()
    }

    /// The typed value as something any serde serializer can write, if the spec is typed.
    pub fn as_serialize(&self) -> Option<&dyn erased_serde::Serialize> {
        self.0.as_ref()?.as_serialize()
    }

    /// Converts to an `S`: shares a typed spec, decodes an encoded one from its YAML text.
    pub(crate) fn to_typed<S: Resource>(&self) -> Result<Arc<S>, String> {
        if let Some(typed) = self.downcast::<S>() {
            return Ok(typed);
        }
        match self.as_encoded() {
            Some(EncodedSpec { yaml: Some(text), .. }) => serde_yaml_ng::from_str(text)
                .map(Arc::new)
                .map_err(|err| format!("cannot decode the spec as {}: {err}", S::TYPE)),
            Some(EncodedSpec { yaml: None, .. }) => {
                Err(format!("the spec of this {} has no text form to decode", S::TYPE))
            }
            None if self.is_empty() => Err("the resource has no spec".to_owned()),
            None => Err(format!("spec is not a {}", std::any::type_name::<S>())),
        }
    }
}

impl PartialEq for Spec {
    /// Typed specs compare by value, encoded specs by bytes; a typed spec never
    /// equals an encoded one, since comparing them would mean choosing an encoding.
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a.eq_dyn(&**b as &dyn Any),
            _ => false,
        }
    }
}

impl fmt::Debug for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("Spec::Empty"),
            Some(spec) => spec.fmt_dyn(f),
        }
    }
}

/// What the state needs of a spec, typed or encoded, with its type erased.
/// An encoded spec is one more such value (not a variant of its own), so a
/// spec is one nullable pointer: 16 bytes in every stored resource, not 24.
trait ErasedSpec: Any + Send + Sync {
    fn eq_dyn(&self, other: &dyn Any) -> bool;
    fn fmt_dyn(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// `None` for an encoded spec, which is written as it arrived.
    fn as_serialize(&self) -> Option<&dyn erased_serde::Serialize>;
}

impl<S: Resource> ErasedSpec for S {
    fn eq_dyn(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<S>() == Some(self)
    }

    fn fmt_dyn(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }

    fn as_serialize(&self) -> Option<&dyn erased_serde::Serialize> {
        Some(self)
    }
}

/// An encoded spec equals only an encoded spec of the same bytes: comparing
/// it with a typed one would mean choosing an encoding.
impl ErasedSpec for EncodedSpec {
    fn eq_dyn(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<EncodedSpec>() == Some(self)
    }

    fn fmt_dyn(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }

    fn as_serialize(&self) -> Option<&dyn erased_serde::Serialize> {
        None
    }
}
