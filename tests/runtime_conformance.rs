//! The runtime conformance suite (`cosi::testing::runtime`) on the in-process backends.
//!
//! In-process states route the runtime's inputs through observers; the
//! `watched` variants keep only the state's primitives (`Primitives`), so the
//! watch tasks a remote state gets run here too.

use std::sync::Arc;

use cosi::state::{MemoryOptions, MemoryState, NamespacedState, Primitives, State};

fn small_history() -> MemoryState {
    MemoryState::new(MemoryOptions { history_initial_capacity: 4, history_max_capacity: 32, history_gap: 1 })
        .expect("valid history settings")
}

cosi::runtime_conformance_tests!(memory, || async { MemoryState::default() });

cosi::runtime_conformance_tests!(namespaced, || async {
    NamespacedState::new(|_| Arc::new(MemoryState::default()) as Arc<dyn State>)
});

cosi::runtime_conformance_tests!(watched, || async { Primitives(MemoryState::default()) });

// A small history: the runtime's watches fall behind and must start over without losing a change.
cosi::runtime_conformance_tests!(watched_small_history, || async { Primitives(small_history()) });
