//! Typed resources: metadata plus a spec of a known type.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::resource::{DynamicResource, Kind, Metadata, Pointer, Resource, Spec};
use crate::state::Error;

/// A resource of spec type `S`: its [`Metadata`] and a shared, immutable `S`.
///
/// It dereferences to the spec, so `status.hostname` reads a field and
/// `status.id()` the ID; `status.hostname = ...` edits a copy of the spec.
/// Cloning it, reading it from a state and converting it to and from
/// [`DynamicResource`] share the stored resource and its spec behind `Arc`s;
/// only editing copies, and only what is edited.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// let mut spec = Typed::new("default", HostnameSpec { hostname: "talos".into() });
/// // It reads as its spec, and edits as one.
/// assert_eq!(spec.hostname, "talos");
/// spec.hostname = "node-1".into();
/// assert_eq!(spec.spec().hostname, "node-1");
///
/// let layer = Typed::new_in("network-config", "configuration/hostname", HostnameSpec::default());
/// assert_eq!(layer.metadata().namespace(), "network-config");
/// ```
pub struct Typed<S> {
    /// The resource as read. Its metadata is this resource's; so is its spec
    /// while `spec` is `None`.
    resource: Arc<DynamicResource>,
    /// The spec when it is not the resource's own (a new resource's, an
    /// edited copy, or one decoded from an encoded spec). `None` reads the
    /// resource's, so a read from a state takes no second count.
    spec: Option<Arc<S>>,
}

impl<S: Resource> Typed<S> {
    /// A new resource `id` in the type's default namespace.
    pub fn new(id: impl AsRef<str>, spec: S) -> Self {
        Typed::new_in(S::NAMESPACE, id, spec)
    }

    /// A new resource `id` in `namespace`.
    pub fn new_in(namespace: impl AsRef<str>, id: impl AsRef<str>, spec: S) -> Self {
        let metadata = Metadata::at(Kind::of::<S>(namespace).pointer(id));
        Typed { resource: Arc::new(DynamicResource::new(metadata, Spec::empty())), spec: Some(Arc::new(spec)) }
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.resource.metadata
    }

    /// The metadata, for editing labels, annotations, finalizers or phase.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut Arc::make_mut(&mut self.resource).metadata
    }

    /// The ID.
    pub fn id(&self) -> &str {
        self.resource.metadata.id()
    }

    /// The spec.
    pub fn spec(&self) -> &S {
        match &self.spec {
            Some(spec) => spec,
            None => self.resource.spec.typed_ref().expect(STORED_SPEC),
        }
    }

    /// The spec, shared: the stored resource's own, until it is edited.
    pub fn spec_arc(&self) -> Arc<S> {
        match &self.spec {
            Some(spec) => Arc::clone(spec),
            None => self.resource.spec.downcast().expect(STORED_SPEC),
        }
    }

    /// The spec, for editing; copies it first if it is shared.
    pub fn spec_mut(&mut self) -> &mut S {
        let spec = match self.spec.take() {
            Some(spec) => spec,
            // Read from the resource, as `spec` is `None`.
            None => Arc::new(self.spec().clone()),
        };
        Arc::make_mut(self.spec.insert(spec))
    }

    /// Whether the spec was set apart from the resource's (new, edited or decoded).
    pub(crate) fn spec_is_own(&self) -> bool {
        self.spec.is_some()
    }

    /// Whether this is `resource` itself, its metadata not edited since it was read.
    pub(crate) fn shares_resource(&self, resource: &Arc<DynamicResource>) -> bool {
        Arc::ptr_eq(&self.resource, resource)
    }

    /// The resource as a state stores it: in the allocation this one holds
    /// when nobody else holds it, else in a copy.
    pub(crate) fn into_stored(self) -> Arc<DynamicResource> {
        let Typed { mut resource, spec } = self;
        // A count above one (a resource read from a state, which holds it
        // too) is read without the atomic write `get_mut` makes.
        let unique = match Arc::strong_count(&resource) {
            1 => Arc::get_mut(&mut resource),
            _ => None,
        };
        match (unique, spec) {
            (Some(unique), Some(spec)) => {
                unique.spec = Spec::from_arc(spec);
                resource
            }
            (Some(_), None) => resource,
            // Shared: a new resource of the metadata and the spec, without
            // the old spec's copy in between.
            (None, spec) => {
                let spec = spec.map_or_else(|| resource.spec.clone(), Spec::from_arc);
                Arc::new(DynamicResource::new(resource.metadata.clone(), spec))
            }
        }
    }

    /// Splits into metadata and spec.
    pub fn into_parts(self) -> (Metadata, Arc<S>) {
        let spec = self.spec_arc();
        let metadata =
            Arc::try_unwrap(self.resource).map_or_else(|shared| shared.metadata.clone(), |owned| owned.metadata);
        (metadata, spec)
    }
}

impl<S> Clone for Typed<S> {
    fn clone(&self) -> Self {
        Typed { resource: Arc::clone(&self.resource), spec: self.spec.clone() }
    }
}

impl<S: Resource> PartialEq for Typed<S> {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.spec(), other.spec());
        self.resource.metadata == other.resource.metadata && (std::ptr::eq(a, b) || a == b)
    }
}

impl<S: Resource> fmt::Debug for Typed<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Typed").field("metadata", &self.resource.metadata).field("spec", self.spec()).finish()
    }
}

impl<S: Resource> Deref for Typed<S> {
    type Target = S;

    fn deref(&self) -> &S {
        self.spec()
    }
}

/// Editing through `DerefMut` copies the spec first when it is shared, so a
/// stored resource never changes under its readers.
impl<S: Resource> DerefMut for Typed<S> {
    fn deref_mut(&mut self) -> &mut S {
        self.spec_mut()
    }
}

impl<S: Resource> From<Typed<S>> for DynamicResource {
    fn from(typed: Typed<S>) -> Self {
        let (metadata, spec) = typed.into_parts();
        DynamicResource::new(metadata, Spec::from_arc(spec))
    }
}

impl<S: Resource> TryFrom<Arc<DynamicResource>> for Typed<S> {
    type Error = Error;

    /// Shares the resource: no copy at all. Fails when the type differs or the spec is not an `S`.
    fn try_from(resource: Arc<DynamicResource>) -> Result<Self, Error> {
        check_type::<S>(&resource)?;
        // A typed spec is read from the resource; an encoded one is decoded once.
        if resource.spec.typed_ref::<S>().is_some() {
            return Ok(Typed { resource, spec: None });
        }
        let spec = resource
            .spec
            .to_typed::<S>()
            .map_err(|reason| Error::invalid_argument(format!("resource {}: {reason}", resource.metadata.pointer())))?;
        Ok(Typed { resource, spec: Some(spec) })
    }
}

impl<S: Resource> TryFrom<DynamicResource> for Typed<S> {
    type Error = Error;

    /// Fails when the type differs or the spec is not an `S`.
    fn try_from(resource: DynamicResource) -> Result<Self, Error> {
        Typed::try_from(Arc::new(resource))
    }
}

impl<S: Resource> TryFrom<&DynamicResource> for Typed<S> {
    type Error = Error;

    /// Shares the spec and copies the metadata.
    fn try_from(resource: &DynamicResource) -> Result<Self, Error> {
        Typed::try_from(Arc::new(resource.clone()))
    }
}

fn check_type<S: Resource>(resource: &DynamicResource) -> Result<(), Error> {
    let metadata = resource.metadata();
    if metadata.r#type() != S::TYPE {
        return Err(Error::invalid_argument(format!(
            "resource {} has type {:?}, expected {:?}",
            metadata.pointer(),
            metadata.r#type(),
            S::TYPE
        )));
    }
    Ok(())
}

/// Why a `Typed<S>` without a spec of its own can read one from its
/// resource: it is built so only from a resource whose spec is an `S` (see
/// `TryFrom<Arc<DynamicResource>>`), and its resource's spec never changes
/// after (editing the metadata copies the resource, spec and all).
const STORED_SPEC: &str = "a Typed<S> without a spec of its own holds a resource whose spec is an S";

/// Where a resource of type `T` is: an ID (in `T`'s default namespace), a
/// [`Pointer`], or a resource read before.
pub trait At<T> {
    /// The pointer.
    fn pointer(self) -> Pointer;
}

impl<T: Resource> At<T> for &str {
    fn pointer(self) -> Pointer {
        T::pointer(self)
    }
}

impl<T: Resource> At<T> for &String {
    fn pointer(self) -> Pointer {
        T::pointer(self)
    }
}

impl<T: Resource> At<T> for &Pointer {
    fn pointer(self) -> Pointer {
        self.clone()
    }
}

impl<T: Resource> At<T> for Pointer {
    fn pointer(self) -> Pointer {
        self
    }
}

impl<T: Resource> At<T> for &Typed<T> {
    fn pointer(self) -> Pointer {
        self.metadata().pointer().clone()
    }
}
