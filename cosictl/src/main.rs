//! `cosictl`: a command-line client for COSI states.
//!
//! - `cosictl serve`: a standalone in-memory state server, for tests and for
//!   controllers that run in other processes.
//! - `cosictl get`: reads (and watches) resources, resolving type aliases
//!   through the resource definitions the state publishes, as `talosctl get` does.

mod get;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cosi::state::{MemoryState, Registry};
use cosi_grpc::{Client, ClientSecurity, ClientTls, Endpoint, Security, Server, ServerTls};

#[derive(Parser)]
#[command(name = "cosictl", version, about = "A command-line client for COSI states")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serves a state over gRPC until SIGTERM or SIGINT.
    Serve(ServeArgs),
    /// Prints resources of a type, or one resource.
    Get(get::GetArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum StateKind {
    /// Everything in memory: gone when the server stops.
    Memory,
}

#[derive(Args)]
struct ServeArgs {
    /// The state backend.
    #[arg(long, value_enum, default_value = "memory")]
    state: StateKind,
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
}

/// How `get` reaches the server.
#[derive(Args)]
struct ConnectArgs {
    /// The server: unix:PATH or tcp://IP:PORT.
    #[arg(long, short = 'e', env = "COSI_ENDPOINT", default_value_t = default_endpoint())]
    endpoint: Endpoint,
    /// The CA of the server's certificate (PEM); enables mutual TLS.
    #[arg(long, requires_all = ["cert", "key"])]
    ca: Option<PathBuf>,
    /// The client certificate (PEM).
    #[arg(long)]
    cert: Option<PathBuf>,
    /// The client key (PEM).
    #[arg(long)]
    key: Option<PathBuf>,
    /// The name in the server's certificate.
    #[arg(long, default_value = "localhost")]
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
            eprintln!("cosictl: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve(args).await,
            Command::Get(args) => get::run(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("cosictl: {err}");
            ExitCode::FAILURE
        }
    }
}

fn read(path: &PathBuf) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Read { path: path.clone(), source })
}

async fn serve(args: ServeArgs) -> Result<(), CliError> {
    let security = match (&args.tls_cert, &args.tls_key, &args.client_ca) {
        (Some(cert), Some(key), Some(ca)) => {
            Security::MutualTls(ServerTls { certificate: read(cert)?, key: read(key)?, client_ca: read(ca)? })
        }
        _ => match (&args.listen, args.insecure) {
            (Endpoint::Unix(_), _) | (Endpoint::Tcp(_), true) => Security::Insecure,
            (Endpoint::Tcp(_), false) => {
                return Err(CliError::Usage(
                    "TCP requires mutual TLS (--tls-cert, --tls-key, --client-ca), or --insecure on a loopback address"
                        .into(),
                ));
            }
        },
    };
    let state = match args.state {
        StateKind::Memory => MemoryState::default(),
    };
    Registry::new(&state).register_defaults().await?;
    let listening = Server::new(state).bind(&args.listen, security).await?;
    println!("listening on {}", listening.endpoint());
    listening.serve_with_shutdown(shutdown_signal()).await?;
    Ok(())
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        // Without a SIGTERM handler, at least stop on Ctrl-C.
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
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
