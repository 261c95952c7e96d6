//! The page's HTTP server: hyper-util's connection builder (HTTP/1) over the
//! bound listener, serving the router, with the bounds `axum::serve` has no
//! setting for:
//!
//! - stopping waits at most [`Config::shutdown_grace`] for open
//!   connections, then closes them;
//! - a connection that takes longer than [`Config::header_read_timeout`]
//!   to send a request's headers (or stays idle that long between
//!   requests) is closed (hyper's timer; HTTP/1 only, so that no version
//!   detection reads without a bound first);
//! - at most [`Config::max_connections`] are served at once: the next is
//!   accepted once one closes (until then it waits in the listen backlog);
//! - at most [`Config::max_connections_per_address`] from one peer address:
//!   one more is answered 503 at once and closed, so that one client (a
//!   script holding event streams) cannot take every place;
//! - a connection whose write has waited [`Config::write_timeout`] for the
//!   client to read is closed: a client that stops reading does not hold
//!   its place (nor what the server buffered for it) for good.
//!
//! Accept errors (a connection reset before it was accepted, no file
//! descriptor left) are logged and retried, as `axum::serve` does.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Config;

/// Serves `router` on `listener` until `signal`; then cancels `stopping`
/// (which ends the event streams) and lets connections finish their
/// responses for at most the grace.
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    config: &Config,
    stopping: CancellationToken,
    signal: impl Future<Output = ()>,
) {
    let service = TowerToHyperService::new(router);
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder.http1().timer(TokioTimer::new()).header_read_timeout(config.header_read_timeout);
    let places = Arc::new(Semaphore::new(config.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let addresses =
        Arc::new(Addresses { per_address: config.max_connections_per_address.max(1), ..Addresses::default() });
    let write_timeout = config.write_timeout;
    let connections = TaskTracker::new();
    // Cancelled once the grace is over: what is still open is closed.
    let closing = CancellationToken::new();
    let mut signal = pin!(signal);
    loop {
        let place = tokio::select! {
            () = &mut signal => break,
            place = Arc::clone(&places).acquire_owned() => place,
        };
        // Never closed, so never an error.
        let Ok(place) = place else { break };
        let (stream, peer) = tokio::select! {
            () = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, peer),
                Err(error) => {
                    if !is_connection_error(&error) {
                        tracing::warn!("the page's server cannot accept a connection: {error}");
                        tokio::select! {
                            () = &mut signal => break,
                            () = tokio::time::sleep(Duration::from_secs(1)) => (),
                        }
                    }
                    continue;
                }
            },
        };
        // An IPv4 address mapped into IPv6 is that IPv4 address.
        let address = peer.ip().to_canonical();
        let Some(share) = addresses.enter(address) else {
            connections.spawn(refuse(stream, address, addresses.per_address, place));
            continue;
        };
        let (builder, service) = (builder.clone(), service.clone());
        let (stopping, closing) = (stopping.clone(), closing.clone());
        connections.spawn(async move {
            let _held = (place, share);
            let stream = WriteTimeout::new(stream, write_timeout);
            let mut connection = pin!(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                _ = connection.as_mut() => return,
                () = stopping.cancelled() => connection.as_mut().graceful_shutdown(),
            }
            tokio::select! {
                _ = connection => (),
                () = closing.cancelled() => (),
            }
        });
    }
    stopping.cancel();
    drop(listener);
    connections.close();
    if tokio::time::timeout(config.shutdown_grace, connections.wait()).await.is_err() {
        tracing::debug!(connections = connections.len(), "closing the page's connections still open after the grace");
        closing.cancel();
        connections.wait().await;
    }
}

/// An error of one connection, not of the listener: the next accept may succeed at once.
fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// How long a refused connection may take to receive its answer.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Answers a connection over its address's share with a 503 that says why,
/// and closes it: within [`REFUSAL_LINGER`], holding its place (not its
/// address's share) meanwhile.
async fn refuse(mut stream: TcpStream, address: IpAddr, per_address: usize, place: OwnedSemaphorePermit) {
    let _place = place;
    tracing::debug!(%address, limit = per_address, "refused a connection of the page over its address's share");
    let error = serde_json::json!({
        "error": format!(
            "too many connections from {address}: this page serves at most {per_address} at once from one address \
             (each open page holds one for its events); close some and try again"
        )
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{error}",
        error.len()
    );
    let answer = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // What the client sent is read until it closes: closing with unread
        // data would reset the connection, which can discard the answer.
        let mut sink = [0; 1024];
        while stream.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    };
    // A client that reads nothing loses the answer, not the server its time.
    let _ = tokio::time::timeout(REFUSAL_LINGER, answer).await;
}

/// The open connections of each peer address (see [`Config::max_connections_per_address`]).
#[derive(Debug, Default)]
struct Addresses {
    per_address: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl Addresses {
    /// Counts one more connection of `address`, unless it has its share already.
    fn enter(self: &Arc<Self>, address: IpAddr) -> Option<AddressShare> {
        let mut open = self.open.lock();
        let count = open.entry(address).or_insert(0);
        if *count >= self.per_address {
            return None;
        }
        *count += 1;
        Some(AddressShare { addresses: Arc::clone(self), address })
    }
}

/// One connection counted against its address, until dropped.
struct AddressShare {
    addresses: Arc<Addresses>,
    address: IpAddr,
}

impl Drop for AddressShare {
    fn drop(&mut self) {
        let mut open = self.addresses.open.lock();
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// A connection whose writes fail (`TimedOut`) once one has waited
/// `timeout` for the client to take data: hyper then closes it. Any
/// progress starts the wait over, so a slow client that reads is not
/// dropped; reads are not bounded here (the header read timeout and the
/// event streams' own ends do that).
struct WriteTimeout<S> {
    io: S,
    timeout: Duration,
    /// Set while a write waits: when it fires, the write fails.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteTimeout<S> {
    fn new(io: S, timeout: Duration) -> Self {
        WriteTimeout { io, timeout, stalled: None }
    }

    /// What a write that is not ready yet answers: pending, until it has
    /// waited the timeout. Progress clears the wait.
    fn waited<T>(&mut self, cx: &mut Context<'_>, polled: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let timeout = self.timeout;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client took nothing for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.waited(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.waited(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.waited(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_shutdown(cx);
        self.waited(cx, polled)
    }
}
