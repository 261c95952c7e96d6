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
//! for the watch counts and the query budget, `INVALID_ARGUMENT` for oversized queries,
//! `OUT_OF_RANGE` for oversized messages, `CANCELLED` for a request that
//! does not arrive in time); the connection and every other client go on.
//! The bound on connections makes the next one wait in the listen backlog,
//! as does the bound on TLS handshakes in progress, and one address or one
//! certificate over its share of them is closed at once (`connection.rs`); a request
//! finding every place to arrive in taken waits for one, within its time,
//! and one over its client's share is refused (`admission.rs`).
//!
//! What a request can hold is the size it declares: tonic reserves a
//! message's declared length before its bytes arrive, and keeps what arrived
//! until the message is whole. So the memory that half-sent requests can pin
//! is at most [`Limits::max_requests_in_flight`] times
//! [`Limits::max_message_size`], and each is held for at most
//! [`Limits::request_timeout`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tonic::Status;
use tonic::transport::CertificateDer;

use crate::connection::Peer;

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

/// The largest compiled ID query, in bytes (each of the regex's automata): a
/// hostile pattern such as `(a{1000}){1000}` fails to compile instead of
/// pinning megabytes per watch. Patterns with many Unicode classes
/// (`\w{100}`) exceed it; their ASCII forms (`(?-u:\w){100}`) do not. What a
/// query holds once compiled counts against its client's
/// [`Limits::max_query_bytes_per_client`].
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

/// The longest time a limit takes effect as (about 30 years): a longer one
/// means "never", and adding it to the clock's reading must not overflow.
pub(crate) const LONGEST: Duration = Duration::from_secs(30 * 365 * 86_400);

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
    /// The most watches one client may hold open at once (default 1,000: a
    /// runtime watches each input kind once, a command-line client a few).
    /// Over mutual TLS a client is its certificate, however many connections
    /// it opens; on an insecure loopback listener it is a connection. Callers
    /// on a Unix socket (its owner) count only towards [`Limits::max_watches`].
    pub max_watches_per_client: usize,
    /// The most watches the whole server holds open at once (default
    /// 10,000): each costs a watcher in the state and a stream.
    pub max_watches: usize,
    /// The most bytes the queries of one client's watches and lists may
    /// hold at once (default 64 MiB): a compiled ID query (its program and
    /// match cache, as compiled, up to a few MiB for a hostile pattern within
    /// [`ID_QUERY_SIZE_LIMIT`]) and its label queries. One more is refused
    /// (`RESOURCE_EXHAUSTED`) until some close, so one client cannot pin
    /// gigabytes with its watches' queries; a thousand watches with common
    /// queries (a few KiB each) fit. A client is counted as for
    /// [`Limits::max_watches_per_client`]; Unix socket callers are not.
    pub max_query_bytes_per_client: usize,
    /// The most connections the server holds open at once (default 1,000,
    /// below the usual limit of 1,024 open files). The next one waits in the
    /// listen backlog until one closes. A connection counts from its accept,
    /// so connections that never finish their TLS handshake count too (each
    /// for at most [`Limits::tls_handshake_timeout`], and at most
    /// [`Limits::max_tls_handshakes`] of them). At least 1.
    pub max_connections: usize,
    /// The most connections one address may hold open at once (default 250,
    /// a quarter of the default [`Limits::max_connections`]:
    /// [`connections_per_address`]; at or above `max_connections` it bounds
    /// nothing): one more is closed as soon as it is accepted, before any
    /// TLS, so that clients with no certificate cannot take every connection
    /// from one address. An address is an IPv4 address, all of 127.0.0.0/8
    /// (any local user can use every one of them), or an IPv6 network of
    /// [`Limits::ipv6_prefix_len`] bits (one host commonly holds a whole
    /// /64). Clients behind one NAT share an address: raise it for a fleet
    /// that connects through one. At least 1.
    pub max_connections_per_address: usize,
    /// How many leading bits of an IPv6 address make the network whose
    /// connections count as one address's (default 64, the network one host
    /// or one site is commonly given; 128 counts each address alone).
    pub ipv6_prefix_len: u8,
    /// The most connections open at once that have not finished their TLS
    /// handshake (default 100, a tenth of the default
    /// [`Limits::max_connections`]): the next connection is not accepted
    /// until one finishes, fails or times out
    /// ([`Limits::tls_handshake_timeout`]), so that clients cycling slow
    /// handshakes hold at most these places, never every connection. A
    /// handshake takes milliseconds: a hundred at once admit thousands of
    /// connections a second. At least 1.
    pub max_tls_handshakes: usize,
    /// The most connections one client certificate may hold open at once
    /// (default 250, as [`Limits::max_connections_per_address`]): one more
    /// is closed as soon as its handshake shows the certificate, so that one
    /// certificate cannot take every connection. At least 1.
    pub max_connections_per_certificate: usize,
    /// How long a connection may stay open with no stream open (default 5
    /// minutes): then it is closed, so that connections doing nothing do not
    /// hold places. Pings and other frames do not count as activity (a
    /// client could ping forever); a watch is a stream, so a watching client
    /// is never idle. A client reconnects on its next call.
    pub idle_timeout: Duration,
    /// The most requests the server receives at once, over all connections
    /// (default 128): a request counts from its headers until its message
    /// has arrived, not while the state answers it (see `admission.rs`). The
    /// next one waits for a place, within [`Limits::request_timeout`]. With
    /// [`Limits::max_message_size`], it bounds what half-sent requests can
    /// hold: 512 MiB with the defaults. At least 1.
    pub max_requests_in_flight: usize,
    /// The most requests one client may be sending at once, waiting for a
    /// place or arriving (default 32, a quarter of the places): one more is
    /// refused at once (`RESOURCE_EXHAUSTED`), so that no client takes every
    /// place. A client is its certificate over mutual TLS, its connection on
    /// an insecure loopback listener; Unix socket callers count in all only.
    /// At least 1.
    pub max_requests_in_flight_per_client: usize,
    /// How long a request may take to arrive, from its headers to the end
    /// of its message, waiting for a place included (default 60 s): then it
    /// is refused (`RESOURCE_EXHAUSTED`, still waiting) or cancelled
    /// (`CANCELLED`, arriving), and its place freed. What the state then
    /// takes to answer is not bounded by it (a `TeardownAndDestroy` waits
    /// for finalizers as long as they take), nor is a watch's stream. This
    /// and the keepalive times are taken as at most about 30 years.
    pub request_timeout: Duration,
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
        let max_connections = 1_000;
        Limits {
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_watches_per_client: 1_000,
            max_watches: 10_000,
            max_query_bytes_per_client: 64 << 20,
            max_connections,
            max_connections_per_address: connections_per_address(max_connections),
            ipv6_prefix_len: 64,
            max_tls_handshakes: 100,
            max_connections_per_certificate: connections_per_address(max_connections),
            idle_timeout: Duration::from_secs(300),
            max_requests_in_flight: 128,
            max_requests_in_flight_per_client: 32,
            request_timeout: Duration::from_secs(60),
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

/// The default share of one address, and of one certificate, in
/// `max_connections`: a quarter, at least one (see
/// [`Limits::max_connections_per_address`] and
/// [`Limits::max_connections_per_certificate`]).
pub const fn connections_per_address(max_connections: usize) -> usize {
    let quarter = max_connections / 4;
    if quarter == 0 { 1 } else { quarter }
}

/// The largest response a server whose requests are limited to `max_message_size` sends.
pub fn max_response_size(max_message_size: usize) -> usize {
    max_message_size.saturating_mul(2).saturating_add(1 << 20)
}

/// The default receive limit of a [`Client`](crate::Client): the largest
/// response a server with default limits sends.
pub const DEFAULT_CLIENT_MAX_MESSAGE_SIZE: usize = 2 * DEFAULT_MAX_MESSAGE_SIZE + (1 << 20);

/// Who a watch is counted against (see [`Limits::max_watches_per_client`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Client {
    /// A verified client certificate: every connection made with it.
    Certificate(CertificateDer<'static>),
    /// A connection on a trusted transport: its remote address is unique while it is open.
    Connection(SocketAddr),
}

impl Client {
    /// Who a call counts against, from its connection's [`Peer`] in the
    /// request's extensions: the certificate over mutual TLS, else the TCP
    /// connection; `None` on a Unix socket or another transport.
    pub(crate) fn of(peer: Option<&Peer>) -> Option<Client> {
        let peer = peer?;
        match peer.certificate() {
            Some(certificate) => Some(Client::Certificate(certificate.clone())),
            None => peer.plain_tcp().map(Client::Connection),
        }
    }
}

/// Counts the open watches, per client and in all, and refuses one too many.
#[derive(Debug)]
pub(crate) struct WatchCounter {
    per_client: usize,
    total: usize,
    open: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    by_client: HashMap<Client, usize>,
}

impl WatchCounter {
    pub(crate) fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(WatchCounter {
            per_client: limits.max_watches_per_client,
            total: limits.max_watches,
            open: Mutex::new(Counts::default()),
        })
    }

    /// Counts one more watch of `client` (`None`: counted only in all), or
    /// refuses it with `RESOURCE_EXHAUSTED`.
    pub(crate) fn open(self: &Arc<Self>, client: Option<Client>) -> Result<WatchPermit, Status> {
        let mut open = self.open.lock();
        if open.total >= self.total {
            return Err(Status::resource_exhausted(format!(
                "the server holds its limit of {} open watches; retry later",
                self.total
            )));
        }
        if let Some(client) = &client {
            let count = open.by_client.get(client).copied().unwrap_or(0);
            if count >= self.per_client {
                return Err(Status::resource_exhausted(format!(
                    "this client holds its limit of {} open watches (over all its connections); \
                     close some before opening more",
                    self.per_client
                )));
            }
            open.by_client.insert(client.clone(), count + 1);
        }
        open.total += 1;
        Ok(WatchPermit { counter: Arc::clone(self), client })
    }
}

/// One open watch; dropping it (with the watch's stream) releases it.
#[derive(Debug)]
pub(crate) struct WatchPermit {
    counter: Arc<WatchCounter>,
    client: Option<Client>,
}

impl Drop for WatchPermit {
    fn drop(&mut self) {
        let mut open = self.counter.open.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(client) = &self.client
            && let Some(count) = open.by_client.get_mut(client)
        {
            *count -= 1;
            if *count == 0 {
                open.by_client.remove(client);
            }
        }
    }
}

/// What the queries of each client's watches and lists hold, against
/// [`Limits::max_query_bytes_per_client`].
#[derive(Debug)]
pub(crate) struct QueryBudget {
    per_client: usize,
    held: Mutex<HashMap<Client, usize>>,
}

impl QueryBudget {
    pub(crate) fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(QueryBudget { per_client: limits.max_query_bytes_per_client, held: Mutex::new(HashMap::new()) })
    }

    /// Counts `bytes` more of `client`'s queries (`None`, a Unix socket
    /// caller: not counted), or refuses them with `RESOURCE_EXHAUSTED`.
    pub(crate) fn charge(self: &Arc<Self>, client: Option<Client>, bytes: usize) -> Result<QueryCharge, Status> {
        let client = match client {
            Some(client) if bytes > 0 => client,
            _ => return Ok(QueryCharge { budget: Arc::clone(self), client: None, bytes: 0 }),
        };
        let mut held = self.held.lock();
        let now = held.get(&client).copied().unwrap_or(0);
        if now.saturating_add(bytes) > self.per_client {
            return Err(Status::resource_exhausted(format!(
                "this query holds {bytes} bytes compiled, and this client's open queries hold {now} of the \
                 {} bytes one client's queries may (max_query_bytes_per_client): close some watches, or \
                 use simpler queries",
                self.per_client
            )));
        }
        held.insert(client.clone(), now + bytes);
        Ok(QueryCharge { budget: Arc::clone(self), client: Some(client), bytes })
    }
}

/// The bytes one request's queries hold, counted until dropped (with the
/// watch's stream, or when the list has answered).
#[derive(Debug)]
pub(crate) struct QueryCharge {
    budget: Arc<QueryBudget>,
    client: Option<Client>,
    bytes: usize,
}

impl Drop for QueryCharge {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else { return };
        let mut held = self.budget.held.lock();
        if let Some(count) = held.get_mut(&client) {
            *count = count.saturating_sub(self.bytes);
            if *count == 0 {
                held.remove(&client);
            }
        }
    }
}

/// The heap memory label queries hold, in bytes: their terms, keys and values.
pub(crate) fn label_query_bytes(queries: &[cosi::resource::LabelQuery]) -> usize {
    use std::mem::size_of;

    queries
        .iter()
        .flat_map(|query| &query.terms)
        .map(|term| {
            size_of::<cosi::resource::LabelTerm>()
                + term.key.len()
                + term.values.iter().map(|value| size_of::<String>() + value.len()).sum::<usize>()
        })
        .sum::<usize>()
        + std::mem::size_of_val(queries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_counted_per_client_and_in_all() {
        let limits = Limits { max_watches_per_client: 2, max_watches: 4, ..Limits::default() };
        let counter = WatchCounter::new(&limits);
        let a = Client::Connection("127.0.0.1:1000".parse().expect("address"));
        let b = Client::Certificate(CertificateDer::from(vec![1, 2, 3]));
        let first = counter.open(Some(a.clone())).expect("first");
        let _second = counter.open(Some(a.clone())).expect("second");
        let refused = counter.open(Some(a.clone())).expect_err("a third of one client");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("this client"), "{}", refused.message());
        let _other = counter.open(Some(b.clone())).expect("another client");
        let _unix = counter.open(None).expect("a caller counted only in all");
        let refused = counter.open(None).expect_err("over the total");
        assert!(refused.message().contains("server"), "{}", refused.message());
        drop(first);
        let _again = counter.open(Some(a)).expect("a released watch frees its place");
        assert_eq!(counter.open.lock().by_client.get(&b), Some(&1));
    }

    #[test]
    fn a_clients_queries_are_held_within_its_budget() {
        let limits = Limits { max_query_bytes_per_client: 100, ..Limits::default() };
        let budget = QueryBudget::new(&limits);
        let a = || Some(Client::Connection("127.0.0.1:1000".parse().expect("address")));
        let b = || Some(Client::Connection("127.0.0.1:1001".parse().expect("address")));
        let first = budget.charge(a(), 60).expect("within the budget");
        let refused = budget.charge(a(), 41).expect_err("over it");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("max_query_bytes_per_client"), "{}", refused.message());
        assert!(refused.message().contains("41 bytes"), "{}", refused.message());
        let _rest = budget.charge(a(), 40).expect("what is left");
        let _other = budget.charge(b(), 100).expect("another client has its own");
        let _local = budget.charge(None, usize::MAX).expect("a Unix socket caller is not counted");
        drop(first);
        let _again = budget.charge(a(), 60).expect("a closed watch frees its bytes");
    }

    #[test]
    fn responses_fit_an_update_of_two_largest_resources() {
        assert_eq!(Limits::default().max_response_size(), DEFAULT_CLIENT_MAX_MESSAGE_SIZE);
        assert!(max_response_size(usize::MAX) == usize::MAX, "saturates instead of overflowing");
    }
}
