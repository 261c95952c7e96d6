//! The state and runtime conformance suites against the redb backend, with
//! and without encryption.
//!
//! Each case gets a fresh file in a temporary directory. Every write is
//! durable before it returns, so these runs also check that write-through
//! keeps every rule of the in-memory backend (the suite's `in_process` cases
//! included: typed reads still share the spec that was written), and that
//! controllers work unchanged on a durable state.

mod common;

use common::{TempState, encrypted};
use cosi_redb::Options;

cosi::state_conformance_tests!(redb, || async { TempState::new(Options::default()) }, in_process);

cosi::state_conformance_tests!(redb_encrypted, || async { TempState::new(encrypted()) }, in_process);

cosi::runtime_conformance_tests!(redb_runtime, || async { TempState::new(Options::default()) });
