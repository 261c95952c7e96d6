//! Shared helpers of the integration tests: a server on loopback and a client connected to it.
//!
//! Suites are instantiated through [`loopback`], so any suite that takes a
//! `State` (the state conformance suite today, the runtime suite next) runs
//! over gRPC with one line.

#![allow(dead_code)]

use std::path::PathBuf;

use cosi::state::{MemoryState, State};
use cosi_grpc::{Client, ClientSecurity, Endpoint, Security, Server};

/// Serves `state` on a free loopback TCP port (insecure, as `cosictl serve --insecure` does)
/// for as long as the calling runtime lives, and returns a client connected to it.
pub async fn loopback(state: impl State) -> Client {
    serve(state, &"tcp://127.0.0.1:0".parse().expect("a valid endpoint")).await
}

/// A fresh in-memory state served on loopback.
pub async fn loopback_memory() -> Client {
    loopback(MemoryState::default()).await
}

/// A fresh in-memory state served on a Unix socket in a fresh directory.
pub async fn unix_memory() -> Client {
    serve(MemoryState::default(), &Endpoint::Unix(socket_path())).await
}

/// Serves `state` on `endpoint` in a background task and connects to it.
pub async fn serve(state: impl State, endpoint: &Endpoint) -> Client {
    let listening = Server::new(state).bind(endpoint, Security::Insecure).await.expect("the server binds");
    let endpoint = listening.endpoint().clone();
    tokio::spawn(listening.serve());
    Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("the client connects")
}

/// A socket path in a directory of its own under the system's temporary directory.
pub fn socket_path() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cosi-grpc-test-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir).expect("create the socket directory");
    dir.join("state.sock")
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
