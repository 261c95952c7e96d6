//! `cosictl`: a command-line client for COSI states.
//!
//! - `cosictl serve`: a standalone state server (in memory, in a redb file or
//!   on etcd), for tests and for controllers that run in other processes.
//! - `cosictl get`: reads (and watches) resources, resolving type aliases
//!   through the resource definitions the state publishes, as `talosctl get` does.
//! - `cosictl graph`: the live controller graph, from the statuses runtimes publish.
//! - `cosictl ui`: the same graph alive in a browser, with every resource one click away.

#![forbid(unsafe_code)]

mod get;
mod graph;
mod output;
mod serve;
mod ui;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use cosi_grpc::{Client, ClientSecurity, ClientTls, Endpoint};

#[derive(Parser)]
#[command(name = "cosictl", version, about = "A command-line client for COSI states")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serves a state over gRPC until SIGTERM or SIGINT.
    // Boxed: its many options would otherwise size every command.
    Serve(Box<ServeArgs>),
    /// Prints resources of a type, or one resource.
    Get(get::GetArgs),
    /// Prints the live controller graph: what each running controller reads and writes.
    Graph(graph::GraphArgs),
    /// Serves a live page of the state on loopback: the controller graph, each
    /// controller's state, every resource; prints its URL and runs until Ctrl-C.
    Ui(ui::UiArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// The state backend: memory, redb:PATH (a durable file, created when
    /// missing) or etcd:URL[,URL...] with http:// or https:// URLs (keys under /cosi).
    #[arg(long, default_value = "memory")]
    state: serve::StateSpec,
    /// The CA that signed etcd's server certificate (PEM); required for https:// etcd endpoints.
    #[arg(long)]
    etcd_ca: Option<PathBuf>,
    /// The client certificate to present to etcd (PEM), for an etcd that requires one.
    #[arg(long, requires_all = ["etcd_key", "etcd_ca"])]
    etcd_cert: Option<PathBuf>,
    /// The private key of --etcd-cert (PEM).
    #[arg(long, requires = "etcd_cert")]
    etcd_key: Option<PathBuf>,
    /// The name etcd's certificate must carry, when it is not the endpoints' host.
    #[arg(long, requires = "etcd_ca")]
    etcd_server_name: Option<String>,
    /// The etcd user to authenticate as, for an etcd with authentication enabled.
    #[arg(long, requires = "etcd_password_file")]
    etcd_user: Option<String>,
    /// A file holding the password of --etcd-user (one trailing newline is
    /// ignored). It must not be readable by group or others. There is no
    /// option for the password itself: a command line is visible to every user.
    #[arg(long, requires = "etcd_user")]
    etcd_password_file: Option<PathBuf>,
    /// Where to listen: unix:PATH (mode 0600) or tcp://IP:PORT (mutual TLS unless --insecure).
    #[arg(long, default_value_t = default_endpoint())]
    listen: Endpoint,
    /// Serve TCP without TLS; refused for any address but loopback.
    #[arg(long)]
    insecure: bool,
    /// The server's certificate (PEM), for TCP.
    #[arg(long, requires_all = ["tls_key", "client_ca"])]
    tls_cert: Option<PathBuf>,
    /// The server's private key (PEM).
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// The CA that signs client certificates (PEM); their Organization names the role.
    #[arg(long)]
    client_ca: Option<PathBuf>,
    /// A file holding the 256-bit key that encrypts specs at rest (redb only):
    /// 32 raw bytes, or 64 hexadecimal digits. It must not be readable by
    /// group or others. A store created with a key opens only with it.
    #[arg(long)]
    encryption_key_file: Option<PathBuf>,
    /// Refuse a redb store file that group or others may read or write (by
    /// default it is served, with a warning; a new one is made 0600).
    #[arg(long)]
    require_private_store: bool,
    /// The largest request message, in bytes.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().max_message_size)]
    max_message_size: usize,
    /// The most watches one client may hold open: a certificate over all its
    /// connections, or one connection of an insecure loopback listener.
    #[arg(long, alias = "max-watches-per-connection", default_value_t = cosi_grpc::Limits::default().max_watches_per_client)]
    max_watches_per_client: usize,
    /// The most watches the server holds open in all.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().max_watches)]
    max_watches: usize,
    /// The most bytes the compiled queries (ID regexes and label queries) of
    /// one client's open watches and lists may hold; one more is refused.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().max_query_bytes_per_client)]
    max_query_bytes_per_client: usize,
    /// The most connections open at once; the next waits until one closes.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().max_connections,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections: usize,
    /// The most connections one address may hold open; one more is closed
    /// at once. Clients behind one NAT share an address; all of 127.0.0.0/8
    /// is one address, and so is an IPv6 network of --ipv6-prefix-len bits.
    /// [default: a quarter of --max-connections]
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections_per_address: Option<usize>,
    /// How many leading bits of an IPv6 address make the network whose
    /// connections count as one address's (128: each address alone).
    #[arg(long, default_value_t = cosi_grpc::Limits::default().ipv6_prefix_len,
          value_parser = clap::value_parser!(u8).range(0..=128))]
    ipv6_prefix_len: u8,
    /// The most connections still in their TLS handshake at once; the next
    /// waits until one finishes or times out.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().max_tls_handshakes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_tls_handshakes: usize,
    /// The most connections one client certificate may hold open; one more
    /// is closed once its handshake shows the certificate. [default: a
    /// quarter of --max-connections]
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections_per_certificate: Option<usize>,
    /// Seconds a connection may stay open with no call or watch open; then
    /// it is closed (a client reconnects on its next call).
    #[arg(long, default_value_t = cosi_grpc::Limits::default().idle_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    idle_timeout: u64,
    /// The most requests arriving at once, over all connections (a request
    /// counts until its message has arrived); the next waits for a place.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().max_requests_in_flight,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_requests_in_flight: usize,
    /// The most requests one client may be sending at once; one more is
    /// refused. A client is its certificate, or its connection without TLS.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().max_requests_in_flight_per_client,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_requests_in_flight_per_client: usize,
    /// Seconds a request may take to arrive, waiting for a place included;
    /// then it is refused or cancelled. The state's answer is not bounded.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().request_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    request_timeout: u64,
    /// Seconds between keepalive pings on an idle connection; a peer that does
    /// not answer within 10 seconds is disconnected.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().keepalive_interval.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    keepalive_interval: u64,
    /// Seconds a graceful shutdown waits for calls in flight before closing their connections.
    #[arg(long, default_value_t = cosi_grpc::Limits::default().shutdown_grace.as_secs())]
    shutdown_grace: u64,
}

/// How `get`, `graph` and `ui` reach the server. Global, so they may come before
/// the command (`cosictl -e unix:sandbox/cosi.sock get rd`) or after it.
#[derive(Args)]
struct ConnectArgs {
    /// The server (get, graph, ui): unix:PATH or tcp://IP:PORT.
    #[arg(long, short = 'e', global = true, env = "COSI_ENDPOINT", default_value_t = default_endpoint())]
    endpoint: Endpoint,
    /// The CA of the server's certificate (PEM); enables mutual TLS.
    #[arg(long, global = true, requires_all = ["cert", "key"])]
    ca: Option<PathBuf>,
    /// The client certificate (PEM); with `--ca` and `--key` (alone it
    /// would be a plain connection, silently).
    #[arg(long, global = true, requires_all = ["ca", "key"])]
    cert: Option<PathBuf>,
    /// The client key (PEM); with `--ca` and `--cert`.
    #[arg(long, global = true, requires_all = ["ca", "cert"])]
    key: Option<PathBuf>,
    /// The name in the server's certificate.
    #[arg(long, global = true, default_value = "localhost")]
    server_name: String,
}

/// `$XDG_RUNTIME_DIR/cosi.sock`, or `/run/cosi.sock` without it.
fn default_endpoint() -> Endpoint {
    let dir = std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| PathBuf::from("/run"), PathBuf::from);
    Endpoint::Unix(dir.join("cosi.sock"))
}

/// A failure, printed as `cosictl: MESSAGE`.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    State(#[from] cosi::Error),
    #[error("{0}")]
    Serve(#[from] cosi_grpc::ServeError),
    #[error("{0}")]
    Connect(#[from] cosi_grpc::ConnectError),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot open the state {state}: {reason}")]
    Open { state: String, reason: String },
    #[error("cannot use the encryption key file {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("cannot use the etcd password file {path}: {reason}")]
    Password { path: PathBuf, reason: String },
    #[error("{0}")]
    Ui(#[from] cosi_ui::Error),
    #[error("{0}")]
    Usage(String),
    #[error("cannot write the output: {0}")]
    Output(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "cosictl: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Get(args) => get::run(args, &cli.connect).await,
            Command::Graph(args) => graph::run(args, &cli.connect).await,
            Command::Ui(args) => ui::run(args, &cli.connect).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A closed stderr: the exit status still says it.
            let _ = writeln!(std::io::stderr(), "cosictl: {}", report(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error and each of its causes once: a message often repeats its
/// source's, and tonic's transport errors say only "transport error",
/// leaving the cause (a refused connection, a bad certificate) to theirs.
fn report(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

fn read(path: &PathBuf) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Read { path: path.clone(), source })
}

impl ConnectArgs {
    async fn connect(&self) -> Result<Client, CliError> {
        let security = match (&self.ca, &self.cert, &self.key) {
            (Some(ca), Some(cert), Some(key)) => ClientSecurity::MutualTls(ClientTls {
                server_ca: read(ca)?,
                certificate: read(cert)?,
                key: read(key)?,
                server_name: self.server_name.clone(),
            }),
            _ => ClientSecurity::Insecure,
        };
        Ok(Client::connect(&self.endpoint, security).await?)
    }
}
