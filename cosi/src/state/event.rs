//! Watch events and the stream that delivers them.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use futures_util::StreamExt;

use crate::resource::{DynamicResource, Kind, Metadata, Pointer, Resource, Typed};
use crate::state::Error;

/// One change, as a watch delivers it: generic over how the resources are
/// read, [`DynamicResource`] (the default: what [`Watch`] delivers) or
/// [`Typed<T>`](crate::Typed) (what [`TypedWatch<T>`] delivers). Both have
/// the same variants and accessors.
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
/// let mut dynamic = state.watch_kind_dynamic(&HostnameSpec::kind(), WatchKindOptions::default()).await?;
/// let mut typed = state.watch_kind::<HostnameSpec>(WatchKindOptions::default()).await?;
/// state.create(Typed::new("default", HostnameSpec { hostname: "talos".into() }), CreateOptions::default()).await?;
/// match dynamic.recv().await {
///     Some(Event::Created { resource, bookmark }) => {
///         assert_eq!(resource.id(), "default");
///         assert!(bookmark.is_some());
///     }
///     other => panic!("expected a creation, got {other:?}"),
/// }
/// match typed.recv().await {
///     Some(Event::Created { resource, .. }) => assert_eq!(resource.hostname, "talos"),
///     other => panic!("expected a creation, got {other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub enum Event<R = DynamicResource> {
    /// The resource appeared: it was created, or it started matching the watch's queries,
    /// or it is part of the bootstrap contents.
    Created {
        /// The resource as stored.
        resource: R,
        /// Where to resume after this event; `None` for bootstrap and initial events.
        bookmark: Option<Bookmark>,
    },
    /// The resource changed.
    Updated {
        /// The resource as stored now.
        resource: R,
        /// The resource as it was.
        old: R,
        /// Where to resume after this event.
        bookmark: Option<Bookmark>,
    },
    /// The resource is gone: it was destroyed, or it stopped matching the watch's queries.
    Destroyed {
        /// Which resource.
        pointer: Pointer,
        /// Its last stored state; `None` when the watch only knows it is
        /// absent (a single-resource watch of a resource that did not exist,
        /// or a store that no longer has the last state). On the wire, and in
        /// Go COSI, that is a tombstone ([`DynamicResource::tombstone`]).
        resource: Option<R>,
        /// Where to resume after this event.
        bookmark: Option<Bookmark>,
    },
    /// The bootstrap contents of a kind watch are complete; live events follow.
    Bootstrapped {
        /// The watched kind.
        kind: Kind,
        /// Where to resume to see every change after the bootstrap contents.
        bookmark: Option<Bookmark>,
    },
    /// Nothing happened; the event only carries a bookmark of the watch's start.
    Noop {
        /// The watched kind.
        kind: Kind,
        /// Where to resume to see every change after the watch started.
        bookmark: Option<Bookmark>,
    },
    /// The watch failed and ends: no event follows. A resource that cannot be
    /// read as the watch's type ends a typed watch this way.
    Errored {
        /// Why.
        error: Error,
    },
}

/// The type of an [`Event`], without its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// [`Event::Created`].
    Created,
    /// [`Event::Updated`].
    Updated,
    /// [`Event::Destroyed`].
    Destroyed,
    /// [`Event::Bootstrapped`].
    Bootstrapped,
    /// [`Event::Noop`].
    Noop,
    /// [`Event::Errored`].
    Errored,
}

impl<R> Event<R> {
    /// The type of the event.
    pub fn event_type(&self) -> EventType {
        match self {
            Event::Created { .. } => EventType::Created,
            Event::Updated { .. } => EventType::Updated,
            Event::Destroyed { .. } => EventType::Destroyed,
            Event::Bootstrapped { .. } => EventType::Bootstrapped,
            Event::Noop { .. } => EventType::Noop,
            Event::Errored { .. } => EventType::Errored,
        }
    }

    /// The resource of a `Created` or `Updated` event, and of a `Destroyed`
    /// event that knows the resource's last state.
    pub fn resource(&self) -> Option<&R> {
        match self {
            Event::Created { resource, .. } | Event::Updated { resource, .. } => Some(resource),
            Event::Destroyed { resource, .. } => resource.as_ref(),
            Event::Bootstrapped { .. } | Event::Noop { .. } | Event::Errored { .. } => None,
        }
    }

    /// The previous state, on `Updated` events.
    pub fn old(&self) -> Option<&R> {
        match self {
            Event::Updated { old, .. } => Some(old),
            _ => None,
        }
    }

    /// The bookmark to resume after this event, if it has one.
    pub fn bookmark(&self) -> Option<&Bookmark> {
        match self {
            Event::Created { bookmark, .. }
            | Event::Updated { bookmark, .. }
            | Event::Destroyed { bookmark, .. }
            | Event::Bootstrapped { bookmark, .. }
            | Event::Noop { bookmark, .. } => bookmark.as_ref(),
            Event::Errored { .. } => None,
        }
    }

    /// The error of an `Errored` event.
    pub fn error(&self) -> Option<&Error> {
        match self {
            Event::Errored { error } => Some(error),
            _ => None,
        }
    }

    /// The same event with every resource passed through `read`; the first
    /// error `read` returns instead.
    pub fn try_map<S, E>(self, mut read: impl FnMut(R) -> Result<S, E>) -> Result<Event<S>, E> {
        Ok(match self {
            Event::Created { resource, bookmark } => Event::Created { resource: read(resource)?, bookmark },
            Event::Updated { resource, old, bookmark } => {
                Event::Updated { resource: read(resource)?, old: read(old)?, bookmark }
            }
            Event::Destroyed { pointer, resource, bookmark } => {
                Event::Destroyed { pointer, resource: resource.map(read).transpose()?, bookmark }
            }
            Event::Bootstrapped { kind, bookmark } => Event::Bootstrapped { kind, bookmark },
            Event::Noop { kind, bookmark } => Event::Noop { kind, bookmark },
            Event::Errored { error } => Event::Errored { error },
        })
    }
}

impl<R: AsRef<Metadata>> Event<R> {
    /// The resource a `Created`, `Updated` or `Destroyed` event is about.
    pub fn pointer(&self) -> Option<&Pointer> {
        match self {
            Event::Created { resource, .. } | Event::Updated { resource, .. } => Some(resource.as_ref().pointer()),
            Event::Destroyed { pointer, .. } => Some(pointer),
            Event::Bootstrapped { .. } | Event::Noop { .. } | Event::Errored { .. } => None,
        }
    }
}

impl Event {
    /// A `Destroyed` event of `resource`, its last stored state.
    pub fn destroyed(resource: DynamicResource, bookmark: Option<Bookmark>) -> Self {
        Event::Destroyed { pointer: resource.metadata().pointer().clone(), resource: Some(resource), bookmark }
    }

    /// The event with its resources read as `T`; an `Errored` event when one
    /// is not a `T`.
    pub fn typed<T: Resource>(self) -> Event<Typed<T>> {
        self.try_map(Typed::try_from).unwrap_or_else(|error| Event::Errored { error })
    }
}

impl<T: Resource> From<Event<Typed<T>>> for Event {
    /// The erased event: shares every resource.
    fn from(event: Event<Typed<T>>) -> Self {
        let Ok(event) = event.try_map(|resource| Ok::<_, Infallible>(DynamicResource::from(resource)));
        event
    }
}

/// An opaque position in a watch's history, to resume the watch from.
///
/// Only the state that issued a bookmark can read it; any other bookmark,
/// including one from before a restart, is rejected as invalid.
#[derive(Clone)]
pub struct Bookmark(BookmarkBytes);

/// A bookmark's bytes: inline up to `INLINE_BOOKMARK` bytes, as the memory
/// state's are (it issues one with every event, so this saves an allocation
/// per write), shared beyond that.
#[derive(Clone)]
enum BookmarkBytes {
    Inline(u8, [u8; INLINE_BOOKMARK]),
    Shared(Arc<[u8]>),
}

const INLINE_BOOKMARK: usize = 16;

impl Bookmark {
    /// A bookmark from its bytes, as they travel on the wire.
    pub fn from_bytes(bytes: impl Into<Arc<[u8]>>) -> Self {
        Bookmark(BookmarkBytes::Shared(bytes.into()))
    }

    /// A bookmark from a slice, stored inline when it is short.
    pub(crate) fn from_slice(bytes: &[u8]) -> Self {
        match u8::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= INLINE_BOOKMARK => {
                let mut inline = [0; INLINE_BOOKMARK];
                inline[..bytes.len()].copy_from_slice(bytes);
                Bookmark(BookmarkBytes::Inline(len, inline))
            }
            _ => Bookmark(BookmarkBytes::Shared(bytes.into())),
        }
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            BookmarkBytes::Inline(len, bytes) => &bytes[..usize::from(*len)],
            BookmarkBytes::Shared(bytes) => bytes,
        }
    }
}

impl PartialEq for Bookmark {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Bookmark {}

impl std::hash::Hash for Bookmark {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for Bookmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bookmark(")?;
        for byte in self.as_bytes() {
            write!(f, "{byte:02x}")?;
        }
        f.write_str(")")
    }
}

/// A stream of watch events.
///
/// Events arrive in batches: everything that happened since the previous read.
/// [`recv`](Watch::recv) hands them out one at a time, [`recv_batch`](Watch::recv_batch)
/// a batch at a time (COSI's aggregated watch). After an [`Event::Errored`] the
/// stream ends. Dropping the `Watch` cancels it.
pub struct Watch {
    batches: Pin<Box<dyn Stream<Item = Vec<Event>> + Send>>,
    buffered: VecDeque<Event>,
    progress: Option<Arc<dyn WatchProgress>>,
}

/// How far a watch has read the history it streams from, for states that can
/// tell: the in-memory state and those built on it ([`MemoryState`](crate::state::MemoryState),
/// [`NamespacedState`](crate::state::NamespacedState) routing to them, the
/// durable redb state). Remote states cannot: their events are on the wire.
///
/// Positions count the events of the watched collection (one namespace and
/// type); they mean something only within one watch's progress. Everything
/// written before [`written`](WatchProgress::written) has been read by the
/// watch once [`read`](WatchProgress::read) reaches it, so a consumer that
/// notes `read()` after handling a batch knows exactly whether it has seen
/// every write so far. The controller runtime does this to make
/// [`Runtime::settled`](crate::RuntimeHandle::settled) exact.
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
/// let mut watch = state.watch_kind::<HostnameSpec>(WatchKindOptions::default()).await?;
/// let progress = watch.progress().expect("an in-memory watch knows its progress");
/// assert_eq!(progress.read(), progress.written());
///
/// state.create(Typed::new("default", HostnameSpec::default()), CreateOptions::default()).await?;
/// assert!(progress.read() < progress.written(), "written, not read yet");
/// watch.recv().await;
/// assert_eq!(progress.read(), progress.written());
/// # Ok(())
/// # }
/// ```
pub trait WatchProgress: Send + Sync + 'static {
    /// The position the next event of the watched collection will take.
    fn written(&self) -> u64;

    /// The position the watch has read up to: every event before it has been
    /// taken from the history, and handed out with the batch being returned
    /// (or skipped, when the watch's queries do not select it).
    fn read(&self) -> u64;
}

impl Watch {
    /// A watch over a stream of batches; for state implementations.
    pub fn from_batches(batches: impl Stream<Item = Vec<Event>> + Send + 'static) -> Self {
        Watch { batches: Box::pin(batches), buffered: VecDeque::new(), progress: None }
    }

    /// The same watch, reporting its progress through `progress`; for state
    /// implementations that can tell how far it has read.
    #[must_use]
    pub fn with_progress(mut self, progress: Arc<dyn WatchProgress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// How far the watch has read its state's history, when the state can tell.
    pub fn progress(&self) -> Option<Arc<dyn WatchProgress>> {
        self.progress.clone()
    }

    /// The next event, or `None` when the watch has ended.
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.buffered.pop_front() {
                return Some(event);
            }
            self.buffered = self.batches.next().await?.into();
        }
    }

    /// Every event available now (waiting for at least one), or `None` when the watch has ended.
    pub async fn recv_batch(&mut self) -> Option<Vec<Event>> {
        if !self.buffered.is_empty() {
            return Some(self.buffered.drain(..).collect());
        }
        loop {
            let batch = self.batches.next().await?;
            if !batch.is_empty() {
                return Some(batch);
            }
        }
    }
}

impl Stream for Watch {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        loop {
            if let Some(event) = self.buffered.pop_front() {
                return Poll::Ready(Some(event));
            }
            match self.batches.as_mut().poll_next(cx) {
                Poll::Ready(Some(batch)) => self.buffered = batch.into(),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").field("buffered", &self.buffered.len()).finish_non_exhaustive()
    }
}

/// A [`Watch`] whose events are read as resources of type `T`: what
/// [`StateExt::watch`](crate::StateExt::watch) and
/// [`StateExt::watch_kind`](crate::StateExt::watch_kind) return.
///
/// A resource that is not a `T` (another type under the same name, or a spec
/// that does not decode) ends the watch with one [`Event::Errored`], as
/// a failed typed read does.
pub struct TypedWatch<T> {
    watch: Watch,
    ended: bool,
    _type: PhantomData<fn() -> T>,
}

impl<T: Resource> TypedWatch<T> {
    /// The typed view of `watch`.
    pub fn new(watch: Watch) -> Self {
        TypedWatch { watch, ended: false, _type: PhantomData }
    }

    /// The next event, or `None` when the watch has ended.
    pub async fn recv(&mut self) -> Option<Event<Typed<T>>> {
        if self.ended {
            return None;
        }
        let event = self.watch.recv().await?.typed::<T>();
        self.ended = matches!(event, Event::Errored { .. });
        Some(event)
    }

    /// Every event available now (waiting for at least one), or `None` when the watch has ended.
    pub async fn recv_batch(&mut self) -> Option<Vec<Event<Typed<T>>>> {
        if self.ended {
            return None;
        }
        let mut batch = Vec::new();
        for event in self.watch.recv_batch().await? {
            let event = event.typed::<T>();
            let errored = matches!(event, Event::Errored { .. });
            batch.push(event);
            if errored {
                self.ended = true;
                break;
            }
        }
        Some(batch)
    }

    /// The erased watch underneath.
    pub fn into_inner(self) -> Watch {
        self.watch
    }

    /// How far the watch has read its state's history, when the state can
    /// tell ([`Watch::progress`]).
    pub fn progress(&self) -> Option<Arc<dyn WatchProgress>> {
        self.watch.progress()
    }
}

impl<T: Resource> Stream for TypedWatch<T> {
    type Item = Event<Typed<T>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event<Typed<T>>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.watch).poll_next(cx) {
            Poll::Ready(Some(event)) => {
                let event = event.typed::<T>();
                self.ended = matches!(event, Event::Errored { .. });
                Poll::Ready(Some(event))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> fmt::Debug for TypedWatch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedWatch").field("watch", &self.watch).field("ended", &self.ended).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, RandomState};

    use super::Bookmark;

    #[test]
    fn bookmarks_compare_by_bytes_however_they_are_stored() {
        let hasher = RandomState::new();
        for len in [0, 1, 15, 16, 17, 64] {
            let bytes: Vec<u8> = (0..len as u8).collect();
            let inline = Bookmark::from_slice(&bytes);
            let shared = Bookmark::from_bytes(bytes.clone());
            assert_eq!(inline.as_bytes(), &bytes[..]);
            assert_eq!(inline, shared);
            assert_eq!(hasher.hash_one(&inline), hasher.hash_one(&shared));
            assert_eq!(format!("{inline:?}"), format!("{shared:?}"));
        }
        assert_ne!(Bookmark::from_slice(&[1, 2]), Bookmark::from_slice(&[1, 2, 0]));
    }
}
