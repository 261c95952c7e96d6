//! Resources: strict metadata plus an opaque spec.
//!
//! A spec type becomes a resource with `#[derive(Resource)]`; [`Typed`] pairs it
//! with its [`Metadata`]. Code that does not know the type (transports, storage,
//! command-line tools) works with [`DynamicResource`] instead.

mod definition;
mod dynamic;
mod metadata;
mod query;
mod typed;

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use definition::{DefinitionOptions, PrintColumn, ResourceDefinition, Sensitivity};
pub use dynamic::{DynamicResource, EncodedSpec, Spec};
pub use metadata::{Finalizers, Labels, Metadata, ParseError, Phase, Version};
pub use query::{IdQuery, LabelOp, LabelQuery, LabelTerm};
pub use typed::{At, Typed};

pub(crate) use cosi_naming as naming;
pub(crate) use naming::validate_name;

/// The longest namespace, type or ID a state accepts, in bytes.
pub const MAX_NAME_LEN: usize = naming::MAX_NAME_LEN;

/// A resource spec: the data of one resource type.
///
/// Implement it with `#[derive(Resource)]`, which also checks the type name and
/// the attributes at compile time:
///
/// ```
/// use cosi::prelude::*;
///
/// #[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
/// #[resource(type = "HostnameStatuses.net.example.org", namespace = "network", aliases = ["hostname"])]
/// pub struct HostnameStatus {
///     pub hostname: String,
/// }
///
/// assert_eq!(HostnameStatus::TYPE, "HostnameStatuses.net.example.org");
/// assert_eq!(HostnameStatus::definition().display_type, "HostnameStatus");
/// ```
pub trait Resource: Clone + PartialEq + fmt::Debug + Send + Sync + Serialize + DeserializeOwned + 'static {
    /// The resource type, `PluralCamelCase.dotted.lowercase.suffix`.
    const TYPE: &'static str;

    /// The namespace resources of this type live in unless a caller names another.
    const NAMESPACE: &'static str;

    /// Whether the definition is sensitive: read-only clients do not see such resources.
    const SENSITIVE: bool;

    /// The definition published in the `meta` namespace: display type, aliases, columns.
    fn definition() -> ResourceDefinition;

    /// The kind in the default namespace.
    fn kind() -> Kind {
        Kind { namespace: Name::new_static(Self::NAMESPACE), r#type: Name::new_static(Self::TYPE) }
    }

    /// A pointer to the resource `id` in the default namespace.
    fn pointer(id: impl AsRef<str>) -> Pointer {
        Pointer {
            namespace: Name::new_static(Self::NAMESPACE),
            r#type: Name::new_static(Self::TYPE),
            id: Name::new(id),
        }
    }
}

/// A namespace, type or ID as identities hold it: a name known at compile
/// time is borrowed, a short one (up to 23 bytes, most IDs) is stored inline,
/// and a longer one is shared behind an `Arc`. So building the pointer of a
/// typed resource allocates nothing, cloning any identity allocates nothing,
/// and a stored resource's namespace and type are its collection's.
type Name = smol_str::SmolStr;

/// A (namespace, type) pair: what a list or a kind watch addresses.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// let kind = Kind::new("network", "HostnameSpecs.net.example.org");
/// assert_eq!(kind.namespace(), "network");
/// assert_eq!(HostnameSpec::kind(), kind);
/// assert_eq!(Typed::new("default", HostnameSpec::default()).metadata().kind(), kind);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind {
    namespace: Name,
    r#type: Name,
}

impl Kind {
    /// A kind; it is validated when a state receives it.
    pub fn new(namespace: impl AsRef<str>, r#type: impl AsRef<str>) -> Self {
        Kind { namespace: Name::new(namespace), r#type: Name::new(r#type) }
    }

    /// A kind of a type known at compile time.
    pub(crate) fn typed(namespace: impl AsRef<str>, r#type: &'static str) -> Self {
        Kind { namespace: Name::new(namespace), r#type: Name::new_static(r#type) }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The type.
    pub fn r#type(&self) -> &str {
        &self.r#type
    }

    /// The resource `id` of this kind.
    pub fn pointer(&self, id: impl AsRef<str>) -> Pointer {
        Pointer { namespace: self.namespace.clone(), r#type: self.r#type.clone(), id: Name::new(id) }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.r#type, self.namespace)
    }
}

/// A (namespace, type, ID) triple: the address of one resource.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// let pointer = Pointer::new("network", "HostnameSpecs.net.example.org", "default");
/// assert_eq!(pointer.id(), "default");
/// assert_eq!(HostnameSpec::pointer("default"), pointer);
/// assert_eq!(Typed::new("default", HostnameSpec::default()).metadata().pointer(), &pointer);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Pointer {
    namespace: Name,
    #[serde(rename = "type")]
    r#type: Name,
    id: Name,
}

impl Pointer {
    /// A pointer; it is validated when a state receives it.
    pub fn new(namespace: impl AsRef<str>, r#type: impl AsRef<str>, id: impl AsRef<str>) -> Self {
        Pointer { namespace: Name::new(namespace), r#type: Name::new(r#type), id: Name::new(id) }
    }

    /// A pointer of a type known at compile time.
    pub(crate) fn typed(namespace: impl AsRef<str>, r#type: &'static str, id: impl AsRef<str>) -> Self {
        Pointer { namespace: Name::new(namespace), r#type: Name::new_static(r#type), id: Name::new(id) }
    }

    /// Shares the namespace and type of `kind`, which must be this pointer's
    /// (the state's collections do this, so their resources share one copy).
    pub(crate) fn share_kind(&mut self, kind: &Kind) {
        debug_assert!(self.namespace == kind.namespace && self.r#type == kind.r#type);
        share(&mut self.namespace, &kind.namespace);
        share(&mut self.r#type, &kind.r#type);
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The type.
    pub fn r#type(&self) -> &str {
        &self.r#type
    }

    /// The ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The (namespace, type) part.
    pub fn kind(&self) -> Kind {
        Kind { namespace: self.namespace.clone(), r#type: self.r#type.clone() }
    }
}

/// Makes `name` share `shared`'s allocation when it has one of its own; a
/// name stored inline or known at compile time costs nothing to keep.
fn share(name: &mut Name, shared: &Name) {
    if name.is_heap_allocated() && name.as_ptr() != shared.as_ptr() {
        *name = shared.clone();
    }
}

impl fmt::Display for Pointer {
    /// `type(namespace/id)`, the form error messages use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}/{})", self.r#type, self.namespace, self.id)
    }
}

impl Kind {
    /// Checks the namespace and type as a state receives them; the error says what is wrong.
    ///
    /// Every [`State`](crate::State) backend calls this before it touches storage.
    pub fn validate(&self) -> Result<(), String> {
        validate_name("namespace", &self.namespace)?;
        validate_name("type", &self.r#type)
    }
}

impl Pointer {
    /// Checks the namespace, type and ID as a state receives them; the error says what is wrong.
    ///
    /// Every [`State`](crate::State) backend calls this before it touches storage.
    pub fn validate(&self) -> Result<(), String> {
        validate_name("namespace", &self.namespace)?;
        validate_name("type", &self.r#type)?;
        validate_name("id", &self.id)
    }
}

/// Whether `resource` matches any of `labels` (all when empty) and `id` (all when `None`).
pub(crate) fn matches_queries(labels: &[LabelQuery], id: Option<&IdQuery>, resource: &DynamicResource) -> bool {
    let metadata = resource.metadata();
    id.is_none_or(|query| query.matches(metadata.id()))
        && (labels.is_empty() || labels.iter().any(|query| query.matches(metadata.labels())))
}
