//! Conformance suites that every [`State`] backend runs (feature `testing`).
//!
//! A backend is conformant when it passes the same cases as the in-memory
//! state: the cases port Go COSI's `pkg/state/conformance` suite and add the
//! Rust contract on top (buffer overruns, bookmark validation, input checks).
//!
//! # Running the suite
//!
//! One macro call in an integration test instantiates every case of
//! [`state`] as a test of its own, in a module named after the backend, so a
//! failure reads `memory::watch_kind_with_bookmarks` or `grpc::crd`:
//!
//! ```
//! use std::sync::Arc;
//!
//! use cosi::state::{MemoryState, NamespacedState, State};
//!
//! cosi::state_conformance_tests!(memory, || async { MemoryState::default() }, in_process);
//!
//! cosi::state_conformance_tests!(namespaced, || async {
//!     NamespacedState::new(|_| Arc::new(MemoryState::default()) as Arc<dyn State>)
//! });
//! # fn main() {}
//! ```
//!
//! The second argument is the factory: a closure (or function) returning a
//! future that resolves to the backend, any `S: State` (an `Arc<dyn State>`
//! will do). It runs once per case, inside the case's runtime, so it may start
//! servers and open connections. Whatever must live as long as the case (a
//! server task, a temporary directory) belongs inside the returned state, or
//! in a task spawned on the runtime.
//!
//! Each case runs on its own multi-threaded tokio runtime with two workers, as
//! `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` would, so the
//! concurrency cases race for real. The test crate needs no tokio dependency
//! of its own: the runtime is built by [`run_case`], through `$crate`.
//!
//! The optional third argument, `in_process`, adds the cases that only hold
//! for backends living in the test's process ([`state::typed_reads_share_specs`],
//! [`state::observers`]).
//!
//! # What the cases need from a backend
//!
//! - **A shared backend is fine.** Every case works in fresh namespaces of its
//!   own (`conformance-<case>-<random>`), assumes nothing about other
//!   namespaces and leaves its resources behind; run the suite against a
//!   long-lived server as often as you like.
//! - **Any namespace name.** The cases create namespaces on the fly; a
//!   backend that only serves configured namespaces must route the others to
//!   something that behaves like it.
//! - **Bounded watch history.** [`state::buffer_overrun`] writes 10 000 events
//!   without reading and expects the watchers to be told they fell behind, so
//!   a backend must keep fewer events than that and must never make writers
//!   wait for watchers.
//! - **Bookmarks that are checked.** [`state::invalid_bookmark`] expects
//!   corrupted bookmarks and bookmarks of other namespaces and types to be
//!   rejected with [`Error::InvalidBookmark`](crate::Error::InvalidBookmark)
//!   when the watch is set up, not later.
//! - **Events in write order**, each with a bookmark (except the initial and
//!   bootstrap events), and tail events of at least the last few writes of a
//!   fresh (namespace, type).
//! - **Errors of the right variant**: the cases check
//!   [`Error::is_not_found`](crate::Error::is_not_found),
//!   [`is_conflict`](crate::Error::is_conflict),
//!   [`is_owner_conflict`](crate::Error::is_owner_conflict),
//!   [`is_phase_conflict`](crate::Error::is_phase_conflict),
//!   [`is_invalid_bookmark`](crate::Error::is_invalid_bookmark) and
//!   [`is_invalid_argument`](crate::Error::is_invalid_argument), so a remote
//!   backend must carry the kind of error across the wire.
//!
//! No case sleeps to synchronize. Every await is guarded by
//! [`state::STEP_TIMEOUT`], so a backend that hangs fails the case instead of
//! the whole run; on the in-memory backend the suite takes about a second.

pub mod resources;
pub mod runtime;
pub mod server;
pub mod state;

use std::future::Future;
use std::sync::Arc;

use crate::state::State;

/// Runs one conformance case against a fresh backend from `factory`, on a
/// multi-threaded runtime with two workers; panics when the case fails.
///
/// [`state_conformance_tests!`](crate::state_conformance_tests) calls this for
/// every case; call it directly to run a single case:
///
/// ```
/// cosi::testing::run_case(|| async { cosi::state::MemoryState::default() }, cosi::testing::state::crd);
/// ```
pub fn run_case<F, Fut, S, C, CaseFut>(factory: F, case: C)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = S>,
    S: State,
    C: FnOnce(Arc<dyn State>) -> CaseFut,
    CaseFut: Future<Output = ()>,
{
    runtime().block_on(async move {
        let state: Arc<dyn State> = Arc::new(factory().await);
        case(state).await;
    });
}

/// [`run_case`] for a backend that may be unavailable, such as one that needs a
/// server the machine lacks: when `factory` resolves to `None` the case passes
/// without running (the factory says why, and how to get the server).
///
/// [`state_conformance_tests!`](crate::state_conformance_tests) with `optional` calls this.
pub fn run_optional_case<F, Fut, S, C, CaseFut>(factory: F, case: C)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Option<S>>,
    S: State,
    C: FnOnce(Arc<dyn State>) -> CaseFut,
    CaseFut: Future<Output = ()>,
{
    runtime().block_on(async move {
        if let Some(state) = factory().await {
            let state: Arc<dyn State> = Arc::new(state);
            case(state).await;
        }
    });
}

/// The runtime of one case: multi-threaded, two workers, as `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("cannot build the tokio runtime of a conformance case")
}

/// Instantiates the state conformance suite for one backend: every case of
/// [`testing::state`](crate::testing::state) becomes a `#[test]` in a module
/// named `$name`.
///
/// ```
/// cosi::state_conformance_tests!(memory, || async { cosi::state::MemoryState::default() });
/// # fn main() {}
/// ```
///
/// - `$name`: the module, which names the backend in test output (`memory::crd`).
/// - `$factory`: called once per case; returns a future of the backend, any
///   `S: State`. Items of the calling module are in scope.
/// - `in_process` (optional): also run the cases that only hold for backends
///   in the test's process, which share specs instead of copying them and
///   offer observers.
/// - `optional` (instead): the factory returns a future of `Option<S>`, and each
///   case passes without running when it is `None` ([`run_optional_case`]).
/// - `optional, lenient`: as `optional`, without the two cases where `cosi` is
///   stricter than Go COSI on purpose ([`state::invalid_bookmark`]: Go takes a
///   bookmark of another namespace of the same type; [`state::invalid_input`]:
///   Go takes empty namespaces and IDs, and stores the owner an update's
///   metadata names). For running the suite against a Go COSI peer.
///
/// See the [`testing`](crate::testing) module for what the cases expect of a backend.
#[macro_export]
macro_rules! state_conformance_tests {
    ($name:ident, $factory:expr, in_process $(,)?) => {
        $crate::__state_conformance_module!(
            $name,
            $factory,
            run_case,
            [invalid_bookmark, invalid_input, typed_reads_share_specs, observers,]
        );
    };
    ($name:ident, $factory:expr, optional, lenient $(,)?) => {
        $crate::__state_conformance_module!($name, $factory, run_optional_case, []);
    };
    ($name:ident, $factory:expr, optional $(,)?) => {
        $crate::__state_conformance_module!($name, $factory, run_optional_case, [invalid_bookmark, invalid_input]);
    };
    ($name:ident, $factory:expr $(,)?) => {
        $crate::__state_conformance_module!($name, $factory, run_case, [invalid_bookmark, invalid_input]);
    };
}

/// The body of [`state_conformance_tests!`]; the list of cases lives here, once
/// (the strict ones, which every form but `lenient` adds, in the macro above).
#[doc(hidden)]
#[macro_export]
macro_rules! __state_conformance_module {
    (@cases $name:ident, $factory:expr, $runner:ident, [$($case:ident),* $(,)?]) => {
        mod $name {
            // The factory is written in the calling module.
            #[allow(unused_imports)]
            use super::*;

            $(
                #[test]
                fn $case() {
                    $crate::testing::$runner($factory, $crate::testing::state::$case);
                }
            )*
        }
    };
    ($name:ident, $factory:expr, $runner:ident, [$($extra:ident),* $(,)?]) => {
        $crate::__state_conformance_module!(@cases $name, $factory, $runner, [
            crd,
            update_with_conflicts,
            crd_with_owners,
            watch_kind,
            watch_kind_aggregated,
            watch_kind_with_tail_events,
            watch_kind_aggregated_with_tail_events,
            watch_kind_with_labels,
            watch_kind_aggregated_with_labels,
            concurrent_finalizers,
            watch_for,
            watch,
            watch_with_tail_events,
            watch_with_tail_events_of_interleaved_ids,
            watch_with_bookmarks,
            watch_kind_with_bookmarks,
            parallel_destroy,
            teardown_destroy,
            update,
            labels,
            id_query,
            teardown_notifies_watchers,
            teardown_and_destroy,
            modify,
            modify_with_owner,
            teardown_is_idempotent,
            finalizer_edits_are_idempotent,
            racy_teardown_and_destroy,
            buffer_overrun,
            resume_from_bookmark,
            $($extra,)*
        ]);
    };
}

/// Instantiates the runtime conformance suite for one backend: every case of
/// [`testing::runtime`](mod@crate::testing::runtime) becomes a `#[test]` in a
/// module named `$name`, run against a fresh backend from `$factory` (as for
/// [`state_conformance_tests!`]).
///
/// ```
/// cosi::runtime_conformance_tests!(memory, || async { cosi::state::MemoryState::default() });
/// # fn main() {}
/// ```
///
/// With `optional` as the third argument, the factory returns a future of
/// `Option<S>`, and each case passes without running when it is `None`
/// ([`run_optional_case`]), as for [`state_conformance_tests!`].
#[macro_export]
macro_rules! runtime_conformance_tests {
    ($name:ident, $factory:expr, optional $(,)?) => {
        $crate::__runtime_conformance_module!($name, $factory, run_optional_case);
    };
    ($name:ident, $factory:expr $(,)?) => {
        $crate::__runtime_conformance_module!($name, $factory, run_case);
    };
}

/// The body of [`runtime_conformance_tests!`]; the list of cases lives here, once.
#[doc(hidden)]
#[macro_export]
macro_rules! __runtime_conformance_module {
    (@cases $name:ident, $factory:expr, $runner:ident, [$($case:ident),* $(,)?]) => {
        mod $name {
            // The factory is written in the calling module.
            #[allow(unused_imports)]
            use super::*;

            $(
                #[test]
                fn $case() {
                    $crate::testing::$runner($factory, $crate::testing::runtime::$case);
                }
            )*
        }
    };
    ($name:ident, $factory:expr, $runner:ident) => {
        $crate::__runtime_conformance_module!(
            @cases
            $name,
            $factory,
            $runner,
            [
                no_controllers,
                int_to_str,
                int_to_str_to_sentence,
                sum,
                sum_filtered,
                cascading_sum,
                failing,
                panicking,
                int_doubler,
                modify_with_result,
                runtime_metrics,
                queue_int_to_str,
                queue_failing,
                queue_sleeping,
            ]
        );
    };
}
