//! The state conformance suite (`cosi::testing::state`) against the in-process backends.
//!
//! Each instantiation is a module of tests named after the backend, such as
//! `memory::watch_kind_with_bookmarks`. Go COSI runs its suite against the
//! in-memory state with its default history and with two smaller ones; the
//! small histories are where the history window arithmetic (growth, gap,
//! overrun) is exercised hardest.
//!
//! The in-memory state implements only the primitive operations, so these
//! runs also test `State`'s default teardown, finalizer and
//! `teardown_and_destroy` methods (see the cases `teardown_is_idempotent`,
//! `finalizer_edits_are_idempotent` and `racy_teardown_and_destroy`).

use std::sync::Arc;

use cosi::state::{MemoryOptions, MemoryState, NamespacedState, State};

fn memory_with(history_initial_capacity: usize, history_max_capacity: usize, history_gap: usize) -> MemoryState {
    MemoryState::new(MemoryOptions { history_initial_capacity, history_max_capacity, history_gap })
        .expect("valid history settings")
}

cosi::state_conformance_tests!(memory, || async { MemoryState::default() }, in_process);

cosi::state_conformance_tests!(memory_gap_2, || async { memory_with(8, 1024, 2) }, in_process);

cosi::state_conformance_tests!(memory_small_history, || async { memory_with(4, 32, 1) }, in_process);

cosi::state_conformance_tests!(
    namespaced,
    || async { NamespacedState::new(|_| Arc::new(MemoryState::default()) as Arc<dyn State>) },
    in_process
);

// A factory may return an `Arc<dyn State>` as well.
cosi::state_conformance_tests!(shared, || async { cosi::state::memory() });
