//! The in-process face of a state: answers and writes without a future, and observers.
//!
//! A state in this process can read, and often write, without waiting for
//! anything, and can call back inside its writes. [`State::in_process`] hands
//! out this face; remote states have none. Callers reach it through the
//! helpers here, which fall back to the [`State`] primitives when the state
//! (or, behind a router, the route) cannot answer at once.

use std::sync::Arc;

use crate::resource::{DynamicResource, Kind, Pointer};
use crate::state::{CreateOptions, ListOptions, Observation, Observer, Result, State, UpdateOptions};

/// What an in-process state does without a future: reads and writes that
/// answer at once, and [`Observer`]s (see [`State::in_process`]).
///
/// Each method may decline, with `None` or [`Immediate::Deferred`], when this
/// call cannot be answered at once (a router whose route is remote, a write
/// that waits for a backing store); the caller then calls the [`State`]
/// method. When a method answers, the answer is the one the [`State`] method
/// would give.
pub trait InProcess: Send + Sync {
    /// [`State::get_dynamic`], answered at once.
    fn get_now(&self, pointer: &Pointer) -> Option<Result<DynamicResource>>;

    /// [`State::list_dynamic`], answered at once.
    fn list_now(&self, kind: &Kind, options: &ListOptions) -> Option<Result<Vec<DynamicResource>>>;

    /// [`State::create_dynamic`] done at once, else the resource handed back.
    ///
    /// An in-memory state stores the resource's allocation as it is when
    /// nobody else holds it: no copy, no second allocation.
    fn create_now(&self, resource: DynamicResource, options: &CreateOptions) -> Immediate<DynamicResource>;

    /// [`State::update_dynamic`] done at once, else the resource handed back.
    fn update_now(&self, resource: DynamicResource, options: &UpdateOptions) -> Immediate<DynamicResource>;

    /// Calls `observer` with every change of `kind` from now on, inside each
    /// write and in the order of the kind's history, until the returned
    /// [`Observation`] is dropped; `None` when it cannot, so the caller
    /// watches the kind instead.
    ///
    /// An observer is a watch without a task, a buffer or a copy of the
    /// event, which never falls behind: what the runtime routes its
    /// controllers' inputs through when it can. An observation keeps the
    /// kind's collection alive as a watch does. See [`Observer`] for what an
    /// observer may do.
    fn observe_kind(&self, kind: &Kind, observer: Arc<dyn Observer>) -> Option<Result<Observation>>;
}

/// A write done at once, or handed back to be done the usual way (see
/// [`InProcess::create_now`]).
#[derive(Debug)]
pub enum Immediate<T> {
    /// Done: what the [`State`] method would have returned.
    Done(Result<T>),
    /// Not done, because the write would wait: the resource, to pass to the
    /// [`State`] method.
    Deferred(DynamicResource),
}

/// `state`'s answer to a get without a future, if it has one.
pub(crate) fn get_now<S: State + ?Sized>(state: &S, pointer: &Pointer) -> Option<Result<DynamicResource>> {
    state.in_process()?.get_now(pointer)
}

/// `state`'s answer to a list without a future, if it has one.
pub(crate) fn list_now<S: State + ?Sized>(
    state: &S,
    kind: &Kind,
    options: &ListOptions,
) -> Option<Result<Vec<DynamicResource>>> {
    state.in_process()?.list_now(kind, options)
}

/// A create done by `state` at once, if it can.
pub(crate) fn create_now<S: State + ?Sized>(
    state: &S,
    resource: DynamicResource,
    options: &CreateOptions,
) -> Immediate<DynamicResource> {
    match state.in_process() {
        Some(in_process) => in_process.create_now(resource, options),
        None => Immediate::Deferred(resource),
    }
}

/// An update done by `state` at once, if it can.
pub(crate) fn update_now<S: State + ?Sized>(
    state: &S,
    resource: DynamicResource,
    options: &UpdateOptions,
) -> Immediate<DynamicResource> {
    match state.in_process() {
        Some(in_process) => in_process.update_now(resource, options),
        None => Immediate::Deferred(resource),
    }
}

/// `state`'s observation of `kind`, if it offers observers.
pub(crate) fn observe_kind<S: State + ?Sized>(
    state: &S,
    kind: &Kind,
    observer: Arc<dyn Observer>,
) -> Option<Result<Observation>> {
    state.in_process()?.observe_kind(kind, observer)
}
