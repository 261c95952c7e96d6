//! [`Server`]: listening, security and shutdown around [`StateService`].
//!
//! Invariants:
//! - A Unix socket is never reachable by another user: it is bound inside a
//!   fresh directory only its owner can enter, restricted to mode 0600 there,
//!   then linked into place (a link never replaces anything), and removed when
//!   the server stops. What is at the path already is removed only when it is
//!   a socket that nobody answers on (a server that died); anything else is an error.
//! - Servers starting on one path take turns: the probe, the removal and the
//!   binding happen under an exclusive lock of `PATH.lock` (see
//!   [`PathLock`]), so one cannot remove the socket another has just bound.
//!   At shutdown, a server removes the socket at the path only if it is the
//!   one it bound (the same device and inode), under the same lock.
//! - TCP requires mutual TLS; [`Security::Insecure`] is refused for any
//!   address that is not loopback.
//! - Every client is bounded by [`Limits`] (see `limits.rs`).
//! - Shutdown ends every watch stream (clients see the stream end and resume
//!   from their last bookmark elsewhere), then waits for the calls in flight
//!   for at most [`Limits::shutdown_grace`], then closes what is left.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cosi::state::State;
use futures_util::StreamExt as _;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::{Router, TcpIncoming};
use tower::layer::util::{Identity as NoLayer, Stack};

use crate::admission::{Admission, AdmissionLayer};
use crate::auth::Authenticator;
use crate::authority::AnyAuthority;
use crate::connection::{Conn, TlsConfigError, capped, handshaken, tls_acceptor};
use crate::endpoint::Endpoint;
use crate::limits::{LONGEST, Limits};
use crate::service::StateService;

/// The server's half of mutual TLS, in PEM.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The server's certificate chain.
    pub certificate: String,
    /// The server's private key.
    pub key: String,
    /// The CA that signs client certificates; clients without one are refused.
    pub client_ca: String,
}

/// How a server admits clients.
#[derive(Clone, Debug)]
pub enum Security {
    /// Mutual TLS: every client presents a certificate signed by the client CA,
    /// whose Organization names its role (see [`Role`](crate::Role)).
    MutualTls(ServerTls),
    /// No transport security; every caller is an admin. Allowed on Unix
    /// sockets and loopback TCP addresses only.
    Insecure,
}

/// Why a server cannot start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Plain TCP was asked for on an address other machines can reach.
    #[error("refusing to listen without TLS on {0}: --insecure is allowed on loopback addresses only")]
    InsecureNonLoopback(Endpoint),
    /// TLS over a Unix socket is not supported: the socket's mode protects it.
    #[error("TLS is not supported on Unix sockets ({0}); the socket is created with mode 0600")]
    TlsOnUnixSocket(Endpoint),
    /// The socket could not be created.
    #[error("cannot listen on {endpoint}: {source}")]
    Bind {
        /// The address.
        endpoint: Endpoint,
        /// Why.
        source: std::io::Error,
    },
    /// The server's certificate, key or client CA cannot be used.
    #[error("invalid TLS configuration: {0}")]
    TlsConfig(#[from] TlsConfigError),
    /// The gRPC server failed.
    #[error("gRPC server error: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// As a [`cosi::Error::Other`], for `?` in a
/// function returning `cosi::Result`.
impl From<ServeError> for cosi::Error {
    fn from(error: ServeError) -> Self {
        cosi::Error::other(error)
    }
}

/// A server for one [`State`], before it listens.
///
/// ```no_run
/// # async fn example() -> cosi::Result<()> {
/// use cosi_grpc::{Endpoint, Security, Server};
///
/// let listening = Server::new(cosi::state::memory())
///     .bind(&"tcp://127.0.0.1:0".parse()?, Security::Insecure)
///     .await?;
/// println!("serving on {}", listening.endpoint());
/// listening.serve_with_shutdown(async { let _ = tokio::signal::ctrl_c().await; }).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Server {
    state: Arc<dyn State>,
    limits: Limits,
}

impl Server {
    /// A server for `state`, with default [`Limits`].
    pub fn new(state: impl State) -> Self {
        Server { state: Arc::new(state), limits: Limits::default() }
    }

    /// Limits each request message to `bytes` (default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::DEFAULT_MAX_MESSAGE_SIZE)); a larger
    /// request fails with `OUT_OF_RANGE` and the server goes on. Responses may
    /// be up to [`Limits::max_response_size`].
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.limits.max_message_size = bytes;
        self
    }

    /// Sets every bound on clients at once (see [`Limits`]).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Listens on `endpoint`; a TCP port 0 picks a free port (see [`Listening::endpoint`]).
    pub async fn bind(self, endpoint: &Endpoint, security: Security) -> Result<Listening, ServeError> {
        let bind_error = |source| ServeError::Bind { endpoint: endpoint.clone(), source };
        let (listener, actual) = match endpoint {
            Endpoint::Unix(path) => {
                if matches!(security, Security::MutualTls(_)) {
                    return Err(ServeError::TlsOnUnixSocket(endpoint.clone()));
                }
                let (listener, bound) = bind_unix(path).map_err(bind_error)?;
                (Listener::Unix(listener, bound), endpoint.clone())
            }
            Endpoint::Tcp(addr) => {
                if matches!(security, Security::Insecure) && !addr.ip().is_loopback() {
                    return Err(ServeError::InsecureNonLoopback(endpoint.clone()));
                }
                let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
                let actual = Endpoint::Tcp(listener.local_addr().map_err(bind_error)?);
                (Listener::Tcp(listener), actual)
            }
        };
        Ok(Listening { server: self, listener, endpoint: actual, security })
    }
}

impl Server {
    /// The tonic router serving the state with these limits and this security.
    fn router(
        self,
        authenticator: Authenticator,
        stopped: watch::Receiver<bool>,
    ) -> Router<Stack<AdmissionLayer, NoLayer>> {
        let limits = self.limits;
        let service = StateService::with_security(self.state, authenticator, stopped, limits.clone())
            .into_server(limits.max_message_size);
        // TLS, when there is some, is done before (`connection.rs`).
        let builder = tonic::transport::Server::builder()
            .max_concurrent_streams(limits.max_concurrent_streams)
            .http2_keepalive_interval(Some(limits.keepalive_interval.min(LONGEST)))
            .http2_keepalive_timeout(Some(limits.keepalive_timeout.min(LONGEST)))
            .http2_max_header_list_size(limits.max_header_list_size);
        // One admission shared by every connection's service.
        builder.layer(AdmissionLayer(Admission::new(&limits))).add_service(service)
    }

    /// Serves the connections `incoming` yields, without transport security
    /// (every caller is an admin), until it ends: for tests that bring their
    /// own transport, such as in-memory pipes (feature `testing`). The
    /// connections already accepted are served on after it ends, and none is
    /// closed for being idle ([`Limits::idle_timeout`] does not apply).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> cosi::Result<()> {
    /// use cosi::prelude::*;
    /// use cosi_grpc::{Client, Server};
    /// use hyper_util::rt::TokioIo;
    ///
    /// let (client_end, server_end) = tokio::io::duplex(64 << 10);
    /// let incoming = futures_util::stream::iter([Ok::<_, std::io::Error>(server_end)]);
    /// tokio::spawn(Server::new(cosi::state::memory()).serve_incoming(incoming));
    /// let mut client_end = Some(client_end);
    /// let connector = tower::service_fn(move |_| {
    ///     let io = client_end.take().map(TokioIo::new).ok_or_else(|| std::io::Error::other("one connection"));
    ///     std::future::ready(io)
    /// });
    /// let channel = tonic::transport::Endpoint::from_static("http://memory").connect_with_connector_lazy(connector);
    /// let state = Client::from_channel(channel);
    /// let namespaces = state.list_dynamic(&Kind::new("meta", "Namespaces.meta.cosi.dev"), &ListOptions::default()).await?;
    /// # let _ = namespaces;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "testing")]
    pub async fn serve_incoming<IO, E>(
        self,
        incoming: impl futures_core::Stream<Item = Result<IO, E>> + Send + 'static,
    ) -> Result<(), ServeError>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        use futures_util::StreamExt as _;

        // Never stopped: the watches end with their connections.
        let (_, stopped) = watch::channel(false);
        // Never idle: a test's transport may not dial again, and its clock may be paused.
        let limits = Limits { idle_timeout: LONGEST, ..self.limits.clone() };
        let incoming = capped(incoming, &limits, |_| None).map(move |io| io.map(|io| Conn::plain(io, &limits)));
        let router = self.router(Authenticator::Trusted, stopped);
        Ok(router.serve_with_incoming(incoming).await?)
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, BoundSocket),
}

/// A bound server: [`serve`](Listening::serve) it.
pub struct Listening {
    server: Server,
    listener: Listener,
    endpoint: Endpoint,
    security: Security,
}

impl Listening {
    /// The address clients connect to (with the actual port when port 0 was asked for).
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Serves until the process ends.
    pub async fn serve(self) -> Result<(), ServeError> {
        self.serve_with_shutdown(std::future::pending()).await
    }

    /// Serves until `signal` completes, then ends the watches, finishes the
    /// calls in flight and stops listening.
    pub async fn serve_with_shutdown(self, signal: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        let limits = self.server.limits.clone();
        let (stop, stopped) = watch::channel(false);
        let (authenticator, tls) = match &self.security {
            Security::Insecure => (Authenticator::Trusted, None),
            Security::MutualTls(tls) => (Authenticator::Certificates, Some(tls_acceptor(tls)?)),
        };
        let mut stopping = stopped.clone();
        let router = self.server.router(authenticator, stopped);
        let signal = async move {
            signal.await;
            let _ = stop.send(true);
        };
        let _cleanup;
        let serving: std::pin::Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>> = match self
            .listener
        {
            Listener::Tcp(listener) => {
                // Small request/response pairs: Nagle's algorithm would hold them back.
                let incoming = TcpIncoming::from(listener)
                    .with_nodelay(Some(true))
                    .with_keepalive(Some(limits.keepalive_interval.min(LONGEST)));
                let incoming = capped(incoming, &limits, |tcp| tcp.peer_addr().ok());
                match tls {
                    Some(acceptor) => {
                        let incoming = handshaken(incoming, acceptor, &limits);
                        Box::pin(router.serve_with_incoming_shutdown(incoming, signal))
                    }
                    None => {
                        let plain = limits.clone();
                        let incoming = incoming.map(move |io| io.map(|io| Conn::plain(io, &plain)));
                        Box::pin(router.serve_with_incoming_shutdown(incoming, signal))
                    }
                }
            }
            Listener::Unix(listener, bound) => {
                _cleanup = bound;
                let plain = limits.clone();
                // Any `:authority`: it means nothing here, and C-core clients send the path.
                let header_list = limits.max_header_list_size as usize;
                let incoming =
                    UnixListenerStream::new(listener).map(move |io| io.map(|io| AnyAuthority::new(io, header_list)));
                let incoming = capped(incoming, &limits, |_| None).map(move |io| io.map(|io| Conn::plain(io, &plain)));
                Box::pin(router.serve_with_incoming_shutdown(incoming, signal))
            }
        };
        // Once the signal fired, calls in flight get `shutdown_grace` to end;
        // a call stuck in its state (or a client that stops reading) must not
        // keep the process from stopping.
        let deadline = async move {
            if stopping.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(limits.shutdown_grace).await;
        };
        tokio::select! {
            served = serving => served?,
            () = deadline => tracing::warn!(
                grace = ?limits.shutdown_grace,
                "calls still in flight after the shutdown grace period; closing their connections"
            ),
        }
        Ok(())
    }
}

/// Binds a Unix socket that only its owner can use (see the module
/// invariants), under the path's lock.
fn bind_unix(path: &Path) -> std::io::Result<(UnixListener, BoundSocket)> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};

    let _lock = PathLock::acquire(path)?;
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_socket() => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "a server is listening there")),
            // Nobody answers: the socket of a server that died.
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => std::fs::remove_file(path)?,
            Err(err) => {
                return Err(std::io::Error::new(
                    err.kind(),
                    format!("a socket exists there and cannot be probed ({err}); it is left alone"),
                ));
            }
        },
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "something other than a socket is there; it is left alone",
            ));
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => (),
        Err(err) => return Err(err),
    }
    let parent = parent_of(path);
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the socket path has no file name"))?;
    // A fresh directory (creating it fails if anything is there) that only
    // this user can enter: the socket is unreachable until it is restricted.
    let mut private = name.to_owned();
    private.push(format!(".{}.{:016x}.tmp", std::process::id(), fastrand::u64(..)));
    let private = parent.join(private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let _private = RemoveDirOnDrop(private.clone());
    let staging = private.join("socket");
    let listener = UnixListener::bind(&staging)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))?;
    // A hard link fails rather than replace whatever appeared at the path meanwhile.
    std::fs::hard_link(&staging, path)?;
    let linked = std::fs::symlink_metadata(&staging)?;
    Ok((listener, BoundSocket { path: path.to_owned(), device: linked.dev(), inode: linked.ino() }))
}

/// The directory a path is in (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// An exclusive lock of `PATH.lock` beside a socket's path, held while a
/// server probes, removes or binds the socket there, or removes its own at
/// shutdown; released when dropped.
///
/// The lock file stays: removing it while another server waits on it would
/// let a third lock a new file at the same name, and both would go on. It is
/// created with mode 0600 and opened without following a symbolic link, so
/// a link planted at its name makes binding fail rather than create or lock
/// a file elsewhere.
struct PathLock {
    _held: std::fs::File,
}

impl PathLock {
    /// Waits for the lock of `path`: another server holds it only while it
    /// binds or removes its socket.
    fn acquire(path: &Path) -> std::io::Result<PathLock> {
        use std::os::unix::fs::OpenOptionsExt;

        let mut name = path.as_os_str().to_owned();
        name.push(".lock");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&name)
            .map_err(|err| {
                std::io::Error::new(
                    err.kind(),
                    format!("cannot open the lock file {}: {err}", Path::new(&name).display()),
                )
            })?;
        file.lock().map_err(|err| {
            std::io::Error::new(err.kind(), format!("cannot lock {}: {err}", Path::new(&name).display()))
        })?;
        Ok(PathLock { _held: file })
    }
}

/// Removes the private binding directory and what is left in it.
struct RemoveDirOnDrop(PathBuf);

impl Drop for RemoveDirOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The socket a server linked at its path: removed when dropped (the
/// server stopped), if it is still the one at the path. Another server may
/// have replaced it meanwhile (after this one stopped answering), and its
/// socket must stay.
struct BoundSocket {
    path: PathBuf,
    device: u64,
    inode: u64,
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;

        let _lock = match PathLock::acquire(&self.path) {
            Ok(lock) => lock,
            Err(err) => {
                tracing::warn!(path = %self.path.display(), error = %err, "the socket is left in place");
                return;
            }
        };
        match std::fs::symlink_metadata(&self.path) {
            Ok(metadata) if (metadata.dev(), metadata.ino()) == (self.device, self.inode) => {
                if let Err(err) = std::fs::remove_file(&self.path) {
                    tracing::warn!(path = %self.path.display(), error = %err, "cannot remove the socket");
                }
            }
            // Another server's socket, or nothing: not ours to remove.
            Ok(_) | Err(_) => (),
        }
    }
}
