//! Resource metadata: identity, version, owner, phase, labels, annotations and finalizers.

mod finalizers;
mod labels;
mod packed;
mod phase;
mod serialized;
mod version;

use std::fmt;
use std::time::SystemTime;

use arcstr::ArcStr;

pub use finalizers::Finalizers;
pub use labels::Labels;
pub use phase::Phase;
pub use version::{ParseError, Version};

use crate::resource::{Kind, Pointer};
use packed::{Packed, split};

/// The metadata every resource carries, whatever its spec.
///
/// Identity (namespace, type, ID) never changes. The state broker owns
/// `version`, `created` and `updated`: whatever a caller puts there is
/// replaced on create and update.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// let mut metadata = Metadata::new("network", "HostnameSpecs.net.example.org", "default");
/// assert_eq!(metadata.version(), Version::UNDEFINED);
/// assert_eq!(metadata.phase(), Phase::Running);
/// assert_eq!(metadata.owner(), None);
///
/// metadata.labels_mut().set("layer", "configuration");
/// metadata.finalizers_mut().add("network.HostnameSpecController");
/// assert!(metadata.finalizers().has("network.HostnameSpecController"));
/// ```
#[derive(Clone)]
pub struct Metadata {
    pointer: Pointer,
    /// A shared string in 8 bytes: the memory state gives the resources of
    /// one owner one copy of its name (`Owners`, `keep_owner`).
    owner: Option<ArcStr>,
    /// The version's number, which means something only when `packed` says
    /// the version is defined.
    version: u64,
    packed: Packed,
    /// Labels, annotations and finalizers. Most resources have none, so they
    /// live behind one box that such a resource does without: 8 bytes
    /// instead of 72 in every stored resource.
    extra: Option<Box<Extra>>,
}

// A stored resource is its reference counts, its metadata and its spec:
// with a spec of up to 32 bytes (a `u64` and a `String`), 136 bytes, which
// glibc serves from a 144-byte chunk. Eight bytes more would take it to 160.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Metadata>() == 88);

#[derive(Clone, Debug, Default)]
struct Extra {
    labels: Labels,
    annotations: Labels,
    finalizers: Finalizers,
}

impl Extra {
    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.finalizers.is_empty()
    }
}

/// What the getters of a resource without labels, annotations or finalizers return.
static NO_LABELS: Labels = Labels::EMPTY;
static NO_FINALIZERS: Finalizers = Finalizers::EMPTY;

impl Metadata {
    /// Metadata for a resource that is not stored yet: version undefined, phase running, no owner.
    pub fn new(namespace: impl AsRef<str>, r#type: impl AsRef<str>, id: impl AsRef<str>) -> Self {
        Metadata::at(Pointer::new(namespace, r#type, id))
    }

    /// Metadata for a resource at `pointer` that is not stored yet.
    pub(crate) fn at(pointer: Pointer) -> Self {
        Metadata { pointer, owner: None, version: 0, packed: Packed::at(SystemTime::now()), extra: None }
    }

    /// The namespace the resource lives in.
    pub fn namespace(&self) -> &str {
        self.pointer.namespace()
    }

    /// The resource type, for example `HostnameStatuses.net.example.org`.
    pub fn r#type(&self) -> &str {
        self.pointer.r#type()
    }

    /// The ID, unique within (namespace, type).
    pub fn id(&self) -> &str {
        self.pointer.id()
    }

    /// The (namespace, type) pair.
    pub fn kind(&self) -> Kind {
        self.pointer.kind()
    }

    /// The (namespace, type, ID) triple.
    pub fn pointer(&self) -> &Pointer {
        &self.pointer
    }

    /// Makes the metadata as small as it gets before a state stores it: the
    /// names of `kind` (which must be this resource's) shared, empty labels,
    /// annotations and finalizers dropped.
    pub(crate) fn prepare_to_store(&mut self, kind: &Kind) {
        self.pointer.share_kind(kind);
        self.compact();
    }

    /// The version: 1 on create, +1 on each update, undefined before the first write.
    pub fn version(&self) -> Version {
        match self.packed.version_defined() {
            true => Version::new(self.version),
            false => Version::UNDEFINED,
        }
    }

    /// Sets the version; an update must carry the version it was read at.
    pub fn set_version(&mut self, version: Version) {
        self.version = version.get().unwrap_or(0);
        self.packed.set_version_defined(!version.is_undefined());
    }

    /// The controller that owns the resource, if any.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// Sets the owner; an empty string means no owner.
    pub fn set_owner(&mut self, owner: Option<impl AsRef<str>>) {
        self.owner = owner.as_ref().map(AsRef::as_ref).filter(|owner| !owner.is_empty()).map(ArcStr::from);
    }

    /// The owner as stored, for a state to give the resources of one owner
    /// one copy of its name ([`set_owner_name`](Self::set_owner_name)).
    pub(crate) fn owner_name(&self) -> Option<&ArcStr> {
        self.owner.as_ref()
    }

    /// Sets the owner to `name`, not empty.
    pub(crate) fn set_owner_name(&mut self, name: ArcStr) {
        self.owner = Some(name);
    }

    /// Takes the owner of `stored`, the version this metadata replaces, whose
    /// owner the update checked is the same (an update cannot change it): the
    /// new version shares the stored one's string.
    #[inline]
    pub(crate) fn keep_owner(&mut self, stored: &Metadata) {
        let same = match (&self.owner, &stored.owner) {
            (Some(mine), Some(stored)) => ArcStr::ptr_eq(mine, stored),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.owner.clone_from(&stored.owner);
        }
    }

    /// Whether the resource is running or being torn down.
    pub fn phase(&self) -> Phase {
        self.packed.phase()
    }

    /// Sets the phase.
    pub fn set_phase(&mut self, phase: Phase) {
        self.packed.set_phase(phase);
    }

    /// When the resource was first created.
    pub fn created(&self) -> SystemTime {
        self.packed.created()
    }

    /// When the resource was last written.
    pub fn updated(&self) -> SystemTime {
        self.packed.updated()
    }

    /// Sets both timestamps; used by state backends and transports.
    pub fn set_timestamps(&mut self, created: SystemTime, updated: SystemTime) {
        self.packed.set_times(split(created), split(updated));
    }

    /// Both timestamps `now`: a state's first write.
    pub(crate) fn stamp_created(&mut self, now: SystemTime) {
        let now = split(now);
        self.packed.set_times(now, now);
    }

    /// Created when `previous` was, updated `now`: a state's later write.
    pub(crate) fn stamp_updated(&mut self, previous: &Metadata, now: SystemTime) {
        self.packed.set_times(previous.packed.created_parts(), split(now));
    }

    /// The labels, which label queries select on.
    pub fn labels(&self) -> &Labels {
        self.extra.as_ref().map_or(&NO_LABELS, |extra| &extra.labels)
    }

    /// The labels, for editing.
    pub fn labels_mut(&mut self) -> &mut Labels {
        &mut self.extra_mut().labels
    }

    /// The annotations: free-form data that queries do not see.
    pub fn annotations(&self) -> &Labels {
        self.extra.as_ref().map_or(&NO_LABELS, |extra| &extra.annotations)
    }

    /// The annotations, for editing.
    pub fn annotations_mut(&mut self) -> &mut Labels {
        &mut self.extra_mut().annotations
    }

    /// The finalizers: while any is present, the resource cannot be destroyed.
    pub fn finalizers(&self) -> &Finalizers {
        self.extra.as_ref().map_or(&NO_FINALIZERS, |extra| &extra.finalizers)
    }

    /// The finalizers, for editing.
    pub fn finalizers_mut(&mut self) -> &mut Finalizers {
        &mut self.extra_mut().finalizers
    }

    fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// Drops the box of labels, annotations and finalizers when all are
    /// empty (an edit may have emptied them); states call it before storing.
    pub(crate) fn compact(&mut self) {
        if self.extra.as_ref().is_some_and(|extra| extra.is_empty()) {
            self.extra = None;
        }
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metadata")
            .field("pointer", &self.pointer)
            .field("version", &self.version())
            .field("owner", &self.owner)
            .field("phase", &self.phase())
            .field("created", &self.created())
            .field("updated", &self.updated())
            .field("labels", self.labels())
            .field("annotations", self.annotations())
            .field("finalizers", self.finalizers())
            .finish()
    }
}

/// Equality as COSI defines it: every field but the timestamps, finalizers compared as a set.
impl PartialEq for Metadata {
    fn eq(&self, other: &Self) -> bool {
        self.pointer == other.pointer
            && self.version() == other.version()
            && self.owner == other.owner
            && self.phase() == other.phase()
            && self.labels() == other.labels()
            && self.annotations() == other.annotations()
            && self.finalizers() == other.finalizers()
    }
}

impl Eq for Metadata {}

impl fmt::Display for Metadata {
    /// `type(namespace/id@version)`, the form error messages use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = &self.pointer;
        write!(f, "{}({}/{}@{})", pointer.r#type(), pointer.namespace(), pointer.id(), self.version())
    }
}
