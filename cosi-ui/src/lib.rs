//! A live page of a COSI state: the controller graph with each controller's
//! state and reconciles per second, how many resources each type holds, and
//! every resource one click away, updated as the state changes.
//!
//! [`Ui`] serves it over HTTP for any [`State`] handle: the gRPC client
//! (`cosictl ui`) or the state of a program itself (the example OS's `--ui`).
//! Everything the page needs (its HTML, script and style) is built into the
//! binary; the graph's layout is computed here, from the
//! [`ControllerStatus`](cosi::runtime::ControllerStatus) resources the runtime
//! publishes, which are also the graph `cosictl graph` prints.
//!
//! The page has no TLS: [`Ui::bind`] refuses an address that is not
//! loopback, and every route answers only requests for a loopback name
//! (`localhost`, `*.localhost`, a loopback address, with any port), so that
//! a web page elsewhere whose name is rebound to 127.0.0.1 (DNS rebinding)
//! cannot read it through a browser (421). A browser's request from another
//! site or origin is refused (403), and every request must carry the page's
//! random token ([`Ui::token`]): in its URL ([`Listening::url`], which only
//! the one who started the page is shown) or in the cookie that opening
//! that URL sets, so that another user of the machine who finds the port
//! reads nothing (401). Every answer forbids content sniffing and allows
//! the page only its own script, style and requests
//! (`Content-Security-Policy`).
//!
//! What one client may hold is bounded ([`Config`]): the time to send a
//! request's headers, the connections served at once (in all and from one
//! address), the time a write may wait for it to read, and the events
//! waiting for it (a client that reads too slowly has its event stream
//! ended, and its browser reconnects). Stopping waits a bounded time for
//! open connections.
//!
//! The page shows what its state handle may read: through a gRPC connection
//! with the `cosi:reader` role, sensitive types are refused by the server, as
//! with `cosictl get`. Whatever the state lets it read, it leaves sensitive
//! types out unless [`Config::show_sensitive`] says otherwise: anyone on the
//! machine can reach a loopback port.
//!
//! # Endpoints
//!
//! | path | what |
//! |---|---|
//! | `/?token=TOKEN` | keeps the token in a cookie, and goes on to `/` |
//! | `/` | the page (`/app.js`, `/app.css`) |
//! | `/api/graph` | the graph with its layout (JSON, [`layout::Layout`]) |
//! | `/api/summary` | the controllers' statuses and the types' counts (JSON) |
//! | `/api/types/{type}?namespace=NS` | a type's resources with its print columns (JSON) |
//! | `/api/resources/{namespace}/{type}/{id}` | one resource, metadata and spec (YAML) |
//! | `/api/resources/{namespace}/{type}?id=ID` | the same, for any ID (`..` too) |
//! | `/api/events` | server-sent events: controllers, counts and resources as they change |
//!
//! # Example
//!
//! ```no_run
//! # async fn run(state: std::sync::Arc<dyn cosi::state::State>) -> Result<(), cosi_ui::Error> {
//! let ui = cosi_ui::Ui::new(state, cosi_ui::Config::default());
//! let listening = ui.bind().await?;
//! println!("{}", listening.url());
//! listening.serve().await?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod api;
pub mod columns;
mod events;
mod feeds;
pub mod layout;
mod model;
mod server;

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cosi::runtime::RUNTIME_NAMESPACE;
use cosi::state::State;
use tokio_util::sync::CancellationToken;

/// Where and what to serve.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The address to listen on: a loopback address ([`Ui::bind`] refuses
    /// others); 127.0.0.1 on a free port by default.
    pub listen: SocketAddr,
    /// The namespace the runtimes publish their controller statuses in.
    pub status_namespace: String,
    /// How often the event stream recomputes reconciles per second.
    pub tick: Duration,
    /// How long stopping waits for open connections (default 10 s): event
    /// streams end at once, but a client that reads nothing cannot be told;
    /// then its connection is closed.
    pub shutdown_grace: Duration,
    /// How long a client may take to send a request's headers (default
    /// 10 s), and how long a connection may stay idle between requests;
    /// then the connection is closed.
    pub header_read_timeout: Duration,
    /// The most connections served at once (default 256; at least one):
    /// more wait to be accepted until one closes.
    pub max_connections: usize,
    /// The most connections served at once from one peer address (default
    /// 64, a quarter of the default [`Config::max_connections`], the same
    /// share as `cosi-grpc`'s; at least one): one more is answered 503 and
    /// closed at once, so that one client holding event streams cannot take
    /// every place. A browser opens at most six connections to a page, so
    /// only programs reach it. Every local user can connect from any
    /// address of 127/8, so this is no defence against another user of
    /// the machine.
    pub max_connections_per_address: usize,
    /// How long a write may wait for the client to read (default 10 s):
    /// then the connection is closed. A client that stops reading its event
    /// stream has the stream ended after a second; this also frees its
    /// connection, and what the server had buffered for it.
    pub write_timeout: Duration,
    /// Whether the page shows sensitive types (default no). Anyone on the
    /// machine can reach a loopback port (though not read through it
    /// without the page's token), so by default the page shows no
    /// more than the `cosi:reader` role reads, whatever its state would
    /// let it read: a sensitive type (any of its definitions says so), or
    /// one no definition says is not sensitive, counts as nothing, its
    /// listing and resources are refused (403), and the event stream leaves
    /// it out.
    pub show_sensitive: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            status_namespace: RUNTIME_NAMESPACE.to_owned(),
            tick: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            max_connections: 256,
            max_connections_per_address: cosi_grpc::connections_per_address(256),
            write_timeout: Duration::from_secs(10),
            show_sensitive: false,
        }
    }
}

impl Config {
    /// Listens on `listen`.
    #[must_use]
    pub fn listen(mut self, listen: SocketAddr) -> Self {
        self.listen = listen;
        self
    }

    /// Waits at most `grace` for open connections when stopping.
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Closes a connection whose request headers take longer than `timeout`.
    #[must_use]
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Serves at most `connections` connections at once.
    #[must_use]
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Serves at most `connections` connections at once from one peer address.
    #[must_use]
    pub fn max_connections_per_address(mut self, connections: usize) -> Self {
        self.max_connections_per_address = connections;
        self
    }

    /// Closes a connection whose write has waited `timeout` for the client to read.
    #[must_use]
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// Shows sensitive types too, as far as the state lets the page read them.
    #[must_use]
    pub fn show_sensitive(mut self, show: bool) -> Self {
        self.show_sensitive = show;
        self
    }
}

/// Why the page cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is not a loopback address: the page has no TLS, so it
    /// is served on loopback only (as `cosi-grpc` serves without TLS on
    /// loopback only).
    #[error(
        "refusing to serve the page on {0}: it has no TLS, so it listens on loopback only \
         (from another machine, reach it through a tunnel such as `ssh -L PORT:127.0.0.1:PORT HOST`)"
    )]
    NotLoopback(SocketAddr),
    /// The operating system gave no random bytes for the page's token.
    #[error("cannot draw the page's random token from the operating system: {0}")]
    Token(getrandom::Error),
    /// The address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The page's server for one state. Cheap to clone: clones share the state
/// and the counters of open event streams.
#[derive(Clone)]
pub struct Ui {
    state: Arc<dyn State>,
    config: Arc<Config>,
    open: Arc<Open>,
    /// The kind watches the event streams share.
    feeds: Arc<feeds::Feeds>,
    /// What each stored definition says, decoded once.
    definitions: Arc<model::DefinitionCache>,
    /// Cancelled when serving stops: ends the open event streams.
    shutdown: CancellationToken,
    /// The page's secret, in its URL and then in a cookie (`api.rs`);
    /// without one (the operating system gave no random bytes) every
    /// request is refused and [`Ui::bind`] fails.
    token: Result<Arc<str>, getrandom::Error>,
}

/// What is open now, for [`Ui::open_streams`] and [`Ui::open_watches`].
#[derive(Default)]
struct Open {
    streams: AtomicUsize,
    watches: AtomicUsize,
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Ui {
    /// The page of `state`.
    pub fn new(state: Arc<dyn State>, config: Config) -> Self {
        Ui {
            state,
            config: Arc::new(config),
            open: Arc::default(),
            feeds: Arc::default(),
            definitions: Arc::default(),
            shutdown: CancellationToken::new(),
            token: new_token(),
        }
    }

    /// The page's token: what its URL carries (`?token=...`) and its cookie
    /// then keeps; every request without it is refused. A program that
    /// calls [`Ui::router`] itself passes it as either. `None` when the
    /// operating system gave no random bytes.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref().ok()
    }

    /// The HTTP routes, to serve or to call directly.
    pub fn router(&self) -> axum::Router {
        api::router(self.clone())
    }

    /// Binds the configured address.
    ///
    /// # Errors
    ///
    /// When the address is not a loopback address, or cannot be bound.
    pub async fn bind(&self) -> Result<Listening, Error> {
        let address = self.config.listen;
        if !address.ip().to_canonical().is_loopback() {
            return Err(Error::NotLoopback(address));
        }
        let token = self.token.clone().map_err(Error::Token)?;
        let listener =
            tokio::net::TcpListener::bind(address).await.map_err(|source| Error::Bind { address, source })?;
        let local = listener.local_addr().map_err(|source| Error::Bind { address, source })?;
        Ok(Listening { ui: self.clone(), listener, local, token })
    }

    /// The event streams open now.
    pub fn open_streams(&self) -> usize {
        self.open.streams.load(Ordering::Acquire)
    }

    /// The state watches the open event streams hold now: one per kind
    /// shown, however many streams show it.
    pub fn open_watches(&self) -> usize {
        self.open.watches.load(Ordering::Acquire)
    }
}

/// A bound page server; [`serve`](Listening::serve) runs it.
pub struct Listening {
    ui: Ui,
    listener: tokio::net::TcpListener,
    local: SocketAddr,
    token: Arc<str>,
}

/// Without the token, which a log line must not show.
impl std::fmt::Debug for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listening").field("local", &self.local).finish_non_exhaustive()
    }
}

impl Listening {
    /// The address bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The page's URL, with its token: `http://ADDRESS/?token=TOKEN`. Whoever
    /// has it can read the page, so it goes to the person who started it
    /// (printed, or in the program's banner), not to a shared log.
    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.local, self.token)
    }

    /// Serves until the process ends.
    ///
    /// # Errors
    ///
    /// None yet: accept errors (such as running out of file descriptors)
    /// are logged and retried.
    pub async fn serve(self) -> Result<(), Error> {
        self.serve_with_shutdown(std::future::pending()).await
    }

    /// Serves until `signal` completes. Then open event streams end, and
    /// connections get [`Config::shutdown_grace`] to finish their responses
    /// before they are closed: a client that reads nothing cannot hold the
    /// server up.
    ///
    /// # Errors
    ///
    /// None yet: accept errors (such as running out of file descriptors)
    /// are logged and retried.
    pub async fn serve_with_shutdown(self, signal: impl Future<Output = ()> + Send + 'static) -> Result<(), Error> {
        let Listening { ui, listener, .. } = self;
        server::serve(listener, ui.router(), &ui.config, ui.shutdown.clone(), signal).await;
        Ok(())
    }
}

/// A new token: 128 random bits from the operating system, in hexadecimal.
fn new_token() -> Result<Arc<str>, getrandom::Error> {
    let mut bytes = [0; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>().into())
}
