//! Resources: strict metadata plus an opaque spec.
//!
//! A spec type becomes a resource with `#[derive(Resource)]`; [`Typed`] pairs it
//! with its [`Metadata`]. Code that does not know the type (transports, storage,
//! command-line tools) works with [`DynamicResource`] instead.
//!
//! A stored resource is immutable, shared and one allocation: a
//! [`DynamicResource`] is an `Arc` of its metadata with the spec in place
//! after it, and a [`Typed<S>`] is the same allocation with its spec known to
//! be an `S`. So reads and typed/dynamic conversions move one `Arc` and copy
//! nothing, and editing copies the whole resource first only when it is
//! shared. Identities are as cheap: a [`Kind`] is one pointer to its names
//! (a resource type's, borrowed, or names given at run time, shared), and a
//! [`Pointer`] its kind and an ID held inline when short, so cloning one
//! allocates nothing. [`Metadata`] keeps what most resources lack behind one
//! box, and its size is checked at compile time.

mod definition;
mod dynamic;
mod metadata;
mod query;
mod typed;
mod yaml;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use definition::{DefinitionOptions, PrintColumn, Readable, ResourceDefinition, Sensitivity, readable};
pub use dynamic::{DynamicResource, EncodedSpec, Spec};
pub use metadata::{Finalizers, Labels, Metadata, ParseError, Phase, Version};
pub use query::{IdQuery, LabelOp, LabelQuery, LabelTerm};
pub use typed::{At, Typed};
pub use yaml::{YamlError, from_yaml};

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

    /// The type's names, one copy per program. `#[derive(Resource)]` keeps
    /// them in a `static` with a [`TypeSlot`], which lets the memory state
    /// find the type's collection without a lock; this default has no slot.
    #[doc(hidden)]
    fn type_names() -> &'static TypeNames {
        const { &TypeNames::new(Self::NAMESPACE, Self::TYPE, None) }
    }

    /// The kind in the default namespace.
    fn kind() -> Kind {
        Kind::of::<Self>(Self::NAMESPACE)
    }

    /// A pointer to the resource `id` in the default namespace.
    fn pointer(id: impl AsRef<str>) -> Pointer {
        Pointer { kind: Self::kind(), id: Name::new(id) }
    }
}

/// A name as identities hold it: a short one (up to 23 bytes, most IDs and
/// namespaces) is stored inline and a longer one is shared behind an `Arc`,
/// so cloning one allocates nothing.
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
///
/// A kind is one pointer to its two names, which every resource of the kind
/// holds: a resource type's own names (known at compile time, borrowed), or
/// names given at run time, shared by every clone. A state's stored
/// resources hold their collection's.
#[derive(Clone)]
pub struct Kind(Names);

#[derive(Clone)]
enum Names {
    /// A resource type's default namespace and its type.
    Static(&'static TypeNames),
    /// Names given at run time: (namespace, type).
    Shared(Arc<(Name, Name)>),
}

impl Kind {
    /// A kind; it is validated when a state receives it.
    pub fn new(namespace: impl AsRef<str>, r#type: impl AsRef<str>) -> Self {
        Kind(Names::Shared(Arc::new((Name::new(namespace), Name::new(r#type)))))
    }

    /// The kind of `R` in `namespace`: its names borrowed, with nothing to
    /// allocate, in `R`'s default namespace.
    pub(crate) fn of<R: Resource>(namespace: impl AsRef<str>) -> Self {
        match namespace.as_ref() {
            namespace if namespace == R::NAMESPACE => Kind(Names::Static(R::type_names())),
            namespace => Kind::new(namespace, R::TYPE),
        }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        match &self.0 {
            Names::Static(names) => names.namespace,
            Names::Shared(names) => &names.0,
        }
    }

    /// The type.
    pub fn r#type(&self) -> &str {
        match &self.0 {
            Names::Static(names) => names.r#type,
            Names::Shared(names) => &names.1,
        }
    }

    /// The resource `id` of this kind.
    pub fn pointer(&self, id: impl AsRef<str>) -> Pointer {
        Pointer { kind: self.clone(), id: Name::new(id) }
    }

    /// The number of the resource type whose names this kind borrows, if
    /// the type has a [`TypeSlot`]; handed out at the first call.
    pub(crate) fn type_index(&self) -> Option<u32> {
        match &self.0 {
            Names::Static(names) => names.index.map(|index| index()),
            Names::Shared(_) => None,
        }
    }

    /// Whether this kind borrows `R`'s names (so that its type is `R::TYPE`),
    /// told by one pointer comparison. `false` says nothing: the names may
    /// still be equal.
    pub(crate) fn borrows_names_of<R: Resource>(&self) -> bool {
        matches!(&self.0, Names::Static(names) if std::ptr::eq(*names, R::type_names()))
    }

    /// Whether both hold the same names by the same pointer: a clone of one another,
    /// or the same resource type's.
    fn same_names(&self, other: &Kind) -> bool {
        match (&self.0, &other.0) {
            (Names::Static(a), Names::Static(b)) => std::ptr::eq(*a, *b),
            (Names::Shared(a), Names::Shared(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// (namespace, type): what equality, order and hashing compare.
    fn names(&self) -> (&str, &str) {
        (self.namespace(), self.r#type())
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.same_names(other) || self.names() == other.names()
    }
}

impl Eq for Kind {}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.names().cmp(&other.names())
    }
}

/// Hashes the namespace and then the type, as `str`s: the same as a pair of the two.
impl Hash for Kind {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.namespace().hash(state);
        self.r#type().hash(state);
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kind").field("namespace", &self.namespace()).field("r#type", &self.r#type()).finish()
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.r#type(), self.namespace())
    }
}

/// A resource type's default namespace and type, as [`Resource::type_names`]
/// returns them: not API (`#[derive(Resource)]` builds it).
#[doc(hidden)]
#[derive(Debug)]
pub struct TypeNames {
    namespace: &'static str,
    r#type: &'static str,
    /// The type's number (from its [`TypeSlot`]), when it has one. A
    /// function, so that a `Kind` holds nothing mutable, as a key must not.
    index: Option<fn() -> u32>,
}

impl TypeNames {
    /// The names, with the function that numbers the type when it has one.
    pub const fn new(namespace: &'static str, r#type: &'static str, index: Option<fn() -> u32>) -> Self {
        TypeNames { namespace, r#type, index }
    }
}

/// A resource type's number, handed out at its first use, in the order of
/// first use: the memory state keeps the collections of resource types in a
/// table by this number. Not API (`#[derive(Resource)]` builds it).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct TypeSlot(OnceLock<u32>);

impl TypeSlot {
    /// A slot without a number yet.
    pub const fn new() -> Self {
        TypeSlot(OnceLock::new())
    }

    /// The type's number.
    pub fn index(&self) -> u32 {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        *self.0.get_or_init(|| NEXT.fetch_add(1, Ordering::Relaxed))
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
///
/// Its namespace and type are its [`Kind`]: one pointer, so a pointer is 40
/// bytes, and one of a resource type's default namespace allocates nothing.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pointer {
    kind: Kind,
    id: Name,
}

impl Pointer {
    /// A pointer; it is validated when a state receives it.
    pub fn new(namespace: impl AsRef<str>, r#type: impl AsRef<str>, id: impl AsRef<str>) -> Self {
        Pointer { kind: Kind::new(namespace, r#type), id: Name::new(id) }
    }

    /// Takes `kind`'s names, which must equal this pointer's, in place of
    /// names allocated for this pointer alone (a state's collection does this,
    /// so its resources share one copy). A resource type's own names stay:
    /// they cost nothing to hold or to clone.
    pub(crate) fn share_kind(&mut self, kind: &Kind) {
        debug_assert!(self.kind == *kind);
        if matches!(self.kind.0, Names::Shared(_)) && !self.kind.same_names(kind) {
            self.kind = kind.clone();
        }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.kind.namespace()
    }

    /// The type.
    pub fn r#type(&self) -> &str {
        self.kind.r#type()
    }

    /// The ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The (namespace, type) part.
    pub fn kind(&self) -> Kind {
        self.kind.clone()
    }

    /// The (namespace, type) part, borrowed.
    pub(crate) fn kind_ref(&self) -> &Kind {
        &self.kind
    }
}

impl fmt::Debug for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pointer")
            .field("namespace", &self.namespace())
            .field("r#type", &self.r#type())
            .field("id", &self.id())
            .finish()
    }
}

/// The serialized form: `namespace`, `type` and `id`, as the metadata carries them.
#[derive(Serialize)]
struct PointerRef<'a> {
    namespace: &'a str,
    #[serde(rename = "type")]
    r#type: &'a str,
    id: &'a str,
}

#[derive(serde::Deserialize)]
struct PointerRepr {
    namespace: Name,
    #[serde(rename = "type")]
    r#type: Name,
    id: Name,
}

impl Serialize for Pointer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PointerRef { namespace: self.namespace(), r#type: self.r#type(), id: self.id() }.serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Pointer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let PointerRepr { namespace, r#type, id } = PointerRepr::deserialize(deserializer)?;
        Ok(Pointer { kind: Kind(Names::Shared(Arc::new((namespace, r#type)))), id })
    }
}

impl fmt::Display for Pointer {
    /// `type(namespace/id)`, the form error messages use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}/{})", self.r#type(), self.namespace(), self.id)
    }
}

impl Kind {
    /// Checks the namespace and type as a state receives them; the error says what is wrong.
    ///
    /// Every [`State`](crate::State) backend calls this before it touches storage.
    pub fn validate(&self) -> Result<(), String> {
        validate_name("namespace", self.namespace())?;
        validate_name("type", self.r#type())
    }
}

impl Pointer {
    /// Checks the namespace, type and ID as a state receives them; the error says what is wrong.
    ///
    /// Every [`State`](crate::State) backend calls this before it touches storage.
    pub fn validate(&self) -> Result<(), String> {
        self.kind.validate()?;
        validate_name("id", &self.id)
    }
}

/// Whether `resource` matches any of `labels` (all when empty) and `id` (all when `None`).
pub(crate) fn matches_queries(labels: &[LabelQuery], id: Option<&IdQuery>, resource: &DynamicResource) -> bool {
    let metadata = resource.metadata();
    id.is_none_or(|query| query.matches(metadata.id()))
        && (labels.is_empty() || labels.iter().any(|query| query.matches(metadata.labels())))
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
    struct Spec;

    impl Resource for Spec {
        const TYPE: &'static str = "Specs.test.cosi.dev";
        const NAMESPACE: &'static str = "test";
        const SENSITIVE: bool = false;

        fn definition() -> ResourceDefinition {
            unreachable!("not used by these tests")
        }
    }

    #[test]
    fn a_kind_is_its_names_however_it_holds_them() {
        let (borrowed, allocated) = (Spec::kind(), Kind::new("test", "Specs.test.cosi.dev"));
        assert!(matches!(borrowed.0, Names::Static(_)) && matches!(allocated.0, Names::Shared(_)));
        assert_eq!(borrowed, allocated);
        assert_eq!(borrowed.cmp(&allocated), std::cmp::Ordering::Equal);
        assert_eq!(format!("{borrowed:?}"), format!("{allocated:?}"));
        // The memory state looks collections up by the two names as `str`s.
        let hasher = std::hash::RandomState::new();
        let names = hasher.hash_one(("test", "Specs.test.cosi.dev"));
        assert_eq!((hasher.hash_one(&borrowed), hasher.hash_one(&allocated)), (names, names));
        assert_ne!(Kind::new("other", Spec::TYPE), borrowed);
        assert!(Kind::new("a", "B") < Kind::new("a", "C") && Kind::new("a", "C") < Kind::new("b", "A"));
        assert!(matches!(Kind::of::<Spec>("other").0, Names::Shared(_)));
    }

    #[test]
    fn a_stored_pointer_takes_its_collections_names_in_place_of_its_own() {
        let collection = Kind::new("test", Spec::TYPE);
        let mut decoded = Pointer::new("test", Spec::TYPE, "a");
        decoded.share_kind(&collection);
        assert!(decoded.kind.same_names(&collection));
        // A resource type's names are kept: they cost nothing.
        let mut typed = Spec::pointer("a");
        typed.share_kind(&collection);
        assert!(matches!(typed.kind.0, Names::Static(_)));
        assert_eq!(typed, decoded);
    }

    #[test]
    fn a_pointer_serializes_as_its_three_names() {
        let pointer = Spec::pointer("a");
        let json = serde_json::to_value(&pointer).unwrap();
        assert_eq!(json, serde_json::json!({ "namespace": "test", "type": Spec::TYPE, "id": "a" }));
        assert_eq!(serde_json::from_value::<Pointer>(json).unwrap(), pointer);
        assert_eq!(format!("{pointer:?}"), r#"Pointer { namespace: "test", r#type: "Specs.test.cosi.dev", id: "a" }"#);
        assert_eq!(pointer.to_string(), "Specs.test.cosi.dev(test/a)");
    }
}
