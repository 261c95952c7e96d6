//! Typed resources: metadata plus a spec of a known type.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::resource::{DynamicResource, Metadata, Resource, Spec};
use crate::state::Error;

/// A resource of spec type `S`: its [`Metadata`] and a shared, immutable `S`.
///
/// It dereferences to the spec, so `status.hostname` reads a field and
/// `status.id()` the ID; `status.hostname = ...` edits a copy of the spec. Cloning it, reading it from a state and converting it
/// to and from [`DynamicResource`] share the spec behind an `Arc`; only
/// [`spec_mut`](Typed::spec_mut) on a shared spec copies it.
pub struct Typed<S> {
    metadata: Metadata,
    spec: Arc<S>,
}

impl<S: Resource> Typed<S> {
    /// A new resource `id` in the type's default namespace.
    pub fn new(id: impl Into<String>, spec: S) -> Self {
        Typed::new_in(S::NAMESPACE, id, spec)
    }

    /// A new resource `id` in `namespace`.
    pub fn new_in(namespace: impl Into<String>, id: impl Into<String>, spec: S) -> Self {
        Typed { metadata: Metadata::new(namespace, S::TYPE, id), spec: Arc::new(spec) }
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The metadata, for editing labels, annotations, finalizers or phase.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The ID.
    pub fn id(&self) -> &str {
        self.metadata.id()
    }

    /// The spec.
    pub fn spec(&self) -> &S {
        &self.spec
    }

    /// The spec, shared.
    pub fn spec_arc(&self) -> &Arc<S> {
        &self.spec
    }

    /// The spec, for editing; copies it first if it is shared.
    pub fn spec_mut(&mut self) -> &mut S {
        Arc::make_mut(&mut self.spec)
    }

    /// Splits into metadata and spec.
    pub fn into_parts(self) -> (Metadata, Arc<S>) {
        (self.metadata, self.spec)
    }
}

impl<S> Clone for Typed<S> {
    fn clone(&self) -> Self {
        Typed { metadata: self.metadata.clone(), spec: Arc::clone(&self.spec) }
    }
}

impl<S: PartialEq> PartialEq for Typed<S> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata && (Arc::ptr_eq(&self.spec, &other.spec) || self.spec == other.spec)
    }
}

impl<S: fmt::Debug> fmt::Debug for Typed<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Typed").field("metadata", &self.metadata).field("spec", &self.spec).finish()
    }
}

impl<S> Deref for Typed<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.spec
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
        DynamicResource::new(typed.metadata, Spec::from_arc(typed.spec))
    }
}

impl<S: Resource> TryFrom<DynamicResource> for Typed<S> {
    type Error = Error;

    /// Fails when the type differs or the spec is not an `S`.
    fn try_from(resource: DynamicResource) -> Result<Self, Error> {
        let spec = typed_spec::<S>(&resource)?;
        Ok(Typed { metadata: resource.metadata, spec })
    }
}

impl<S: Resource> TryFrom<&DynamicResource> for Typed<S> {
    type Error = Error;

    /// Shares the spec and copies the metadata.
    fn try_from(resource: &DynamicResource) -> Result<Self, Error> {
        let spec = typed_spec::<S>(resource)?;
        Ok(Typed { metadata: resource.metadata.clone(), spec })
    }
}

impl<S: Resource> TryFrom<Arc<DynamicResource>> for Typed<S> {
    type Error = Error;

    /// Takes the metadata without copying when this was the last reference.
    fn try_from(resource: Arc<DynamicResource>) -> Result<Self, Error> {
        let spec = typed_spec::<S>(&resource)?;
        let metadata = Arc::try_unwrap(resource).map_or_else(|shared| shared.metadata.clone(), |owned| owned.metadata);
        Ok(Typed { metadata, spec })
    }
}

fn typed_spec<S: Resource>(resource: &DynamicResource) -> Result<Arc<S>, Error> {
    let metadata = resource.metadata();
    if metadata.r#type() != S::TYPE {
        return Err(Error::invalid_argument(format!(
            "resource {} has type {:?}, expected {:?}",
            metadata.pointer(),
            metadata.r#type(),
            S::TYPE
        )));
    }
    resource
        .spec
        .to_typed::<S>()
        .map_err(|reason| Error::invalid_argument(format!("resource {}: {reason}", metadata.pointer())))
}
