//! What one connection holds, from its accept to its close, and the bounds on
//! it (see [`Limits`]): a place among [`Limits::max_connections`], a share of
//! its address group's, a place among the TLS handshakes in progress while
//! it has not finished one, then a share of its certificate's, and its
//! [`Peer`], which every request on it carries and which closes it once it
//! has been idle for [`Limits::idle_timeout`].
//!
//! The stages, in order: [`capped`] accepts (the next connection waits in the
//! listen backlog while every place is taken, and one over its address
//! group's share is closed at once, before any TLS); over mutual TLS,
//! [`handshaken`] runs the handshakes, at most
//! [`Limits::max_tls_handshakes`] at once (the next connection is not
//! accepted until one ends), and closes a connection over its certificate's
//! share; [`Conn`] is what the server then reads and writes.
//!
//! The server does its own TLS (rustls, as tonic does) so that it can tell
//! a handshake in progress from a connection that finished one, and knows a
//! connection's certificate before it serves it.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::task::AtomicWaker;
use http_body::{Body as HttpBody, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tonic::transport::server::Connected;

use crate::limits::{LONGEST, Limits};
use crate::server::ServerTls;

/// The connections `incoming` yields, at most [`Limits::max_connections`]
/// open at once (the next is not accepted until one of them is dropped), and
/// at most [`Limits::max_connections_per_address`] from one address group
/// (see [`AddressGroup`]) of the remote address `peer` tells (one more is
/// closed at once; `None`, as on a Unix socket, counts in all only).
pub(crate) fn capped<IO, E>(
    incoming: impl Stream<Item = Result<IO, E>> + Send + 'static,
    limits: &Limits,
    peer: fn(&IO) -> Option<SocketAddr>,
) -> impl Stream<Item = Result<Counted<IO>, E>> + Send + 'static
where
    IO: Send + 'static,
    E: Send + 'static,
{
    let open = Arc::new(Semaphore::new(limits.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let groups = Shares::new(limits.max_connections_per_address);
    let ipv6_prefix = limits.ipv6_prefix_len;
    futures_util::stream::unfold((Box::pin(incoming), open, groups), move |(mut incoming, open, groups)| async move {
        loop {
            // Never closed, so never an error.
            let permit = Arc::clone(&open).acquire_owned().await.ok()?;
            let io = match futures_util::StreamExt::next(&mut incoming).await? {
                Ok(io) => io,
                Err(error) => return Some((Err(error), (incoming, open, groups))),
            };
            let remote = peer(&io);
            let share = match remote.map(|remote| AddressGroup::of(remote.ip(), ipv6_prefix)) {
                None => None,
                Some(group) => match groups.enter(group) {
                    Some(share) => Some(share),
                    None => {
                        tracing::debug!(%group, limit = groups.per_key, "closed a connection over its address's share");
                        continue;
                    }
                },
            };
            let counted = Counted { io, remote, _permit: permit, _share: share };
            return Some((Ok(counted), (incoming, open, groups)));
        }
    })
}

/// The addresses whose connections count as one client's towards
/// [`Limits::max_connections_per_address`]: an IPv4 address, all of
/// 127.0.0.0/8 (every one of its addresses reaches this machine, so one
/// local user has 16 million), or an IPv6 network of
/// [`Limits::ipv6_prefix_len`] bits (a host is commonly given a whole /64).
/// An IPv4 address mapped into IPv6 is that IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AddressGroup {
    network: IpAddr,
    prefix: u8,
}

impl AddressGroup {
    pub(crate) fn of(address: IpAddr, ipv6_prefix: u8) -> Self {
        match address.to_canonical() {
            IpAddr::V4(v4) if v4.is_loopback() => {
                AddressGroup { network: Ipv4Addr::new(127, 0, 0, 0).into(), prefix: 8 }
            }
            IpAddr::V4(v4) => AddressGroup { network: v4.into(), prefix: 32 },
            IpAddr::V6(v6) => {
                let prefix = ipv6_prefix.min(128);
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                AddressGroup { network: Ipv6Addr::from(u128::from(v6) & mask).into(), prefix }
            }
        }
    }
}

impl fmt::Display for AddressGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Open connections counted per key (an address group, a certificate), at
/// most `per_key` each.
#[derive(Debug)]
struct Shares<K> {
    per_key: usize,
    open: Mutex<HashMap<K, usize>>,
}

impl<K: Hash + Eq + Clone> Shares<K> {
    fn new(per_key: usize) -> Arc<Self> {
        Arc::new(Shares { per_key: per_key.max(1), open: Mutex::new(HashMap::new()) })
    }

    /// Counts one more connection of `key`, unless it has its share already.
    fn enter(self: &Arc<Self>, key: K) -> Option<Share<K>> {
        let mut open = self.open.lock();
        let count = open.entry(key.clone()).or_insert(0);
        if *count >= self.per_key {
            return None;
        }
        *count += 1;
        Some(Share { shares: Arc::clone(self), key })
    }
}

/// One connection counted against its key, until dropped.
#[derive(Debug)]
struct Share<K: Hash + Eq> {
    shares: Arc<Shares<K>>,
    key: K,
}

impl<K: Hash + Eq> Drop for Share<K> {
    fn drop(&mut self) {
        let mut open = self.shares.open.lock();
        if let Some(count) = open.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// An accepted connection, counted towards [`Limits::max_connections`] (and
/// its address group's share) until it is dropped.
#[derive(Debug)]
pub(crate) struct Counted<IO> {
    io: IO,
    remote: Option<SocketAddr>,
    _permit: OwnedSemaphorePermit,
    _share: Option<Share<AddressGroup>>,
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

/// Why the server's half of mutual TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct TlsConfigError {
    what: &'static str,
    reason: String,
}

/// The acceptor of mutual TLS for `tls`: clients must present a certificate
/// the client CA signed; HTTP/2 is negotiated (ALPN `h2`), as gRPC requires.
pub(crate) fn tls_acceptor(tls: &ServerTls) -> Result<TlsAcceptor, TlsConfigError> {
    let error = |what| move |reason: String| TlsConfigError { what, reason };
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(tls.client_ca.as_bytes()) {
        let certificate = certificate.map_err(|err| error("the client CA is not PEM")(err.to_string()))?;
        roots.add(certificate).map_err(|err| error("the client CA is not a usable certificate")(err.to_string()))?;
    }
    if roots.is_empty() {
        return Err(error("the client CA")("no certificate in it".to_owned()));
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
        .build()
        .map_err(|err| error("the client CA")(err.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(tls.certificate.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| error("the server certificate is not PEM")(err.to_string()))?;
    if chain.is_empty() {
        return Err(error("the server certificate")("no certificate in it".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_slice(tls.key.as_bytes())
        .map_err(|err| error("the server key is not a PEM private key")(err.to_string()))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| error("TLS versions")(err.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|err| error("the server certificate and key")(err.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The connections of `incoming` once their TLS handshake has finished:
/// at most [`Limits::max_tls_handshakes`] in progress at once (the next
/// connection is not accepted until one ends), each for at most
/// [`Limits::tls_handshake_timeout`]; then at most
/// [`Limits::max_connections_per_certificate`] open with one client
/// certificate (one more is closed at once).
pub(crate) fn handshaken<IO, E>(
    incoming: impl Stream<Item = Result<Counted<IO>, E>> + Send + 'static,
    acceptor: TlsAcceptor,
    limits: &Limits,
) -> impl Stream<Item = Result<Conn<TlsStream<Counted<IO>>>, E>> + Send + 'static
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    E: Send + 'static,
{
    let handshakes = Handshakes {
        incoming: Box::pin(incoming),
        places: Arc::new(Semaphore::new(limits.max_tls_handshakes.clamp(1, Semaphore::MAX_PERMITS))),
        place: None,
        running: JoinSet::new(),
        acceptor,
        timeout: limits.tls_handshake_timeout.min(LONGEST),
        certificates: Shares::new(limits.max_connections_per_certificate),
        idle_timeout: limits.idle_timeout,
        ended: false,
    };
    futures_util::stream::unfold(handshakes, |mut handshakes| async move {
        let next = handshakes.next().await?;
        Some((next, handshakes))
    })
}

/// The state of [`handshaken`].
struct Handshakes<S, IO> {
    incoming: Pin<Box<S>>,
    places: Arc<Semaphore>,
    /// A place taken for the next connection, before it is accepted.
    place: Option<OwnedSemaphorePermit>,
    running: JoinSet<Option<Conn<TlsStream<Counted<IO>>>>>,
    acceptor: TlsAcceptor,
    timeout: Duration,
    certificates: Arc<Shares<CertificateDer<'static>>>,
    idle_timeout: Duration,
    /// The listener has stopped: only the handshakes running are left.
    ended: bool,
}

impl<S, IO, E> Handshakes<S, IO>
where
    S: Stream<Item = Result<Counted<IO>, E>>,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    /// The next connection whose handshake finished, or the listener's error.
    async fn next(&mut self) -> Option<Result<Conn<TlsStream<Counted<IO>>>, E>> {
        loop {
            if self.ended && self.running.is_empty() {
                return None;
            }
            let (running, incoming) = (&mut self.running, &mut self.incoming);
            let waiting_for_place = self.place.is_none() && !self.ended;
            let accepting = self.place.is_some() && !self.ended;
            tokio::select! {
                done = running.join_next(), if !running.is_empty() => match done {
                    Some(Ok(Some(conn))) => return Some(Ok(conn)),
                    // Refused or failed (already logged), or the task panicked.
                    _ => continue,
                },
                // Never closed, so never an error.
                place = Arc::clone(&self.places).acquire_owned(), if waiting_for_place => self.place = place.ok(),
                accepted = futures_util::StreamExt::next(incoming), if accepting => match accepted {
                    None => self.ended = true,
                    Some(Err(error)) => return Some(Err(error)),
                    Some(Ok(io)) => self.start(io),
                },
            }
        }
    }

    /// Runs the handshake of `io` in a task of its own, holding the place taken for it.
    fn start(&mut self, io: Counted<IO>) {
        let place = self.place.take();
        let (acceptor, timeout) = (self.acceptor.clone(), self.timeout);
        let (certificates, idle_timeout) = (Arc::clone(&self.certificates), self.idle_timeout);
        self.running.spawn(async move {
            let _place = place;
            let remote = io.remote;
            let tls = match tokio::time::timeout(timeout, acceptor.accept(io)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(?remote, %error, "a TLS handshake failed");
                    return None;
                }
                Err(_) => {
                    tracing::debug!(
                        ?remote,
                        ?timeout,
                        "closed a connection whose TLS handshake did not finish in time"
                    );
                    return None;
                }
            };
            let certificate = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|leaf| leaf.clone().into_owned());
            let share = match &certificate {
                None => None,
                Some(certificate) => match certificates.enter(certificate.clone()) {
                    Some(share) => Some(share),
                    None => {
                        tracing::debug!(
                            ?remote,
                            limit = certificates.per_key,
                            "closed a connection over its client certificate's share"
                        );
                        return None;
                    }
                },
            };
            Some(Conn::new(tls, PeerInfo { remote, tls: true, certificate }, share, idle_timeout))
        });
    }
}

/// A connection being served: what its requests know of it ([`Peer`]),
/// closed (its reads end) once it has had no stream open for
/// [`Limits::idle_timeout`].
pub(crate) struct Conn<IO> {
    io: IO,
    peer: Peer,
    idle_timeout: Duration,
    /// Armed for the idle deadline while no stream is open.
    idle: Pin<Box<Sleep>>,
    _certificate_share: Option<Share<CertificateDer<'static>>>,
}

impl<IO> Conn<IO> {
    fn new(
        io: IO,
        info: PeerInfo,
        certificate_share: Option<Share<CertificateDer<'static>>>,
        idle_timeout: Duration,
    ) -> Self {
        let idle_timeout = idle_timeout.min(LONGEST);
        let peer = Peer(Arc::new((info, Activity::default())));
        let idle = Box::pin(tokio::time::sleep(idle_timeout));
        Conn { io, peer, idle_timeout, idle, _certificate_share: certificate_share }
    }
}

impl<IO> Conn<Counted<IO>> {
    /// A connection without TLS (a Unix socket, or loopback TCP without security).
    pub(crate) fn plain(io: Counted<IO>, limits: &Limits) -> Self {
        let info = PeerInfo { remote: io.remote, tls: false, certificate: None };
        Conn::new(io, info, None, limits.idle_timeout)
    }
}

impl<IO> Connected for Conn<IO> {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Conn<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let activity = &this.peer.0.1;
        // Registered before reading the count: a stream closing after this wakes the reader.
        activity.waker.register(cx.waker());
        if let Some(since) = activity.idle_since() {
            let deadline = since + this.idle_timeout;
            if this.idle.deadline() != deadline {
                this.idle.as_mut().reset(deadline);
            }
            if this.idle.as_mut().poll(cx).is_ready() {
                tracing::debug!(remote = ?this.peer.0.0.remote, timeout = ?this.idle_timeout, "closed an idle connection");
                // The end of the stream: the server closes the connection.
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Conn<IO> {
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

/// What a request knows of its connection, in its extensions: who is at the
/// other end, and the connection's open streams.
#[derive(Clone, Debug)]
pub(crate) struct Peer(Arc<(PeerInfo, Activity)>);

#[derive(Debug)]
struct PeerInfo {
    /// The remote TCP address; `None` on a Unix socket.
    remote: Option<SocketAddr>,
    tls: bool,
    /// The client certificate (the leaf) over mutual TLS.
    certificate: Option<CertificateDer<'static>>,
}

impl Peer {
    /// The verified client certificate, over mutual TLS.
    pub(crate) fn certificate(&self) -> Option<&CertificateDer<'static>> {
        self.0.0.certificate.as_ref()
    }

    /// The remote TCP address of a connection without TLS.
    pub(crate) fn plain_tcp(&self) -> Option<SocketAddr> {
        self.0.0.remote.filter(|_| !self.0.0.tls)
    }

    /// Counts one more stream open on the connection until the guard is dropped.
    pub(crate) fn open_stream(&self) -> OpenStream {
        self.0.1.open.lock().0 += 1;
        OpenStream(self.clone())
    }
}

/// A connection's open streams, and since when it has had none.
#[derive(Debug)]
struct Activity {
    open: Mutex<(usize, Instant)>,
    /// The connection's reader, woken when its last stream closes.
    waker: AtomicWaker,
}

impl Default for Activity {
    fn default() -> Self {
        Activity { open: Mutex::new((0, Instant::now())), waker: AtomicWaker::new() }
    }
}

impl Activity {
    /// Since when no stream has been open; `None` while one is.
    fn idle_since(&self) -> Option<Instant> {
        let (open, since) = *self.open.lock();
        (open == 0).then_some(since)
    }
}

/// A stream counted as open on its connection (see [`Peer::open_stream`]).
#[derive(Debug)]
pub(crate) struct OpenStream(Peer);

impl Drop for OpenStream {
    fn drop(&mut self) {
        let activity = &self.0.0.1;
        let mut open = activity.open.lock();
        open.0 = open.0.saturating_sub(1);
        if open.0 == 0 {
            open.1 = Instant::now();
            drop(open);
            activity.waker.wake();
        }
    }
}

/// A response body that keeps its stream counted as open until it is
/// dropped: when the stream has ended, or was reset.
pub(crate) struct Tracked<B> {
    pub(crate) body: B,
    pub(crate) _stream: OpenStream,
}

impl<B: HttpBody<Data = Bytes> + Unpin> HttpBody for Tracked<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    async fn an_address_group_over_its_share_is_closed_and_others_are_accepted() {
        use futures_util::{FutureExt as _, StreamExt as _};

        // Each connection is its peer's address; the fifth is from a Unix socket.
        let peers = [
            "10.0.0.1",
            "10.0.0.1",
            "10.0.0.1",
            "::ffff:10.0.0.1",
            "",
            // One /64: two, then closed.
            "2001:db8::1",
            "2001:db8::2:3",
            "2001:db8::ffff:1",
            // Another /64.
            "2001:db8:0:1::1",
            // All of 127/8 is one: two, then closed.
            "127.0.0.1",
            "127.1.2.3",
            "127.0.0.2",
            "::ffff:127.0.0.9",
            "10.0.0.2",
            "10.0.0.1",
        ];
        let incoming = futures_util::stream::iter(peers.map(Ok::<_, std::io::Error>));
        let limits = Limits { max_connections_per_address: 2, ..Limits::default() };
        let mut connections = std::pin::pin!(capped(incoming, &limits, |peer| {
            peer.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 1))
        }));
        let mut next = || connections.next().now_or_never().flatten().map(|accepted| accepted.expect("no error"));
        // Each accepted connection is held (counted) until the end.
        let first = next().expect("the address's first");
        let second = next().expect("its second");
        assert_eq!((first.io, second.io), ("10.0.0.1", "10.0.0.1"));
        // Its third and fourth (the same address, mapped into IPv6) are closed.
        let unix = next().expect("on to the next connection");
        assert_eq!(unix.io, "", "a Unix socket's counts in all only");
        let v6: Vec<_> = (0..3).map(|_| next().expect("an IPv6 connection")).collect();
        assert_eq!(
            v6.iter().map(|connection| connection.io).collect::<Vec<_>>(),
            ["2001:db8::1", "2001:db8::2:3", "2001:db8:0:1::1"],
            "a /64 holds one share"
        );
        let loopback: Vec<_> = (0..2).map(|_| next().expect("a loopback connection")).collect();
        assert_eq!(loopback.iter().map(|connection| connection.io).collect::<Vec<_>>(), ["127.0.0.1", "127.1.2.3"]);
        assert_eq!(next().expect("another address").io, "10.0.0.2", "127/8 holds one share");
        drop(first);
        assert_eq!(next().expect("the first's share is free again").io, "10.0.0.1");
        assert!(next().is_none());
        drop(second);
    }

    #[test]
    fn address_groups_read_as_networks() {
        let group = |address: &str, prefix| AddressGroup::of(address.parse().expect("an address"), prefix).to_string();
        assert_eq!(group("2001:db8:1:2:3:4:5:6", 64), "2001:db8:1:2::/64");
        assert_eq!(group("2001:db8:1:2:3:4:5:6", 48), "2001:db8:1::/48");
        assert_eq!(group("2001:db8:1:2:3:4:5:6", 128), "2001:db8:1:2:3:4:5:6/128");
        assert_eq!(group("2001:db8:1:2:3:4:5:6", 200), "2001:db8:1:2:3:4:5:6/128");
        assert_eq!(group("2001:db8:1:2:3:4:5:6", 0), "::/0");
        assert_eq!(group("127.8.9.10", 64), "127.0.0.0/8");
        assert_eq!(group("::ffff:192.0.2.1", 64), "192.0.2.1/32");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_while_no_stream_is_open() {
        use tokio::io::AsyncReadExt as _;

        let (mut client, server) = tokio::io::duplex(64);
        let incoming = futures_util::stream::iter([Ok::<_, std::io::Error>(server)]);
        let limits = Limits { idle_timeout: Duration::from_secs(10), ..Limits::default() };
        let mut connections = std::pin::pin!(capped(incoming, &limits, |_| None));
        let counted = futures_util::StreamExt::next(&mut connections).await.expect("one").expect("accepted");
        let mut conn = Conn::plain(counted, &limits);
        let stream = conn.peer.open_stream();
        let mut byte = [0_u8; 1];
        // A stream is open: the reader waits for bytes however long it takes.
        let read = tokio::time::timeout(Duration::from_secs(60), conn.read(&mut byte)).await;
        assert!(read.is_err(), "still reading after a minute with a stream open");
        tokio::io::AsyncWriteExt::write_all(&mut client, b"x").await.expect("write");
        assert_eq!(conn.read(&mut byte).await.expect("a byte"), 1);
        drop(stream);
        // Idle from now: the reader ends after the timeout, not before.
        let read = tokio::time::timeout(Duration::from_secs(9), conn.read(&mut byte)).await;
        assert!(read.is_err(), "closed before its idle timeout");
        let read = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut byte)).await;
        assert_eq!(read.expect("ended by its idle timeout").expect("no error"), 0, "the end of the stream");
    }
}
