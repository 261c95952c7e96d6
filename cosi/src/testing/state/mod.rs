//! The state conformance cases: one `pub async fn` per case, each taking the backend under test.
//!
//! The cases up to [`modify_with_owner`] port Go COSI's `StateSuite` with the
//! same assertions (often stricter: where Go checks that an expected event
//! arrives eventually, these check the exact sequence). The rest pin down the
//! Rust contract: the compound operations every backend inherits from
//! [`State`](crate::state::State)'s default methods, buffer overruns, bookmark validation and
//! resumption, and input validation.
//!
//! Each case panics with a message naming what went wrong; each works in
//! namespaces of its own, so it can run against a shared backend. Run them
//! all with [`state_conformance_tests!`](crate::state_conformance_tests).
//!
//! The cases live in one file per subject; the shared steps are in `support.rs`.

use std::time::Duration;

/// How long one step of a case (a call, an event, a joined task) may take.
///
/// A guard against a backend that hangs, so that it fails the case rather
/// than the whole test run; no case relies on it for timing.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// How many events [`buffer_overrun`] writes without reading: more than any
/// backend's watch history should hold (the in-memory default keeps 1024).
pub const OVERRUN_WRITES: u64 = 10_000;

mod bookmarks;
mod crud;
mod invalid_input;
mod query;
mod support;
mod teardown;
mod watch;

pub use bookmarks::*;
pub use crud::*;
pub use invalid_input::*;
pub use query::*;
pub use teardown::*;
pub use watch::*;
