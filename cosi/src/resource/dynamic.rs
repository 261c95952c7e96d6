//! Resources whose type is known only at run time.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::resource::{Metadata, Pointer, Resource, from_yaml};

/// A resource whose spec type is not known statically: metadata plus an opaque spec.
///
/// States store and stream these. The metadata and the spec live in one
/// shared allocation: cloning a `DynamicResource` takes a reference count,
/// and editing one ([`metadata_mut`](Self::metadata_mut)) copies it first
/// when it is shared, so a stored resource never changes under its readers.
/// Typed code converts with [`Typed::try_from`](crate::Typed) and
/// [`From<Typed<S>>`](crate::Typed), which share the allocation and copy
/// nothing.
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
/// assert_eq!(dynamic.spec().downcast::<HostnameSpec>().map(|spec| spec.hostname.as_str()), Some("talos"));
///
/// let typed = Typed::<HostnameSpec>::try_from(dynamic)?;
/// assert_eq!(typed.hostname, "talos");
/// # Ok::<(), cosi::Error>(())
/// ```
#[derive(Clone)]
pub struct DynamicResource(Arc<Stored<dyn ErasedSpec>>);

/// The one allocation of a resource: its metadata, and its spec in place
/// (one allocation per resource, not one for the resource and one for the
/// spec).
struct Stored<S: ?Sized> {
    metadata: Metadata,
    spec: S,
}

/// The spec of a resource that has none: a tombstone's.
struct NoSpec;

impl DynamicResource {
    /// A resource with the given metadata and typed spec.
    pub fn new<S: Resource>(metadata: Metadata, spec: S) -> Self {
        DynamicResource(Arc::new(Stored { metadata, spec }))
    }

    /// A resource whose spec arrived encoded (from another client, a file or
    /// a store) and is kept byte for byte.
    pub fn encoded(metadata: Metadata, spec: EncodedSpec) -> Self {
        DynamicResource(Arc::new(Stored { metadata, spec }))
    }

    /// A resource with no spec at all.
    pub fn without_spec(metadata: Metadata) -> Self {
        DynamicResource(Arc::new(Stored { metadata, spec: NoSpec }))
    }

    /// The marker of a resource that does not exist (any more): undefined version, no spec.
    ///
    /// The wire form (and Go COSI's) of a `Destroyed` event whose resource is
    /// unknown: [`Event::Destroyed`](crate::state::Event::Destroyed) with no resource.
    pub fn tombstone(pointer: &Pointer) -> Self {
        DynamicResource::without_spec(Metadata::new(pointer.namespace(), pointer.r#type(), pointer.id()))
    }

    /// Whether this is a tombstone rather than a stored resource.
    pub fn is_tombstone(&self) -> bool {
        self.metadata().version().is_undefined() && self.spec().is_empty()
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.0.metadata
    }

    /// The metadata, for editing; copies the resource first if it is shared.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.unique().metadata
    }

    /// The ID.
    pub fn id(&self) -> &str {
        self.0.metadata.id()
    }

    /// The spec.
    pub fn spec(&self) -> Spec<'_> {
        Spec(&self.0.spec)
    }

    /// A resource of `metadata` and a copy of this one's spec.
    #[must_use]
    pub fn with_metadata(&self, metadata: Metadata) -> DynamicResource {
        self.0.spec.copy_with(metadata)
    }

    /// Whether `a` and `b` are one allocation: the same stored resource.
    pub fn ptr_eq(a: &DynamicResource, b: &DynamicResource) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The spec as an `S`, for editing, if it is one; copies the resource
    /// first if it is shared.
    pub(crate) fn spec_mut<S: Resource>(&mut self) -> Option<&mut S> {
        (&mut self.unique().spec as &mut dyn Any).downcast_mut::<S>()
    }

    /// Whether nobody else holds this resource. A plain load: a resource
    /// read from a state is shared, which needs no atomic write to tell.
    fn is_unique(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }

    /// The resource, made this handle's alone: copied (metadata and spec)
    /// when it is shared.
    fn unique(&mut self) -> &mut Stored<dyn ErasedSpec> {
        // No `Weak` of a resource is ever made, so a count of one means that
        // `get_mut` succeeds; reading it first spares a shared resource the
        // atomic write `get_mut` makes.
        if !self.is_unique() {
            *self = self.with_metadata(self.metadata().clone());
        }
        Arc::get_mut(&mut self.0).expect(UNIQUE)
    }
}

/// Why `DynamicResource::unique` can expect `get_mut` to succeed.
const UNIQUE: &str = "a resource with one strong count and no weak ones is unique";

impl AsRef<Metadata> for DynamicResource {
    fn as_ref(&self) -> &Metadata {
        self.metadata()
    }
}

impl fmt::Debug for DynamicResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicResource").field("metadata", self.metadata()).field("spec", &self.spec()).finish()
    }
}

impl PartialEq for DynamicResource {
    fn eq(&self, other: &Self) -> bool {
        DynamicResource::ptr_eq(self, other) || (self.metadata() == other.metadata() && self.spec() == other.spec())
    }
}

/// The spec of a [`DynamicResource`], borrowed from it: opaque to the state.
///
/// It is one of three things: empty (tombstones), a typed value written by Rust
/// code, or an encoded value that arrived from elsewhere (another client, a file,
/// a store) and is kept byte for byte.
#[derive(Clone, Copy)]
pub struct Spec<'a>(&'a dyn ErasedSpec);

/// A spec kept in its encoded form, exactly as it was received.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedSpec {
    /// The protobuf encoding, as COSI's wire format carries it.
    pub proto: Vec<u8>,
    /// The YAML rendering, when the writer sent one.
    pub yaml: Option<String>,
}

impl<'a> Spec<'a> {
    /// Whether the resource has no spec (a tombstone).
    pub fn is_empty(self) -> bool {
        (self.0 as &dyn Any).is::<NoSpec>()
    }

    /// The typed value, if this spec is an `S`.
    pub fn downcast<S: Resource>(self) -> Option<&'a S> {
        (self.0 as &dyn Any).downcast_ref::<S>()
    }

    /// The encoded form, if the spec arrived encoded.
    pub fn as_encoded(self) -> Option<&'a EncodedSpec> {
        (self.0 as &dyn Any).downcast_ref::<EncodedSpec>()
    }

    /// The typed value as something any serde serializer can write, if the spec is typed.
    pub fn as_serialize(self) -> Option<&'a dyn erased_serde::Serialize> {
        self.0.as_serialize()
    }

    /// Decodes an encoded spec as an `S` from its YAML text.
    pub(crate) fn decode<S: Resource>(self) -> Result<S, String> {
        match self.as_encoded() {
            Some(EncodedSpec { yaml: Some(text), .. }) => {
                from_yaml(text).map_err(|err| format!("cannot decode the spec as {}: {err}", S::TYPE))
            }
            Some(EncodedSpec { yaml: None, .. }) => {
                Err(format!("the spec of this {} has no text form to decode", S::TYPE))
            }
            None if self.is_empty() => Err("the resource has no spec".to_owned()),
            None => Err(format!("spec is not a {}", std::any::type_name::<S>())),
        }
    }
}

impl PartialEq for Spec<'_> {
    /// Typed specs compare by value, encoded specs by bytes; a typed spec never
    /// equals an encoded one, since comparing them would mean choosing an encoding.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self.0, other.0) || self.0.eq_dyn(other.0 as &dyn Any)
    }
}

impl fmt::Debug for Spec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_dyn(f)
    }
}

/// What the state needs of a spec, typed, encoded or none, with its type
/// erased: the spec sits unsized at the end of its resource's allocation.
trait ErasedSpec: Any + Send + Sync {
    fn eq_dyn(&self, other: &dyn Any) -> bool;
    fn fmt_dyn(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// `None` for an encoded spec, which is written as it arrived, and for none.
    fn as_serialize(&self) -> Option<&dyn erased_serde::Serialize>;
    /// A new resource of `metadata` and a copy of this spec.
    fn copy_with(&self, metadata: Metadata) -> DynamicResource;
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

    fn copy_with(&self, metadata: Metadata) -> DynamicResource {
        DynamicResource::new(metadata, self.clone())
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

    fn copy_with(&self, metadata: Metadata) -> DynamicResource {
        DynamicResource::encoded(metadata, self.clone())
    }
}

impl ErasedSpec for NoSpec {
    fn eq_dyn(&self, other: &dyn Any) -> bool {
        other.is::<NoSpec>()
    }

    fn fmt_dyn(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Spec::Empty")
    }

    fn as_serialize(&self) -> Option<&dyn erased_serde::Serialize> {
        None
    }

    fn copy_with(&self, metadata: Metadata) -> DynamicResource {
        DynamicResource::without_spec(metadata)
    }
}
