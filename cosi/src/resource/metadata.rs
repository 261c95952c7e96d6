//! Resource metadata: identity, version, owner, phase, labels, annotations and finalizers.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arcstr::ArcStr;
use serde::{Deserialize, Serialize};

use crate::resource::{Kind, Pointer};

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

/// `created`, `updated`, the phase and whether the version is defined, in 24
/// bytes: both seconds, then both nanoseconds, whose top bits hold the two
/// flags (a count of nanoseconds within a second stays under 2^30). Two
/// `SystemTime`s alone take 32 bytes (each pads its 12 to 16) and a
/// `Version` 16; packed so, a stored resource with a spec of up to 32 bytes
/// fits a 144-byte allocation (see the size check above). Exact for every
/// time the platform's `SystemTime` holds: seconds since the epoch, negative
/// before it, and the nanoseconds after those seconds.
#[derive(Clone, Copy)]
struct Packed {
    secs: [i64; 2],
    nanos: [u32; 2],
}

/// The flag bit of each of `Packed::nanos`: in `created`'s, the phase is
/// tearing down; in `updated`'s, the version is defined.
const FLAG: u32 = 1 << 31;

impl Packed {
    /// Created and updated at `time`, running, version undefined.
    fn at(time: SystemTime) -> Self {
        let (secs, nanos) = split(time);
        Packed { secs: [secs; 2], nanos: [nanos; 2] }
    }

    fn created(self) -> SystemTime {
        join(self.secs[0], self.nanos[0] & !FLAG)
    }

    fn updated(self) -> SystemTime {
        join(self.secs[1], self.nanos[1] & !FLAG)
    }

    /// Sets both times, the flags as they were.
    fn set_times(&mut self, (created_secs, created_nanos): (i64, u32), (updated_secs, updated_nanos): (i64, u32)) {
        self.secs = [created_secs, updated_secs];
        self.nanos = [created_nanos | (self.nanos[0] & FLAG), updated_nanos | (self.nanos[1] & FLAG)];
    }

    /// `created` as seconds and nanoseconds, without its flag.
    fn created_parts(self) -> (i64, u32) {
        (self.secs[0], self.nanos[0] & !FLAG)
    }

    fn phase(self) -> Phase {
        match self.nanos[0] & FLAG {
            0 => Phase::Running,
            _ => Phase::TearingDown,
        }
    }

    fn set_phase(&mut self, phase: Phase) {
        self.set_flag(0, phase == Phase::TearingDown);
    }

    fn version_defined(self) -> bool {
        self.nanos[1] & FLAG != 0
    }

    fn set_version_defined(&mut self, defined: bool) {
        self.set_flag(1, defined);
    }

    fn set_flag(&mut self, which: usize, on: bool) {
        self.nanos[which] = match on {
            true => self.nanos[which] | FLAG,
            false => self.nanos[which] & !FLAG,
        };
    }
}

/// The time `secs` seconds (negative: before) and `nanos` nanoseconds after the epoch.
fn join(secs: i64, nanos: u32) -> SystemTime {
    let whole = match u64::try_from(secs) {
        Ok(after) => UNIX_EPOCH.checked_add(Duration::from_secs(after)),
        Err(_) => UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs())),
    };
    // Both came from a `SystemTime` (`split`), so neither step leaves its range.
    whole.and_then(|whole| whole.checked_add(Duration::from_nanos(nanos.into()))).unwrap_or(UNIX_EPOCH)
}

/// Whole seconds since the epoch (rounded down) and the nanoseconds after them.
fn split(time: SystemTime) -> (i64, u32) {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => (i64::try_from(after.as_secs()).unwrap_or(i64::MAX), after.subsec_nanos()),
        Err(before) => {
            let before = before.duration();
            let secs = 0i64.saturating_sub_unsigned(before.as_secs());
            match before.subsec_nanos() {
                0 => (secs, 0),
                nanos => (secs.saturating_sub(1), 1_000_000_000 - nanos),
            }
        }
    }
}

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
static NO_LABELS: Labels = Labels(BTreeMap::new());
static NO_FINALIZERS: Finalizers = Finalizers(Vec::new());

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

/// The serialized form: every field at the top level, empty collections left out.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetadataRef<'a> {
    #[serde(flatten)]
    pointer: &'a Pointer,
    version: Version,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    phase: Phase,
    #[serde(with = "timestamp")]
    created: SystemTime,
    #[serde(with = "timestamp")]
    updated: SystemTime,
    #[serde(skip_serializing_if = "no_labels")]
    labels: &'a Labels,
    #[serde(skip_serializing_if = "no_labels")]
    annotations: &'a Labels,
    #[serde(skip_serializing_if = "no_finalizers")]
    finalizers: &'a Finalizers,
}

fn no_labels(labels: &&Labels) -> bool {
    labels.is_empty()
}

fn no_finalizers(finalizers: &&Finalizers) -> bool {
    finalizers.is_empty()
}

/// The deserialized form, the same as [`MetadataRef`]'s.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetadataRepr {
    #[serde(flatten)]
    pointer: Pointer,
    version: Version,
    #[serde(default)]
    owner: Option<ArcStr>,
    #[serde(default)]
    phase: Phase,
    #[serde(with = "timestamp")]
    created: SystemTime,
    #[serde(with = "timestamp")]
    updated: SystemTime,
    #[serde(default)]
    labels: Labels,
    #[serde(default)]
    annotations: Labels,
    #[serde(default)]
    finalizers: Finalizers,
}

impl Serialize for Metadata {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        MetadataRef {
            pointer: &self.pointer,
            version: self.version(),
            owner: self.owner.as_deref(),
            phase: self.phase(),
            created: self.created(),
            updated: self.updated(),
            labels: self.labels(),
            annotations: self.annotations(),
            finalizers: self.finalizers(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = MetadataRepr::deserialize(deserializer)?;
        let mut metadata = Metadata {
            pointer: repr.pointer,
            owner: repr.owner.filter(|owner| !owner.is_empty()),
            version: 0,
            packed: Packed { secs: [0; 2], nanos: [0; 2] },
            extra: Some(Box::new(Extra {
                labels: repr.labels,
                annotations: repr.annotations,
                finalizers: repr.finalizers,
            })),
        };
        metadata.set_version(repr.version);
        metadata.set_phase(repr.phase);
        metadata.set_timestamps(repr.created, repr.updated);
        metadata.compact();
        Ok(metadata)
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

/// A resource version: undefined before the first write, then 1, 2, 3...
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// let version = Version::new(1);
/// assert_eq!(version.get(), Some(1));
/// assert_eq!(version.next(), Version::new(2));
/// assert!(Version::UNDEFINED.is_undefined());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(Option<u64>);

impl Version {
    /// The version of a resource that was never stored.
    pub const UNDEFINED: Version = Version(None);

    /// A defined version.
    pub const fn new(value: u64) -> Self {
        Version(Some(value))
    }

    /// The number, or `None` when undefined.
    pub const fn get(self) -> Option<u64> {
        self.0
    }

    /// The version after this one: undefined is followed by 1.
    #[must_use]
    pub const fn next(self) -> Self {
        match self.0 {
            Some(value) => Version(Some(value.saturating_add(1))),
            None => Version(Some(1)),
        }
    }

    /// Whether no write has happened yet.
    pub const fn is_undefined(self) -> bool {
        self.0.is_none()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(value) => write!(f, "{value}"),
            None => f.write_str("undefined"),
        }
    }
}

impl std::str::FromStr for Version {
    type Err = ParseError;

    /// Parses `undefined` or a decimal number, the wire form of a version.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "undefined" {
            return Ok(Version::UNDEFINED);
        }
        s.parse::<u64>().map(Version::new).map_err(|err| ParseError(format!("error parsing version {s:?}: {err}")))
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(value) => serializer.serialize_u64(value),
            None => serializer.serialize_str("undefined"),
        }
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Number(u64),
            Text(String),
        }
        match Repr::deserialize(deserializer)? {
            Repr::Number(value) => Ok(Version::new(value)),
            Repr::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// An error parsing a metadata field from text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

/// The lifecycle phase of a resource.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// state.create(Typed::new("default", HostnameSpec::default()), CreateOptions::default()).await?;
/// state.add_finalizers::<HostnameSpec>("default", &["mine"]).await?;
///
/// // Torn down, but held by a finalizer: still there, going away.
/// assert!(!state.teardown::<HostnameSpec>("default", TeardownOptions::default()).await?);
/// assert_eq!(state.get::<HostnameSpec>("default").await?.metadata().phase(), Phase::TearingDown);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// In use: the normal state.
    #[default]
    #[serde(rename = "running")]
    Running,
    /// Being torn down: its consumers release it, then its owner destroys it.
    #[serde(rename = "tearingDown")]
    TearingDown,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Running => "running",
            Phase::TearingDown => "tearingDown",
        })
    }
}

impl std::str::FromStr for Phase {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "running" => Ok(Phase::Running),
            "tearingDown" => Ok(Phase::TearingDown),
            _ => Err(ParseError(format!("unknown phase: {s:?}"))),
        }
    }
}

/// A map of string keys to string values, used for labels and annotations.
///
/// A key set to the empty string is different from a missing key.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// let mut labels = Labels::default();
/// labels.set("tier", "gold");
/// assert_eq!(labels.get("tier"), Some("gold"));
/// assert!(LabelQuery::default().equal("tier", "gold").matches(&labels));
/// assert_eq!(labels.remove("tier").as_deref(), Some("gold"));
/// assert!(labels.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Labels(BTreeMap<String, String>);

impl Labels {
    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Whether `key` is set (possibly to the empty string).
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`, returning the previous value.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.0.insert(key.into(), value.into())
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.0.remove(key)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs, sorted by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Labels(iter.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }
}

/// The finalizers of a resource: an ordered set of names, compared as a set.
/// A list read from a store or the wire keeps the first of each name, as Go does.
#[derive(Clone, Debug, Default, Eq, Serialize)]
#[serde(transparent)]
pub struct Finalizers(Vec<String>);

impl<'de> Deserialize<'de> for Finalizers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(deserializer).map(Finalizers::from_iter)
    }
}

impl Finalizers {
    /// Adds `name`; returns whether it was absent.
    pub fn add(&mut self, name: impl Into<String>) -> bool {
        let name = name.into();
        if self.has(&name) {
            return false;
        }
        self.0.push(name);
        true
    }

    /// Removes `name`; returns whether it was present.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|f| f != name);
        self.0.len() != before
    }

    /// Whether `name` is present.
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|f| f == name)
    }

    /// Whether there is no finalizer.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of finalizers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The finalizers in the order they were added.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl PartialEq for Finalizers {
    fn eq(&self, other: &Self) -> bool {
        if self.0.len() != other.0.len() {
            return false;
        }
        // Both sides are sets, so one containment check per element is enough;
        // finalizer lists are short, which makes this cheaper than sorting.
        self.0.iter().all(|f| other.has(f))
    }
}

impl fmt::Display for Finalizers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

impl<S: Into<String>> FromIterator<S> for Finalizers {
    /// Keeps the first of each name, in linear time: a list from the wire
    /// may be long.
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut names: Vec<String> = iter.into_iter().map(Into::into).collect();
        // A few names (most resources have none or one): compared in place.
        if names.len() <= 16 {
            let mut kept = Finalizers(Vec::with_capacity(names.len()));
            for name in names {
                kept.add(name);
            }
            return kept;
        }
        let first: Vec<bool> = {
            let mut seen = std::collections::HashSet::with_capacity(names.len());
            names.iter().map(|name| seen.insert(name.as_str())).collect()
        };
        let mut first = first.into_iter();
        names.retain(|_| first.next().unwrap_or(false));
        Finalizers(names)
    }
}

/// Timestamps as RFC 3339 text would need a date crate; seconds and nanoseconds
/// since the Unix epoch say the same without one.
mod timestamp {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Repr {
        seconds: u64,
        nanos: u32,
    }

    pub(super) fn serialize<S: Serializer>(time: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Repr { seconds: since.as_secs(), nanos: since.subsec_nanos() }.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SystemTime, D::Error> {
        let repr = Repr::deserialize(deserializer)?;
        if repr.nanos >= 1_000_000_000 {
            return Err(serde::de::Error::custom("timestamp nanos must be below 1e9"));
        }
        UNIX_EPOCH
            .checked_add(Duration::new(repr.seconds, repr.nanos))
            .ok_or_else(|| serde::de::Error::custom("timestamp out of range"))
    }
}
