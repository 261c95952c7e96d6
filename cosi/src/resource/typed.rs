//! Typed resources: metadata plus a spec of a known type.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use crate::resource::{DynamicResource, Kind, Metadata, Pointer, Resource};
use crate::state::Error;

/// A resource of spec type `S`: its [`Metadata`] and an `S`, in one shared allocation.
///
/// It dereferences to the spec, so `status.hostname` reads a field and
/// `status.id()` the ID; `status.hostname = ...` edits the spec. It is a
/// [`DynamicResource`] whose spec is known to be an `S`: cloning it, reading
/// it from a state and converting it to and from `DynamicResource` share the
/// one allocation of metadata and spec; editing copies it first when it is
/// shared.
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
    /// The resource; its spec is an `S` (see `TryFrom<DynamicResource>`),
    /// and stays one: editing goes through `spec_mut`.
    resource: DynamicResource,
    spec: PhantomData<fn() -> S>,
}

impl<S: Resource> Typed<S> {
    /// A new resource `id` in the type's default namespace.
    pub fn new(id: impl AsRef<str>, spec: S) -> Self {
        Typed::new_in(S::NAMESPACE, id, spec)
    }

    /// A new resource `id` in `namespace`.
    pub fn new_in(namespace: impl AsRef<str>, id: impl AsRef<str>, spec: S) -> Self {
        let metadata = Metadata::at(Kind::of::<S>(namespace).pointer(id));
        Typed::of(DynamicResource::new(metadata, spec))
    }

    /// A resource whose spec is an `S`.
    fn of(resource: DynamicResource) -> Self {
        Typed { resource, spec: PhantomData }
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        self.resource.metadata()
    }

    /// The metadata, for editing labels, annotations, finalizers or phase;
    /// copies the resource first if it is shared.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        self.resource.metadata_mut()
    }

    /// The ID.
    pub fn id(&self) -> &str {
        self.resource.id()
    }

    /// The spec.
    pub fn spec(&self) -> &S {
        self.resource.spec().downcast().expect(TYPED_SPEC)
    }

    /// The spec, for editing; copies the resource first if it is shared.
    pub fn spec_mut(&mut self) -> &mut S {
        self.resource.spec_mut().expect(TYPED_SPEC)
    }

    /// Whether this is `resource` itself: neither edited nor decoded since it was read.
    pub(crate) fn shares_resource(&self, resource: &DynamicResource) -> bool {
        DynamicResource::ptr_eq(&self.resource, resource)
    }

    /// The resource, as a dynamic one.
    pub(crate) fn as_dynamic(&self) -> &DynamicResource {
        &self.resource
    }

    /// The resource as a state stores it.
    pub(crate) fn into_stored(self) -> DynamicResource {
        self.resource
    }

    /// Splits into metadata and spec (copies of them when the resource is shared).
    pub fn into_parts(self) -> (Metadata, S) {
        (self.metadata().clone(), self.spec().clone())
    }
}

impl<S> AsRef<Metadata> for Typed<S> {
    fn as_ref(&self) -> &Metadata {
        self.resource.metadata()
    }
}

impl<S> Clone for Typed<S> {
    /// Shares the resource: a reference count, no copy.
    fn clone(&self) -> Self {
        Typed { resource: self.resource.clone(), spec: PhantomData }
    }
}

impl<S: Resource> PartialEq for Typed<S> {
    fn eq(&self, other: &Self) -> bool {
        self.resource == other.resource
    }
}

impl<S: Resource> fmt::Debug for Typed<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Typed").field("metadata", self.metadata()).field("spec", self.spec()).finish()
    }
}

impl<S: Resource> Deref for Typed<S> {
    type Target = S;

    fn deref(&self) -> &S {
        self.spec()
    }
}

/// Editing through `DerefMut` copies the resource first when it is shared, so
/// a stored resource never changes under its readers.
impl<S: Resource> DerefMut for Typed<S> {
    fn deref_mut(&mut self) -> &mut S {
        self.spec_mut()
    }
}

impl<S: Resource> From<Typed<S>> for DynamicResource {
    fn from(typed: Typed<S>) -> Self {
        typed.resource
    }
}

impl<S: Resource> TryFrom<DynamicResource> for Typed<S> {
    type Error = Error;

    /// Shares the resource when its spec is an `S`: no copy at all. Decodes
    /// an encoded spec into a resource of its own. Fails when the type
    /// differs or the spec is neither.
    fn try_from(resource: DynamicResource) -> Result<Self, Error> {
        check_type::<S>(&resource)?;
        if resource.spec().downcast::<S>().is_some() {
            return Ok(Typed::of(resource));
        }
        let spec = resource.spec().decode::<S>().map_err(|reason| {
            Error::invalid_argument(format!("resource {}: {reason}", resource.metadata().pointer()))
        })?;
        Ok(Typed::of(DynamicResource::new(resource.metadata().clone(), spec)))
    }
}

impl<S: Resource> TryFrom<&DynamicResource> for Typed<S> {
    type Error = Error;

    /// Shares the resource, as `TryFrom<DynamicResource>` does.
    fn try_from(resource: &DynamicResource) -> Result<Self, Error> {
        Typed::try_from(resource.clone())
    }
}

fn check_type<S: Resource>(resource: &DynamicResource) -> Result<(), Error> {
    let metadata = resource.metadata();
    // A resource stored by its type's collection borrows the type's names:
    // a pointer comparison, not a comparison of the names.
    if !metadata.pointer().kind_ref().borrows_names_of::<S>() && metadata.r#type() != S::TYPE {
        return Err(Error::invalid_argument(format!(
            "resource {} has type {:?}, expected {:?}",
            metadata.pointer(),
            metadata.r#type(),
            S::TYPE
        )));
    }
    Ok(())
}

/// Why a `Typed<S>` can read its resource's spec as an `S`: it is built only
/// from a resource whose spec is an `S` (see `TryFrom<DynamicResource>`), and
/// only `spec_mut` edits the spec, in place.
const TYPED_SPEC: &str = "a Typed<S> holds a resource whose spec is an S";

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
