//! The example OS: a small, Talos-shaped control plane built on COSI, whose
//! every side effect is a file in a sandbox directory.
//!
//! `cargo run --example os` boots it in `./sandbox` ([`Os::boot`]); edit
//! `sandbox/machine.yaml` while it runs and watch the controllers reconcile,
//! in the logs or with `cosictl -e unix:sandbox/cosi.sock get ...`.
//!
//! - [`resources`]: 17 resource types in 5 namespaces (`config`,
//!   `network-config`, `network`, `files`, `runtime`), besides `meta`.
//! - [`controllers`]: 19 registrations, all listed in
//!   [`controllers::ExampleOs`] (`cosi::system!`, the three merges under
//!   their names, [`controllers::MERGES`]) and checked as one graph when the
//!   crate builds.
//! - [`sandbox`]: the one way to every file, refusing paths and links that
//!   lead outside. [`kernel`]: the fake kernel (`run/kernel/net.json`,
//!   `proc/sys`). [`watch`]: file events that wake controllers.
//! - [`machine_config`], [`platform`]: the files the user edits.
//!
//! The `config` namespace is kept in a redb file in the sandbox
//! (`var/lib/cosi/config.redb`), so a second boot starts from the last
//! accepted configuration; the rest lives in memory, as in Talos.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod boot;
pub mod controllers;
mod env;
mod error;
pub mod kernel;
pub mod logging;
pub mod machine_config;
pub mod platform;
pub mod resources;
pub mod sandbox;
pub mod tasks;
pub mod watch;

pub use boot::{CONFIG_STORE, Options, Os};
pub use env::{CMDLINE, Env, MACHINE_STATUS_JSON, MACHINE_YAML, PLATFORM_JSON, SOCKET, Timings};
pub use error::Error;
