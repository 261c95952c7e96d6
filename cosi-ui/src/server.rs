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
//!   accepted once one closes (until then it waits in the listen backlog).
//!
//! Accept errors (a connection reset before it was accepted, no file
//! descriptor left) are logged and retried, as `axum::serve` does.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
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
        let stream = tokio::select! {
            () = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
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
        let (builder, service) = (builder.clone(), service.clone());
        let (stopping, closing) = (stopping.clone(), closing.clone());
        connections.spawn(async move {
            let _place = place;
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
