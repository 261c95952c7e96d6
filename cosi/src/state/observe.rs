//! Observers: the changes of a kind, handed to a callback inside each write.
//!
//! A [`Watch`](crate::state::Watch) is a stream its reader pulls from a task
//! of its own; an observer is called by the writer, in the writer's thread,
//! while the write commits. It costs no task, no buffer and no copy of the
//! event, and it cannot fall behind; in exchange it must be quick and must
//! not block. Only in-process states offer it
//! ([`InProcess::observe_kind`](crate::state::InProcess::observe_kind));
//! the runtime routes its controllers' inputs through it when it can.

use std::fmt;

use crate::state::Event;

/// What a state calls with each change of a kind it is asked to observe.
///
/// [`observe`](Observer::observe) runs inside the write, with the
/// collection's lock held, once per change in the order the state made them
/// (the order of its history): it must not block, panic, or call the state
/// at all (a write, or even a read of the kind it observes, would wait for
/// the lock it runs under). Waking a task or putting an item on a queue is
/// what it is for.
pub trait Observer: Send + Sync + 'static {
    /// One change: `Created`, `Updated` or `Destroyed`, with its bookmark.
    fn observe(&self, event: &Event);
}

/// Keeps an observer registered; dropping it unregisters the observer (no
/// call starts after the drop returns).
#[must_use = "dropping the observation stops it at once"]
pub struct Observation {
    _registration: Box<dyn Send + Sync>,
}

impl Observation {
    /// An observation that ends when `registration` is dropped: a state's
    /// own guard, whose `Drop` unregisters the observer.
    pub fn new(registration: impl Send + Sync + 'static) -> Self {
        Observation { _registration: Box::new(registration) }
    }
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation").finish_non_exhaustive()
    }
}
