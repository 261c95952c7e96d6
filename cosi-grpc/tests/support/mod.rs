//! Shared helpers of the integration tests: a server on loopback and a client connected to it.
//!
//! Suites are instantiated through [`loopback`], so any suite that takes a
//! `State` (the state conformance suite today, the runtime suite next) runs
//! over gRPC with one line.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use cosi::state::{MemoryState, State};
use cosi_grpc::{Client, ClientSecurity, Endpoint, Limits, Security, Server};
use hyper_util::rt::TokioIo;

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

/// Serves `state` on a free loopback TCP port (insecure) for as long as the
/// calling runtime lives, and returns its address, for raw clients.
pub async fn listen(state: impl State) -> std::net::SocketAddr {
    let listening = Server::new(state)
        .bind(&"tcp://127.0.0.1:0".parse().expect("a valid endpoint"), Security::Insecure)
        .await
        .expect("the server binds");
    let Endpoint::Tcp(address) = *listening.endpoint() else { unreachable!("a TCP endpoint") };
    tokio::spawn(listening.serve());
    address
}

/// A raw watch of the kind `namespace`/`type`, aggregated, from its contents.
pub fn bootstrap_watch(namespace: &str, r#type: &str, api_version: i32) -> cosi_grpc::proto::WatchRequest {
    cosi_grpc::proto::WatchRequest {
        namespace: namespace.into(),
        r#type: r#type.into(),
        id: None,
        options: Some(cosi_grpc::proto::WatchOptions {
            bootstrap_contents: true,
            aggregated: true,
            ..Default::default()
        }),
        api_version,
    }
}

/// Serves `state` within `limits` over an in-memory pipe on the current
/// runtime and returns a client of it (one connection, never dialled again).
/// Nothing between them waits on the wall clock or on I/O outside the
/// runtime, so a test may pause tokio's clock: time moves only when both ends
/// wait for it. The server's keepalive and request timeout are set beyond
/// any test.
pub fn over_a_pipe(state: impl State, limits: Limits) -> Client {
    let day = Duration::from_secs(24 * 60 * 60);
    let limits = Limits { keepalive_interval: day, keepalive_timeout: day, request_timeout: day, ..limits };
    let (client_end, server_end) = tokio::io::duplex(64 << 10);
    let incoming = futures_util::stream::iter([Ok::<_, std::io::Error>(server_end)]);
    tokio::spawn(Server::new(state).limits(limits).serve_incoming(incoming));
    let mut client_end = Some(client_end);
    let connector = tower::service_fn(move |_| {
        let io = client_end.take().map(TokioIo::new).ok_or_else(|| std::io::Error::other("one connection"));
        std::future::ready(io)
    });
    Client::from_channel(tonic::transport::Endpoint::from_static("http://pipe").connect_with_connector_lazy(connector))
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
