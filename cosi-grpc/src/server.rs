//! [`Server`]: listening, security and shutdown around [`StateService`].
//!
//! Invariants:
//! - A Unix socket is created with mode 0600 before anyone can connect (it is
//!   bound under a temporary name, restricted, then renamed into place) and
//!   removed when the server stops.
//! - TCP requires mutual TLS; [`Security::Insecure`] is refused for any
//!   address that is not loopback.
//! - Shutdown ends every watch stream (clients see the stream end and resume
//!   from their last bookmark elsewhere), then waits for the calls in flight.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cosi::state::State;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use crate::auth::Authenticator;
use crate::endpoint::Endpoint;
use crate::service::StateService;

/// The default limit on a request or response message: 4 MiB, gRPC's usual limit.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

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
    /// The gRPC server failed (a bad TLS certificate or key, for instance).
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
    max_message_size: usize,
}

impl Server {
    /// A server for `state`.
    pub fn new(state: impl State) -> Self {
        Server { state: Arc::new(state), max_message_size: DEFAULT_MAX_MESSAGE_SIZE }
    }

    /// Limits each message, in either direction, to `bytes` (default [`DEFAULT_MAX_MESSAGE_SIZE`]);
    /// a larger request fails with `OUT_OF_RANGE` and the server goes on.
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
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
                (Listener::Unix(bind_unix(path).map_err(bind_error)?, path.clone()), endpoint.clone())
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

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
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
        let (stop, stopped) = watch::channel(false);
        let (authenticator, tls) = match self.security {
            Security::Insecure => (Authenticator::Trusted, None),
            Security::MutualTls(tls) => (
                Authenticator::Certificates,
                Some(
                    ServerTlsConfig::new()
                        .identity(Identity::from_pem(tls.certificate, tls.key))
                        .client_ca_root(Certificate::from_pem(tls.client_ca)),
                ),
            ),
        };
        let service = StateService::with_security(self.server.state, authenticator, stopped)
            .into_server(self.server.max_message_size);
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder.tls_config(tls)?;
        }
        let router = builder.add_service(service);
        let signal = async move {
            signal.await;
            let _ = stop.send(true);
        };
        match self.listener {
            Listener::Tcp(listener) => {
                // Small request/response pairs: Nagle's algorithm would hold them back.
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                router.serve_with_incoming_shutdown(incoming, signal).await?;
            }
            Listener::Unix(listener, path) => {
                let _cleanup = RemoveOnDrop(path);
                router.serve_with_incoming_shutdown(UnixListenerStream::new(listener), signal).await?;
            }
        }
        Ok(())
    }
}

/// Binds a Unix socket that only its owner can use (see the module invariants).
fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;

    if path.exists() {
        // A socket left by a server that died is removed; a live one is an error.
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "a server is listening there")),
            Err(_) => std::fs::remove_file(path)?,
        }
    }
    let mut staging = path.as_os_str().to_owned();
    staging.push(format!(".{}.tmp", std::process::id()));
    let staging = PathBuf::from(staging);
    let _ = std::fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging)?;
    let placed = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&staging, path));
    if let Err(err) = placed {
        let _ = std::fs::remove_file(&staging);
        return Err(err);
    }
    Ok(listener)
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
