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
//! and one address over its share of them is closed at once; a request
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
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;
use tonic::transport::CertificateDer;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

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
    /// for at most [`Limits::tls_handshake_timeout`]). At least 1.
    pub max_connections: usize,
    /// The most connections one address may hold open at once (default 250,
    /// a quarter of the default [`Limits::max_connections`]:
    /// [`connections_per_address`]; at or above `max_connections` it bounds
    /// nothing): one more is closed as soon as it is accepted, before any
    /// TLS, so that clients with no certificate cannot take every connection
    /// from one address. Clients behind one NAT share
    /// an address: raise it for a fleet that connects through one. An IPv6
    /// host may hold many addresses; each counts on its own, as grouping
    /// them by network would count a whole subnet's hosts as one. At least 1.
    pub max_connections_per_address: usize,
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

/// The default share of one address in `max_connections`: a quarter, at least
/// one (see [`Limits::max_connections_per_address`]).
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
    /// Who a call counts against, from its connection's information in the
    /// request's extensions: the certificate over mutual TLS, else the TCP
    /// connection; `None` on a Unix socket or another transport.
    pub(crate) fn of(tls: Option<&TlsConnectInfo<TcpConnectInfo>>, tcp: Option<&TcpConnectInfo>) -> Option<Client> {
        match tls {
            Some(tls) => tls.peer_certs().and_then(|chain| chain.first().cloned()).map(Client::Certificate),
            None => tcp.and_then(TcpConnectInfo::remote_addr).map(Client::Connection),
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

/// The connections `incoming` yields, at most `limits.max_connections` open
/// at once (the next is not accepted until one of them is dropped), and at
/// most `limits.max_connections_per_address` from one address, which
/// `peer` tells (one more is closed at once; `None`, as on a Unix socket,
/// counts in all only).
pub(crate) fn capped<IO, E>(
    incoming: impl Stream<Item = Result<IO, E>> + Send + 'static,
    limits: &Limits,
    peer: fn(&IO) -> Option<IpAddr>,
) -> impl Stream<Item = Result<Counted<IO>, E>> + Send + 'static
where
    IO: Send + 'static,
    E: Send + 'static,
{
    let open = Arc::new(Semaphore::new(limits.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let addresses =
        Arc::new(Addresses { per_address: limits.max_connections_per_address.max(1), ..Addresses::default() });
    futures_util::stream::unfold(
        (Box::pin(incoming), open, addresses),
        move |(mut incoming, open, addresses)| async move {
            loop {
                // Never closed, so never an error.
                let permit = Arc::clone(&open).acquire_owned().await.ok()?;
                let io = match futures_util::StreamExt::next(&mut incoming).await? {
                    Ok(io) => io,
                    Err(error) => return Some((Err(error), (incoming, open, addresses))),
                };
                // An IPv4 address mapped into IPv6 is that IPv4 address.
                let share = match peer(&io).map(|address| address.to_canonical()) {
                    None => None,
                    Some(address) => match addresses.enter(address) {
                        Some(share) => Some(share),
                        None => {
                            tracing::debug!(%address, limit = addresses.per_address, "closed a connection over its address's share");
                            continue;
                        }
                    },
                };
                return Some((Ok(Counted { io, _permit: permit, _share: share }), (incoming, open, addresses)));
            }
        },
    )
}

/// The open connections of each address (see [`Limits::max_connections_per_address`]).
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
#[derive(Debug)]
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

/// A connection counted towards [`Limits::max_connections`] (and its
/// address's share) until it is dropped.
#[derive(Debug)]
pub(crate) struct Counted<IO> {
    io: IO,
    _permit: OwnedSemaphorePermit,
    _share: Option<AddressShare>,
}

impl<IO: Connected> Connected for Counted<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
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

    #[tokio::test]
    async fn connections_past_the_cap_wait_until_one_closes() {
        use futures_util::{FutureExt as _, StreamExt as _};

        let incoming = futures_util::stream::iter((0..3).map(|_| Ok::<_, std::io::Error>(tokio::io::duplex(64).0)));
        let limits = Limits { max_connections: 2, ..Limits::default() };
        let mut connections = std::pin::pin!(capped(incoming, &limits, |_| None));
        let first = connections.next().await.expect("a first connection").expect("accepted");
        let _second = connections.next().await.expect("a second connection").expect("accepted");
        assert!(connections.next().now_or_never().is_none(), "a third is not accepted while two are open");
        drop(first);
        let third = connections.next().now_or_never().expect("accepted once one closed");
        assert!(matches!(third, Some(Ok(_))));
        assert!(connections.next().now_or_never().is_none(), "the cap holds again");
    }

    #[tokio::test]
    async fn an_address_over_its_share_is_closed_and_others_are_accepted() {
        use futures_util::{FutureExt as _, StreamExt as _};

        // Each connection is its peer's address; the fifth is from a Unix socket.
        let peers = [
            "10.0.0.1",
            "10.0.0.1",
            "10.0.0.1",
            "::ffff:10.0.0.1",
            "",
            "2001:db8::1",
            "2001:db8::2",
            "2001:db8::1",
            "10.0.0.2",
            "10.0.0.1",
        ];
        let incoming = futures_util::stream::iter(peers.map(Ok::<_, std::io::Error>));
        let limits = Limits { max_connections_per_address: 2, ..Limits::default() };
        let mut connections = std::pin::pin!(capped(incoming, &limits, |peer| peer.parse().ok()));
        let mut next = || connections.next().now_or_never().flatten().map(|accepted| accepted.expect("no error"));
        // Each accepted connection is held (counted) until the end.
        let first = next().expect("the address's first");
        let second = next().expect("its second");
        assert_eq!((first.io, second.io), ("10.0.0.1", "10.0.0.1"));
        // Its third and fourth (the same address, mapped into IPv6) are closed.
        let unix = next().expect("on to the next connection");
        assert_eq!(unix.io, "", "a Unix socket's counts in all only");
        // IPv6 addresses count one by one, even within one network.
        let v6: Vec<_> = (0..3).map(|_| next().expect("an IPv6 connection")).collect();
        assert_eq!(
            v6.iter().map(|connection| connection.io).collect::<Vec<_>>(),
            ["2001:db8::1", "2001:db8::2", "2001:db8::1"]
        );
        assert_eq!(next().expect("another address").io, "10.0.0.2");
        drop(first);
        assert_eq!(next().expect("the first's share is free again").io, "10.0.0.1");
        assert!(next().is_none());
        drop(second);
    }

    #[test]
    fn responses_fit_an_update_of_two_largest_resources() {
        assert_eq!(Limits::default().max_response_size(), DEFAULT_CLIENT_MAX_MESSAGE_SIZE);
        assert!(max_response_size(usize::MAX) == usize::MAX, "saturates instead of overflowing");
    }
}
