//! Watch events and the stream that delivers them.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use futures_util::StreamExt;

use crate::resource::{DynamicResource, Kind};
use crate::state::Error;

/// One change, as a watch delivers it.
#[derive(Clone, Debug)]
pub enum Event {
    /// The resource appeared: it was created, or it started matching the watch's queries,
    /// or it is part of the bootstrap contents.
    Created {
        /// The resource as stored.
        resource: Arc<DynamicResource>,
        /// Where to resume after this event; `None` for bootstrap and initial events.
        bookmark: Option<Bookmark>,
    },
    /// The resource changed.
    Updated {
        /// The resource as stored now.
        resource: Arc<DynamicResource>,
        /// The resource as it was.
        old: Arc<DynamicResource>,
        /// Where to resume after this event.
        bookmark: Option<Bookmark>,
    },
    /// The resource is gone: it was destroyed, or it stopped matching the watch's queries.
    /// For a resource that was absent when a single-resource watch started, `resource` is a tombstone.
    Destroyed {
        /// The last stored state of the resource, or a tombstone.
        resource: Arc<DynamicResource>,
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
    /// The watch failed and ends: no event follows.
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

impl Event {
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

    /// The resource of a `Created`, `Updated` or `Destroyed` event.
    pub fn resource(&self) -> Option<&Arc<DynamicResource>> {
        match self {
            Event::Created { resource, .. } | Event::Updated { resource, .. } | Event::Destroyed { resource, .. } => {
                Some(resource)
            }
            Event::Bootstrapped { .. } | Event::Noop { .. } | Event::Errored { .. } => None,
        }
    }

    /// The previous state, on `Updated` events.
    pub fn old(&self) -> Option<&Arc<DynamicResource>> {
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
}

/// An opaque position in a watch's history, to resume the watch from.
///
/// Only the state that issued a bookmark can read it; any other bookmark,
/// including one from before a restart, is rejected as invalid.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Bookmark(Arc<[u8]>);

impl Bookmark {
    /// A bookmark from its bytes, as they travel on the wire.
    pub fn from_bytes(bytes: impl Into<Arc<[u8]>>) -> Self {
        Bookmark(bytes.into())
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Bookmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bookmark(")?;
        for byte in self.0.iter() {
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
}

impl Watch {
    /// A watch over a stream of batches; for state implementations.
    pub fn from_batches(batches: impl Stream<Item = Vec<Event>> + Send + 'static) -> Self {
        Watch { batches: Box::pin(batches), buffered: VecDeque::new() }
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
