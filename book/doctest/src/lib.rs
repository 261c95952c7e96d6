//! The book (`book/src`), one module per chapter, so that `cargo test -p
//! cosi-book` compiles and runs every Rust snippet in it as a doctest; the
//! README's too (its snippet runs until Ctrl-C, so it is only compiled). A
//! snippet meant not to build is a `compile_fail` doctest with the error code
//! the chapter shows; `tests/chapters.rs` checks that the compiler messages
//! the chapters quote are the ones `ui-tests/` records, and that the graphs
//! are the ones the runtime exports.

#![forbid(unsafe_code)]

#[doc = include_str!("../../src/introduction.md")]
pub mod introduction {}
#[doc = include_str!("../../src/first-crate.md")]
pub mod first_crate {}
#[doc = include_str!("../../src/resources.md")]
pub mod resources {}
#[doc = include_str!("../../src/state.md")]
pub mod state {}
#[doc = include_str!("../../src/controllers.md")]
pub mod controllers {}
#[doc = include_str!("../../src/engine.md")]
pub mod engine {}
#[doc = include_str!("../../src/wire.md")]
pub mod wire {}
#[doc = include_str!("../../src/recipes.md")]
pub mod recipes {}
#[doc = include_str!("../../src/example-os.md")]
pub mod example_os {}
#[doc = include_str!("../../../README.md")]
pub mod readme {}
