//! Options of state operations. Each is a plain struct with a `Default` and
//! builder methods, so `ListOptions::default().label(query)` reads as it does.

use crate::resource::{IdQuery, LabelQuery, Metadata, Phase};
use crate::state::{Bookmark, Error, Event, Result};

/// Filters of a list.
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
/// for (id, layer) in [("configuration/hostname", "configuration"), ("default/hostname", "default")] {
///     let mut spec = Typed::new(id, HostnameSpec::default());
///     spec.metadata_mut().labels_mut().set("layer", layer);
///     state.create(spec, CreateOptions::default()).await?;
/// }
/// let configuration = ListOptions::default().label(LabelQuery::default().equal("layer", "configuration"));
/// assert_eq!(state.list::<HostnameSpec>(&configuration).await?.len(), 1);
/// let defaults = ListOptions::default().id(IdQuery::new("^default/")?);
/// assert_eq!(state.list::<HostnameSpec>(&defaults).await?[0].id(), "default/hostname");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Label queries, ORed; empty selects everything.
    pub labels: Vec<LabelQuery>,
    /// An ID regular expression; `None` selects everything.
    pub id: Option<IdQuery>,
}

impl ListOptions {
    /// Adds a label query; several are ORed.
    #[must_use]
    pub fn label(mut self, query: LabelQuery) -> Self {
        self.labels.push(query);
        self
    }

    /// Selects IDs matching `query`.
    #[must_use]
    pub fn id(mut self, query: IdQuery) -> Self {
        self.id = Some(query);
        self
    }
}

/// Options of a create.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// # pub struct HostnameStatus { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// let status = Typed::new("default", HostnameStatus::default());
/// let status = state.create(status, CreateOptions::owner("hostname")).await?;
/// assert_eq!(status.metadata().owner(), Some("hostname"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    /// The owner to record; `None` keeps the resource's own.
    pub owner: Option<String>,
}

impl CreateOptions {
    /// Creates the resource owned by `owner`.
    pub fn owner(owner: impl Into<String>) -> Self {
        CreateOptions { owner: Some(owner.into()) }
    }
}

/// Options of an update.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// # pub struct HostnameStatus { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// state.create(Typed::new("default", HostnameStatus::default()), CreateOptions::owner("hostname")).await?;
///
/// let mut status = state.get::<HostnameStatus>("default").await?;
/// status.hostname = "talos".into();
/// // Only the owner may update it.
/// assert!(state.update(status.clone(), UpdateOptions::default()).await.is_err());
/// state.update(status, UpdateOptions::owner("hostname")).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct UpdateOptions {
    /// The owner the caller writes as; must equal the stored owner.
    pub owner: Option<String>,
    /// The phase the stored resource must be in; `None` accepts any.
    pub expected_phase: Option<Phase>,
}

impl Default for UpdateOptions {
    /// No owner, expecting a running resource.
    fn default() -> Self {
        UpdateOptions { owner: None, expected_phase: Some(Phase::Running) }
    }
}

impl UpdateOptions {
    /// Writes as `owner`.
    pub fn owner(owner: impl Into<String>) -> Self {
        UpdateOptions { owner: Some(owner.into()), ..UpdateOptions::default() }
    }

    /// Expects the stored resource in `phase`, or in any phase with `None`.
    #[must_use]
    pub fn expected_phase(mut self, phase: Option<Phase>) -> Self {
        self.expected_phase = phase;
        self
    }

    /// Writes as `owner`.
    #[must_use]
    pub fn with_owner(mut self, owner: Option<impl Into<String>>) -> Self {
        self.owner = owner.map(Into::into);
        self
    }

    /// Checks the owners of an update of `stored` to `metadata`; for state
    /// implementations. The caller must write as the stored owner, else an
    /// [`Error::OwnerConflict`]; and the new metadata must name the stored
    /// owner, else an [`Error::InvalidArgument`]: the owner is set at create
    /// and an update cannot change it.
    ///
    /// Go COSI stores whatever owner the new metadata names, once the option
    /// matches; we refuse instead, so that a resource's one writer never
    /// changes under it, and the refusal changes nothing (it does not, as
    /// ignoring the new owner would, report a write to a Go client as
    /// failed after storing it).
    pub fn check_owner(&self, metadata: &Metadata, stored: &Metadata) -> Result<()> {
        let pointer = metadata.pointer();
        // An empty owner is none, as `Metadata::set_owner` has it.
        if self.owner.as_deref().filter(|owner| !owner.is_empty()) != stored.owner() {
            return Err(Error::OwnerConflict { pointer: pointer.clone(), owner: stored.owner().map(Into::into) });
        }
        if metadata.owner() != stored.owner() {
            let name = |owner: Option<&str>| owner.map_or_else(|| "no owner".to_owned(), |owner| format!("{owner:?}"));
            return Err(Error::invalid_argument(format!(
                "cannot update {pointer}: an update cannot change the owner (its metadata names {}, the resource is owned by {})",
                name(metadata.owner()),
                name(stored.owner())
            )));
        }
        Ok(())
    }
}

/// Options of a destroy or a teardown ([`DestroyOptions`], [`TeardownOptions`]):
/// the owner the caller acts as.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// # pub struct HostnameStatus { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// state.create(Typed::new("default", HostnameStatus::default()), CreateOptions::owner("hostname")).await?;
/// assert!(state.destroy::<HostnameStatus>("default", DestroyOptions::default()).await.is_err());
/// // No finalizers: it can be destroyed at once.
/// assert!(state.teardown::<HostnameStatus>("default", TeardownOptions::owner("hostname")).await?);
/// state.destroy::<HostnameStatus>("default", DestroyOptions::owner("hostname")).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct OwnerOptions {
    /// The owner the caller acts as; must equal the stored owner.
    pub owner: Option<String>,
}

impl OwnerOptions {
    /// Acts as `owner`.
    pub fn owner(owner: impl Into<String>) -> Self {
        OwnerOptions { owner: Some(owner.into()) }
    }
}

/// Options of a destroy: the owner the caller acts as.
pub type DestroyOptions = OwnerOptions;

/// Options of a teardown: the owner the caller acts as.
pub type TeardownOptions = OwnerOptions;

/// Options of a single-resource watch.
///
/// By default the first event is the current state: `Created` with the
/// resource, or `Destroyed` without one when it is absent.
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
///
/// // One resource: its current state first, then every change.
/// let mut watch = state.watch::<HostnameSpec>("default", WatchOptions::default()).await?;
/// assert!(matches!(watch.recv().await, Some(Event::Created { .. })));
/// state.modify::<HostnameSpec>("default", UpdateOptions::default(), |spec| spec.hostname = "talos".into()).await?;
/// assert!(matches!(watch.recv().await, Some(Event::Updated { .. })));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// Replay up to this many past events of the resource instead of the current state.
    pub tail_events: usize,
    /// Resume right after the event that carried this bookmark.
    pub start_from: Option<Bookmark>,
}

impl WatchOptions {
    /// Replays the last `n` events of the resource.
    pub fn tail(n: usize) -> Self {
        WatchOptions { tail_events: n, ..WatchOptions::default() }
    }

    /// Resumes after `bookmark`.
    pub fn from_bookmark(bookmark: Bookmark) -> Self {
        WatchOptions { start_from: Some(bookmark), ..WatchOptions::default() }
    }

    /// Checks that the options do not exclude each other; for state implementations.
    pub fn validate(&self) -> Result<()> {
        if self.tail_events > 0 && self.start_from.is_some() {
            return Err(Error::invalid_argument("cannot use both tail events and start from bookmark"));
        }
        Ok(())
    }
}

/// Options of a kind watch.
///
/// By default only changes after the call are delivered.
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
///
/// // What is there now, a marker, then every change.
/// let mut watch = state.watch_kind::<HostnameSpec>(WatchKindOptions::bootstrap()).await?;
/// assert!(matches!(watch.recv().await, Some(Event::Created { .. })));
/// assert!(matches!(watch.recv().await, Some(Event::Bootstrapped { .. })));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct WatchKindOptions {
    /// Start with a `Created` event for every matching resource, then `Bootstrapped`.
    pub bootstrap_contents: bool,
    /// Send a `Noop` event carrying a bookmark of the current position, so a
    /// watch that sees no change still has a point to resume from.
    pub bootstrap_bookmark: bool,
    /// Replay up to this many past events.
    pub tail_events: usize,
    /// Resume right after the event that carried this bookmark.
    pub start_from: Option<Bookmark>,
    /// Label queries, ORed.
    pub labels: Vec<LabelQuery>,
    /// An ID regular expression.
    pub id: Option<IdQuery>,
}

impl WatchKindOptions {
    /// Starts with the current contents.
    pub fn bootstrap() -> Self {
        WatchKindOptions { bootstrap_contents: true, ..WatchKindOptions::default() }
    }

    /// Replays the last `n` events.
    pub fn tail(n: usize) -> Self {
        WatchKindOptions { tail_events: n, ..WatchKindOptions::default() }
    }

    /// Resumes after `bookmark`.
    pub fn from_bookmark(bookmark: Bookmark) -> Self {
        WatchKindOptions { start_from: Some(bookmark), ..WatchKindOptions::default() }
    }

    /// Adds a label query; several are ORed.
    #[must_use]
    pub fn label(mut self, query: LabelQuery) -> Self {
        self.labels.push(query);
        self
    }

    /// Selects IDs matching `query`.
    #[must_use]
    pub fn id(mut self, query: IdQuery) -> Self {
        self.id = Some(query);
        self
    }

    /// Also sends a bookmark of the starting point.
    #[must_use]
    pub fn with_bootstrap_bookmark(mut self) -> Self {
        self.bootstrap_bookmark = true;
        self
    }

    /// Checks the queries and that the options do not exclude each other; for state implementations.
    pub fn validate(&self) -> Result<()> {
        if self.bootstrap_contents && (self.tail_events > 0 || self.start_from.is_some()) {
            return Err(Error::invalid_argument(
                "cannot use bootstrap contents with tail events or start from bookmark",
            ));
        }
        if self.tail_events > 0 && self.start_from.is_some() {
            return Err(Error::invalid_argument("cannot use both tail events and start from bookmark"));
        }
        for query in &self.labels {
            query.validate()?;
        }
        Ok(())
    }

    /// Whether the watch's queries select `resource`; for state implementations.
    pub fn matches(&self, resource: &crate::resource::DynamicResource) -> bool {
        crate::resource::matches_queries(&self.labels, self.id.as_ref(), resource)
    }

    /// The event as a watcher with these queries sees it, if at all; for state
    /// implementations. An update that makes a resource match is seen as
    /// `Created`, one that makes it stop matching as `Destroyed`, one that
    /// leaves it unmatched not at all.
    ///
    /// A resource whose last value is unknown (a store's history compacted it
    /// away: a destruction without a resource, an update from a tombstone)
    /// may have matched, whatever its labels: its destruction is seen, and an
    /// update from it is an update.
    pub fn filter(&self, event: &Event) -> Option<Event> {
        if self.labels.is_empty() && self.id.is_none() {
            return Some(event.clone());
        }
        let may_match = |resource: &crate::resource::DynamicResource| match resource.is_tombstone() {
            true => crate::resource::matches_queries(&[], self.id.as_ref(), resource),
            false => self.matches(resource),
        };
        match event {
            Event::Updated { resource, old, bookmark } => match (may_match(old), self.matches(resource)) {
                (true, true) => Some(event.clone()),
                (true, false) => Some(Event::destroyed(resource.clone(), bookmark.clone())),
                (false, true) => Some(Event::Created { resource: resource.clone(), bookmark: bookmark.clone() }),
                (false, false) => None,
            },
            Event::Destroyed { pointer, resource: None, .. } => {
                self.id.as_ref().is_none_or(|query| query.matches(pointer.id())).then(|| event.clone())
            }
            _ => event.resource().is_some_and(may_match).then(|| event.clone()),
        }
    }
}

impl ListOptions {
    /// Checks the label queries; for state implementations.
    pub fn validate(&self) -> Result<()> {
        for query in &self.labels {
            query.validate()?;
        }
        Ok(())
    }

    /// Whether the list's queries select `resource`; for state implementations.
    pub fn matches(&self, resource: &crate::resource::DynamicResource) -> bool {
        crate::resource::matches_queries(&self.labels, self.id.as_ref(), resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{DynamicResource, Kind, LabelQuery, Metadata};

    /// The labels of a resource whose last state is unknown (destroyed
    /// without it, or updated from a tombstone) are unknown: a watch
    /// selecting by label sees its destruction, and an update from it as an
    /// update or a destruction.
    #[test]
    fn a_tombstone_may_have_matched_a_label_query() {
        let options = WatchKindOptions::default().label(LabelQuery::new().exists("app"));
        let pointer = Kind::new("ns", "Things.test.cosi.dev").pointer("a");
        let tombstone = DynamicResource::tombstone(&pointer);
        let destroyed = Event::Destroyed { pointer, resource: None, bookmark: None };
        assert!(matches!(options.filter(&destroyed), Some(Event::Destroyed { .. })), "the destruction was dropped");

        let mut labelled = Metadata::new("ns", "Things.test.cosi.dev", "a");
        labelled.labels_mut().set("app", "web");
        let labelled = DynamicResource::without_spec(labelled);
        let unlabelled = DynamicResource::without_spec(Metadata::new("ns", "Things.test.cosi.dev", "a"));
        let update = |resource: &DynamicResource| Event::Updated {
            resource: resource.clone(),
            old: tombstone.clone(),
            bookmark: None,
        };
        assert!(matches!(options.filter(&update(&labelled)), Some(Event::Updated { .. })));
        assert!(matches!(options.filter(&update(&unlabelled)), Some(Event::Destroyed { .. })));

        // The ID is known: the destruction of another ID is not seen.
        let other = options.clone().id(crate::resource::IdQuery::new("^b$").unwrap());
        assert!(other.filter(&destroyed).is_none());
    }
}
