//! What one client may cost the server: every bound on untrusted input and on
//! the resources a connection can hold, in one place, each with its reason.
//!
//! A server faces clients it does not trust (a reader certificate is enough to
//! open watches and send queries), so nothing a request carries may size the
//! server's memory or time beyond these bounds. [`Limits`] holds the ones an
//! operator tunes (`cosictl serve` has a flag for each); the constants are
//! bounds on query shapes that no legitimate client comes near.
//!
//! Exceeding a limit is a clear status for that call only (`RESOURCE_EXHAUSTED`
//! for the watch counts, `INVALID_ARGUMENT` for oversized queries,
//! `OUT_OF_RANGE` for oversized messages); the connection and every other
//! client go on.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tonic::Status;

/// The default limit on a request message: 4 MiB, gRPC's usual limit (and Go's default).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

/// The encoded size a watch response aims for: 1 MiB.
///
/// A batch of events (a kind's bootstrap, for one) is sent in as many
/// responses as it takes to keep each near this size, so any batch fits
/// gRPC's 4 MiB default whatever the kind holds. Small enough that a client
/// with Go's default receive limit reads every frame, large enough that the
/// per-message overhead is negligible.
pub const WATCH_RESPONSE_TARGET: usize = 1 << 20;

/// The longest ID query pattern, in bytes: IDs are short names, and a pattern
/// is compiled and kept for the life of a watch.
pub const MAX_ID_QUERY_LEN: usize = 4 << 10;

/// The largest compiled ID query, in bytes (regex's compiled program and its
/// lazy DFA cache each): a hostile pattern such as `(a{1000}){1000}` fails to
/// compile instead of pinning megabytes per watch. Patterns with many Unicode
/// classes (`\w{100}`) exceed it; their ASCII forms (`(?-u:\w){100}`) do not.
pub const ID_QUERY_SIZE_LIMIT: usize = 1 << 20;

/// The most label queries one request may carry (they are alternatives; a
/// handful covers every selector Talos uses).
pub const MAX_LABEL_QUERIES: usize = 16;

/// The most terms one label query may carry.
pub const MAX_LABEL_TERMS: usize = 64;

/// The most values one label term may carry (an `In` list).
pub const MAX_LABEL_VALUES: usize = 256;

/// The most bytes of keys and values all label queries of a request may carry:
/// a query is kept for the life of a watch and run against every event.
pub const MAX_LABEL_QUERY_BYTES: usize = 64 << 10;

/// The bounds a [`Server`](crate::Server) puts on its clients; see the module
/// documentation. `Default` gives the values documented on each field.
/// Build one with struct update syntax: `Limits { max_watches: 100, ..Limits::default() }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest request message (default [`DEFAULT_MAX_MESSAGE_SIZE`]); a
    /// larger one fails with `OUT_OF_RANGE` and the server goes on. Responses
    /// may be up to [`Limits::max_response_size`], since an update event
    /// carries two resources of up to this size each.
    pub max_message_size: usize,
    /// The most watches one connection may hold open at once (default 1,000:
    /// a runtime watches each input kind once, a command-line client a few).
    pub max_watches_per_connection: usize,
    /// The most watches the whole server holds open at once (default
    /// 10,000): each costs a watcher in the state and a stream.
    pub max_watches: usize,
    /// HTTP/2 streams one connection may have open at once (default 1,100):
    /// above the watch limit, so that one watch too many gets its status
    /// rather than waiting for a stream, and bounding what a connection costs
    /// in stream state.
    pub max_concurrent_streams: u32,
    /// How often the server pings an idle connection (default 30 s), and how
    /// long it waits for the answer (default 10 s) before closing it: a peer
    /// that vanished without closing its socket releases its watches.
    pub keepalive_interval: Duration,
    /// See [`Limits::keepalive_interval`].
    pub keepalive_timeout: Duration,
    /// How long a TLS handshake may take (default 10 s): a connection that
    /// never completes one is closed rather than held.
    pub tls_handshake_timeout: Duration,
    /// The largest HTTP/2 header list a request may send (default 16 KiB; gRPC
    /// requests carry a few short headers).
    pub max_header_list_size: u32,
    /// How long a graceful shutdown waits for calls in flight (default 10 s);
    /// then the connections are closed and the server returns.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_watches_per_connection: 1_000,
            max_watches: 10_000,
            max_concurrent_streams: 1_100,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            tls_handshake_timeout: Duration::from_secs(10),
            max_header_list_size: 16 << 10,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl Limits {
    /// The largest response message: two resources of [`Limits::max_message_size`]
    /// (an update event's new and old resource) plus 1 MiB for the rest of the event.
    pub fn max_response_size(&self) -> usize {
        max_response_size(self.max_message_size)
    }
}

/// The largest response a server whose requests are limited to `max_message_size` sends.
pub fn max_response_size(max_message_size: usize) -> usize {
    max_message_size.saturating_mul(2).saturating_add(1 << 20)
}

/// The default receive limit of a [`Client`](crate::Client): the largest
/// response a server with default limits sends.
pub const DEFAULT_CLIENT_MAX_MESSAGE_SIZE: usize = 2 * DEFAULT_MAX_MESSAGE_SIZE + (1 << 20);

/// Counts the open watches, per connection and in all, and refuses one too many.
#[derive(Debug)]
pub(crate) struct WatchCounter {
    per_connection: usize,
    total: usize,
    open: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    /// By the peer's address: a TCP connection's remote address is unique
    /// while it is open. Unix socket callers (the socket's owner) have no
    /// address and count only towards the total.
    by_peer: HashMap<SocketAddr, usize>,
}

impl WatchCounter {
    pub(crate) fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(WatchCounter {
            per_connection: limits.max_watches_per_connection,
            total: limits.max_watches,
            open: Mutex::new(Counts::default()),
        })
    }

    /// Counts one more watch of `peer`, or refuses it with `RESOURCE_EXHAUSTED`.
    pub(crate) fn open(self: &Arc<Self>, peer: Option<SocketAddr>) -> Result<WatchPermit, Status> {
        let mut open = self.open.lock();
        if open.total >= self.total {
            return Err(Status::resource_exhausted(format!(
                "the server holds its limit of {} open watches; retry later",
                self.total
            )));
        }
        if let Some(peer) = peer {
            let count = open.by_peer.entry(peer).or_insert(0);
            if *count >= self.per_connection {
                return Err(Status::resource_exhausted(format!(
                    "this connection holds its limit of {} open watches; close some before opening more",
                    self.per_connection
                )));
            }
            *count += 1;
        }
        open.total += 1;
        Ok(WatchPermit { counter: Arc::clone(self), peer })
    }
}

/// One open watch; dropping it (with the watch's stream) releases it.
#[derive(Debug)]
pub(crate) struct WatchPermit {
    counter: Arc<WatchCounter>,
    peer: Option<SocketAddr>,
}

impl Drop for WatchPermit {
    fn drop(&mut self) {
        let mut open = self.counter.open.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(peer) = self.peer
            && let Some(count) = open.by_peer.get_mut(&peer)
        {
            *count -= 1;
            if *count == 0 {
                open.by_peer.remove(&peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_counted_per_connection_and_in_all() {
        let limits = Limits { max_watches_per_connection: 2, max_watches: 3, ..Limits::default() };
        let counter = WatchCounter::new(&limits);
        let a: SocketAddr = "127.0.0.1:1000".parse().expect("address");
        let b: SocketAddr = "127.0.0.1:1001".parse().expect("address");
        let first = counter.open(Some(a)).expect("first");
        let _second = counter.open(Some(a)).expect("second");
        let refused = counter.open(Some(a)).expect_err("a third on one connection");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        let _other = counter.open(Some(b)).expect("another connection");
        let refused = counter.open(None).expect_err("over the total");
        assert!(refused.message().contains("server"), "{}", refused.message());
        drop(first);
        let _again = counter.open(Some(a)).expect("a released watch frees its place");
    }

    #[test]
    fn responses_fit_an_update_of_two_largest_resources() {
        assert_eq!(Limits::default().max_response_size(), DEFAULT_CLIENT_MAX_MESSAGE_SIZE);
        assert!(max_response_size(usize::MAX) == usize::MAX, "saturates instead of overflowing");
    }
}
