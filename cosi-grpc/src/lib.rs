//! COSI's state broker over gRPC, wire-compatible with Go COSI
//! (`cosi-project/runtime`, specification v1alpha1).
//!
//! - [`Server`] serves any [`State`](cosi::state::State) as the
//!   `cosi.resource.State` service, on a Unix socket (mode 0600) or on TCP with
//!   mutual TLS; Go COSI's gRPC client works against it unchanged.
//! - [`Client`] is a remote state as a `State`: controllers and the runtime
//!   run against it as they run against an in-process state.
//!
//! ```no_run
//! # async fn example() -> cosi::Result<()> {
//! use cosi::prelude::*;
//! use cosi_grpc::{Client, ClientSecurity, Endpoint, Security, Server};
//!
//! let endpoint: Endpoint = "unix:/run/cosi.sock".parse()?;
//! let listening = Server::new(cosi::state::memory()).bind(&endpoint, Security::Insecure).await?;
//! tokio::spawn(listening.serve());
//!
//! let state = Client::connect(&endpoint, ClientSecurity::Insecure).await?;
//! let namespaces = state.list_dynamic(&Kind::new("meta", "Namespaces.meta.cosi.dev"), &ListOptions::default()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Typed Rust specs travel as YAML in `yaml_spec` (see `BENCHMARKS.md` for its
//! cost); specs written by other clients are stored and returned byte for byte.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admission;
mod auth;
mod authority;
mod client;
mod connection;
pub(crate) mod convert;
mod endpoint;
pub mod limits;
pub mod proto;
mod server;
mod service;
mod status;
#[cfg(feature = "testing")]
pub mod testing;

/// Not API: what a Unix socket's client sends, rewritten as the server reads
/// it, for the fuzz targets of the workspace's `fuzz/`.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    /// What the server reads when a client sends `sent` on a Unix socket and
    /// closes (see `authority`), with header lists of at most 64 KiB.
    pub fn rewrite_unix_client(sent: &[u8]) -> std::io::Result<Vec<u8>> {
        crate::authority::rewrite_all(sent, 64 << 10)
    }
}

pub use auth::{ADMIN_ROLE, READER_ROLE, Role};
pub use client::{Client, ClientSecurity, ClientTls, ConnectError, RetryOptions};
pub use connection::TlsConfigError;
pub use convert::definition_from_spec;
pub use endpoint::{Endpoint, EndpointError};
pub use limits::{DEFAULT_CLIENT_MAX_MESSAGE_SIZE, DEFAULT_MAX_MESSAGE_SIZE, Limits, connections_per_address};
pub use server::{Listening, Security, ServeError, Server, ServerTls};
pub use service::StateService;
pub use status::RemoteError;
