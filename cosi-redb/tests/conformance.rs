//! The state conformance suite against the redb backend, with and without encryption.
//!
//! Each case gets a fresh file in a temporary directory. Every write is
//! durable before it returns, so these runs also check that write-through
//! keeps every rule of the in-memory backend (the suite's `in_process` cases
//! included: typed reads still share the spec that was written).

//!
//! The runtime conformance suite takes the same factory: once the runtime is
//! in `cosi`, it runs here with one more call,
//! `cosi::runtime_conformance_tests!(redb, || async { TempState::new(Options::default()) });`.

mod common;

use common::{TempState, encrypted};
use cosi_redb::Options;

cosi::state_conformance_tests!(redb, || async { TempState::new(Options::default()) }, in_process);

cosi::state_conformance_tests!(redb_encrypted, || async { TempState::new(encrypted()) }, in_process);
