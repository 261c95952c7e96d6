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
use std::sync::Arc;

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
        Kind::new(Self::NAMESPACE, Self::TYPE)
    }

    /// A pointer to the resource `id` in the default namespace.
    fn pointer(id: impl AsRef<str>) -> Pointer {
        Pointer::new(Self::NAMESPACE, Self::TYPE, id)
    }
}

/// A (namespace, type) pair: what a list or a kind watch addresses.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind {
    namespace: Arc<str>,
    r#type: Arc<str>,
}

impl Kind {
    /// A kind; it is validated when a state receives it.
    pub fn new(namespace: impl AsRef<str>, r#type: impl AsRef<str>) -> Self {
        Kind { namespace: namespace.as_ref().into(), r#type: r#type.as_ref().into() }
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
        Pointer { namespace: Arc::clone(&self.namespace), r#type: Arc::clone(&self.r#type), id: id.as_ref().into() }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.r#type, self.namespace)
    }
}

/// A (namespace, type, ID) triple: the address of one resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Pointer {
    namespace: Arc<str>,
    #[serde(rename = "type")]
    r#type: Arc<str>,
    id: Arc<str>,
}

impl Pointer {
    /// A pointer; it is validated when a state receives it.
    pub fn new(namespace: impl AsRef<str>, r#type: impl AsRef<str>, id: impl AsRef<str>) -> Self {
        Pointer { namespace: namespace.as_ref().into(), r#type: r#type.as_ref().into(), id: id.as_ref().into() }
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
        Kind { namespace: Arc::clone(&self.namespace), r#type: Arc::clone(&self.r#type) }
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
