//! The example OS: a small, Talos-shaped control plane built on COSI.
//!
//! Work in progress.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod kernel;
pub mod machine_config;
pub mod platform;
pub mod resources;
pub mod sandbox;
pub mod tasks;
pub mod watch;
