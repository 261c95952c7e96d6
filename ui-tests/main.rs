//! Compile-fail and compile-pass tests of the macros: `<macro>/fail/<rule-broken>.rs`
//! with the expected diagnostics beside it in `.stderr`, and `<macro>/pass/*.rs`.
//!
//! The `.stderr` snapshots are written for the pinned toolchain
//! (`rust-toolchain.toml`, 1.95.0), since rustc's rendering changes between
//! releases. After a toolchain bump or a change of a message, refresh them with
//! `TRYBUILD=overwrite cargo test --test ui` and review the diff: each should
//! stay one short diagnostic under the offending token.

#![forbid(unsafe_code)]

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui-tests/*/fail/*.rs");
    cases.pass("ui-tests/*/pass/*.rs");
}
