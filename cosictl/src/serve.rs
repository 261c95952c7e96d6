//! `cosictl serve`: one state backend (memory, a redb file, etcd) served over gRPC.
//!
//! Invariants:
//! - A backend that cannot be opened or reached is an error before anything
//!   listens: the server never serves a state it could not open.
//! - Reaching etcd is bounded by [`ETCD_CONNECT_TIMEOUT`]: etcd's client
//!   connects lazily, so an unreachable cluster would otherwise hang the first call.
//! - On SIGTERM or SIGINT the server stops (waiting at most `--shutdown-grace`
//!   for calls in flight), then the last handle on the backend is dropped
//!   before the process exits: a redb file is committed and closed, and opens
//!   again without repair.
//! - Secrets stay closed: a new redb file is created 0600 (by `cosi_redb`),
//!   an existing one that group or others may read is served with a warning
//!   (refused with `--require-private-store`), and an encryption key file
//!   readable by group or others is refused (`cosi_redb::check_private`).
//! - The server logs to stderr (warnings and errors; `RUST_LOG` for more):
//!   what a client is told only by a correlation ID is there.
//! - etcd is reached over TLS for `https://` endpoints (`--etcd-ca`, and a
//!   client certificate with `--etcd-cert`/`--etcd-key`), and as a user with
//!   `--etcd-user` and a password read from a private file, never from the
//!   command line. A password is never sent in plaintext off this machine:
//!   with `http://` endpoints it is refused unless every one is on loopback.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use cosi::state::{MemoryState, Registry, State};
use cosi_grpc::{Endpoint, Limits, Security, Server, ServerTls};

use crate::{CliError, ServeArgs, read};

/// How long `serve --state etcd:...` waits for etcd to answer.
pub const ETCD_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the server waits, after it stopped, for calls still holding the state to end.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// The backend `--state` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateSpec {
    /// `memory`: everything in memory, gone when the server stops.
    Memory,
    /// `redb:PATH`: a durable redb file, created when missing.
    Redb(PathBuf),
    /// `etcd:URL[,URL...]`: an etcd cluster (`http://` or, with TLS settings,
    /// `https://` URLs, all of one scheme), keys under `/cosi`.
    Etcd(Vec<String>),
}

impl FromStr for StateSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (backend, rest) = match text.split_once(':') {
            Some((backend, rest)) => (backend, Some(rest)),
            None => (text, None),
        };
        match (backend, rest) {
            ("memory", None) => Ok(StateSpec::Memory),
            ("redb", Some(path)) if !path.is_empty() => Ok(StateSpec::Redb(PathBuf::from(path))),
            ("redb", _) => Err("redb needs a file: redb:PATH".into()),
            ("etcd", Some(endpoints)) => {
                let endpoints: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
                if let Some(bad) = endpoints.iter().find(|url| etcd_url(url).is_none()) {
                    return Err(format!(
                        "{bad:?} is not an etcd endpoint: expected etcd:http://HOST:PORT[,...] or etcd:https://HOST:PORT[,...]"
                    ));
                }
                let https = endpoints.iter().filter(|url| url.starts_with("https://")).count();
                if https != 0 && https != endpoints.len() {
                    return Err("etcd endpoints must all be http:// or all be https://".into());
                }
                Ok(StateSpec::Etcd(endpoints))
            }
            _ => Err(format!("unknown state {text:?}: expected memory, redb:PATH or etcd:http(s)://HOST:PORT[,...]")),
        }
    }
}

/// The host of `http://HOST:PORT` or `https://HOST:PORT`, when `url` is one
/// (with a host and a port).
fn etcd_url(url: &str) -> Option<&str> {
    let authority = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let (host, port) = authority.trim_end_matches('/').rsplit_once(':')?;
    (!host.is_empty() && port.parse::<u16>().is_ok()).then_some(host)
}

/// Opens the backend, publishes the default definitions, serves until a signal, closes the backend.
pub async fn run(args: ServeArgs) -> Result<(), CliError> {
    log_to_stderr();
    let security = security(&args)?;
    let mut redb = cosi_redb::Options::default();
    match (&args.encryption_key_file, &args.state) {
        (None, _) => (),
        (Some(path), StateSpec::Redb(_)) => redb = redb.encryption_key(read_key(path)?),
        (Some(_), _) => {
            return Err(CliError::Usage("--encryption-key-file needs a redb state (--state redb:PATH)".into()));
        }
    }
    match (args.require_private_store, &args.state) {
        (false, _) => (),
        (true, StateSpec::Redb(_)) => redb = redb.require_private_files(),
        (true, _) => {
            return Err(CliError::Usage("--require-private-store needs a redb state (--state redb:PATH)".into()));
        }
    }
    let limits = limits(&args);
    let etcd = etcd_options(&args)?;
    let state = open(&args.state, redb, etcd).await?;
    let listening = Server::new(Arc::clone(&state)).limits(limits).bind(&args.listen, security).await?;
    // Where it listens, for whoever reads; a closed stdout stops nothing.
    let _ = writeln!(std::io::stdout(), "listening on {}", listening.endpoint());
    let served = listening.serve_with_shutdown(cosi::runtime::shutdown_signal()).await;
    close(state).await;
    served?;
    Ok(())
}

/// The server's limits from the command line's flags.
fn limits(args: &ServeArgs) -> Limits {
    let quarter = cosi_grpc::connections_per_address(args.max_connections);
    Limits {
        max_message_size: args.max_message_size,
        max_watches_per_client: args.max_watches_per_client,
        max_watches: args.max_watches,
        max_query_bytes_per_client: args.max_query_bytes_per_client,
        max_connections: args.max_connections,
        max_connections_per_address: args.max_connections_per_address.unwrap_or(quarter),
        ipv6_prefix_len: args.ipv6_prefix_len,
        max_tls_handshakes: args.max_tls_handshakes,
        max_connections_per_certificate: args.max_connections_per_certificate.unwrap_or(quarter),
        idle_timeout: Duration::from_secs(args.idle_timeout),
        max_requests_in_flight: args.max_requests_in_flight,
        max_requests_in_flight_per_client: args.max_requests_in_flight_per_client,
        request_timeout: Duration::from_secs(args.request_timeout),
        keepalive_interval: Duration::from_secs(args.keepalive_interval),
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        ..Limits::default()
    }
}

/// The server's log, on stderr: warnings and errors, unless `RUST_LOG` says otherwise.
fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Only fails when a subscriber is set already, which then logs.
    let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).try_init();
}

fn security(args: &ServeArgs) -> Result<Security, CliError> {
    match (&args.tls_cert, &args.tls_key, &args.client_ca) {
        (Some(cert), Some(key), Some(ca)) => {
            Ok(Security::MutualTls(ServerTls { certificate: read(cert)?, key: read(key)?, client_ca: read(ca)? }))
        }
        _ => match (&args.listen, args.insecure) {
            (Endpoint::Unix(_), _) | (Endpoint::Tcp(_), true) => Ok(Security::Insecure),
            (Endpoint::Tcp(_), false) => Err(CliError::Usage(
                "TCP requires mutual TLS (--tls-cert, --tls-key, --client-ca), or --insecure on a loopback address"
                    .into(),
            )),
        },
    }
}

/// The etcd options the `--etcd-*` flags give; refused when they do not fit
/// the `--state` (any of them without etcd, https endpoints without a CA,
/// a CA with http endpoints). A password for a non-loopback http endpoint
/// is refused by `cosi_etcd` when it connects.
fn etcd_options(args: &ServeArgs) -> Result<cosi_etcd::Options, CliError> {
    let given = args.etcd_ca.is_some() || args.etcd_user.is_some();
    let StateSpec::Etcd(endpoints) = &args.state else {
        return match given {
            true => Err(CliError::Usage("the --etcd-* options need an etcd state (--state etcd:URL)".into())),
            false => Ok(cosi_etcd::Options::default()),
        };
    };
    let https = endpoints.iter().all(|url| url.starts_with("https://"));
    let tls = match (&args.etcd_ca, https) {
        (Some(ca), true) => Some(cosi_etcd::Tls {
            server_ca: read(ca)?,
            client: match (&args.etcd_cert, &args.etcd_key) {
                (Some(cert), Some(key)) => {
                    Some(cosi_etcd::ClientCertificate { certificate: read(cert)?, key: read(key)? })
                }
                _ => None,
            },
            server_name: args.etcd_server_name.clone(),
        }),
        (None, false) => None,
        (None, true) => return Err(CliError::Usage("https:// etcd endpoints need --etcd-ca".into())),
        (Some(_), false) => {
            return Err(CliError::Usage("--etcd-ca is for https:// etcd endpoints; these are http://".into()));
        }
    };
    // `cosi_etcd` refuses to send them in plaintext off this machine.
    let credentials = match (&args.etcd_user, &args.etcd_password_file) {
        (Some(user), Some(path)) => Some(cosi_etcd::Credentials { user: user.clone(), password: read_password(path)? }),
        _ => None,
    };
    Ok(cosi_etcd::Options { connect_timeout: ETCD_CONNECT_TIMEOUT, tls, credentials, ..cosi_etcd::Options::default() })
}

/// The password in `path`, a private file: its text without one trailing newline.
fn read_password(path: &Path) -> Result<String, CliError> {
    let bad = |reason: String| CliError::Password { path: path.to_path_buf(), reason };
    cosi_redb::check_private(path).map_err(|err| bad(err.to_string()))?;
    let mut text = std::fs::read_to_string(path).map_err(|err| bad(err.to_string()))?;
    let kept = text.strip_suffix('\n').map(|rest| rest.strip_suffix('\r').unwrap_or(rest)).map(str::len);
    if let Some(kept) = kept {
        // Truncated in place, so no second copy of the password is left behind.
        text.truncate(kept);
    }
    if text.is_empty() {
        return Err(bad("it is empty".into()));
    }
    Ok(text)
}

/// The encryption key in `path`: 32 raw bytes or 64 hexadecimal digits
/// (surrounding whitespace ignored), in a file only its owner can read: a
/// key file is refused, never warned about, since it opens every spec.
fn read_key(path: &Path) -> Result<cosi_redb::EncryptionKey, CliError> {
    let bad = |reason: String| CliError::Key { path: path.to_path_buf(), reason };
    cosi_redb::check_private(path).map_err(|err| bad(err.to_string()))?;
    cosi_redb::EncryptionKey::from_file(path).map_err(|err| bad(err.to_string()))
}

/// The backend, open and holding the default namespaces and definitions.
async fn open(
    spec: &StateSpec,
    redb: cosi_redb::Options,
    etcd: cosi_etcd::Options,
) -> Result<Arc<dyn State>, CliError> {
    let state: Arc<dyn State> = match spec {
        StateSpec::Memory => Arc::new(MemoryState::default()),
        StateSpec::Redb(path) => {
            let opening = path.clone();
            let options = redb;
            // Opening reads the whole file: keep it off the async threads.
            let opened = tokio::task::spawn_blocking(move || cosi_redb::RedbState::open(&opening, options))
                .await
                .map_err(|err| CliError::Open { state: format!("redb:{}", path.display()), reason: err.to_string() })?;
            let redb = opened
                .map_err(|err| CliError::Open { state: format!("redb:{}", path.display()), reason: err.to_string() })?;
            Arc::new(redb)
        }
        StateSpec::Etcd(endpoints) => {
            let unreachable =
                |reason: String| CliError::Open { state: format!("etcd:{}", endpoints.join(",")), reason };
            // Connecting authenticates when a user is given: bounded like the first call.
            let connected = tokio::time::timeout(ETCD_CONNECT_TIMEOUT, cosi_etcd::EtcdState::connect(endpoints, etcd))
                .await
                .map_err(|_| unreachable(format!("no answer within {}s", ETCD_CONNECT_TIMEOUT.as_secs())))?;
            let etcd = connected.map_err(|err| unreachable(err.to_string()))?;
            // The client connects lazily: the first call tells whether etcd answers.
            let registered = tokio::time::timeout(ETCD_CONNECT_TIMEOUT, Registry::new(&etcd).register_defaults()).await;
            match registered {
                Ok(result) => result.map_err(|err| unreachable(err.to_string()))?,
                Err(_) => return Err(unreachable(format!("no answer within {}s", ETCD_CONNECT_TIMEOUT.as_secs()))),
            }
            return Ok(Arc::new(etcd));
        }
    };
    Registry::new(&state).register_defaults().await?;
    Ok(state)
}

/// Drops the last handle on the state, so that its backend closes (redb commits and closes the file).
///
/// Calls that were in flight when the server stopped may still hold the
/// state for a moment; after [`RELEASE_TIMEOUT`] the process exits anyway,
/// and the runtime's shutdown drops what they hold.
async fn close(state: Arc<dyn State>) {
    let deadline = tokio::time::Instant::now() + RELEASE_TIMEOUT;
    while Arc::strong_count(&state) > 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Closing joins the redb committer thread: keep it off the async threads.
    let _ = tokio::task::spawn_blocking(move || drop(state)).await;
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn serve_args(flags: &[&str]) -> ServeArgs {
        let cli = crate::Cli::try_parse_from(["cosictl", "serve"].iter().chain(flags)).expect("the flags parse");
        match cli.command {
            crate::Command::Serve(args) => *args,
            _ => unreachable!("the serve command"),
        }
    }

    #[test]
    fn the_flags_default_to_the_servers_defaults() {
        assert_eq!(limits_of(&[]), Limits::default());
    }

    #[test]
    fn each_limit_flag_sets_its_limit() {
        let limits = limits_of(&[
            "--max-query-bytes-per-client",
            "1000",
            "--max-connections",
            "40",
            "--ipv6-prefix-len",
            "56",
            "--max-tls-handshakes",
            "7",
            "--idle-timeout",
            "9",
        ]);
        assert_eq!(limits.max_query_bytes_per_client, 1000);
        assert_eq!(limits.ipv6_prefix_len, 56);
        assert_eq!(limits.max_tls_handshakes, 7);
        assert_eq!(limits.idle_timeout, Duration::from_secs(9));
        assert_eq!((limits.max_connections_per_address, limits.max_connections_per_certificate), (10, 10));
        let limits = limits_of(&["--max-connections-per-certificate", "3", "--max-connections-per-address", "4"]);
        assert_eq!((limits.max_connections_per_address, limits.max_connections_per_certificate), (4, 3));
        for bad in [["--ipv6-prefix-len", "129"], ["--max-tls-handshakes", "0"], ["--idle-timeout", "0"]] {
            assert!(crate::Cli::try_parse_from(["cosictl", "serve"].iter().chain(&bad)).is_err(), "{bad:?}");
        }
    }

    fn limits_of(flags: &[&str]) -> Limits {
        limits(&serve_args(flags))
    }

    #[test]
    fn state_specs_parse_and_malformed_ones_say_what_is_expected() {
        assert_eq!("memory".parse(), Ok(StateSpec::Memory));
        assert_eq!("redb:/var/lib/cosi.redb".parse(), Ok(StateSpec::Redb("/var/lib/cosi.redb".into())));
        assert_eq!("redb:a:b".parse(), Ok(StateSpec::Redb("a:b".into())));
        assert_eq!(
            "etcd:http://127.0.0.1:2379,http://10.0.0.2:2379/".parse(),
            Ok(StateSpec::Etcd(vec!["http://127.0.0.1:2379".into(), "http://10.0.0.2:2379/".into()]))
        );
        assert_eq!(
            "etcd:https://etcd.example:2379".parse(),
            Ok(StateSpec::Etcd(vec!["https://etcd.example:2379".into()]))
        );
        for (text, expected) in [
            ("", "unknown state"),
            ("memory:x", "unknown state"),
            ("sqlite:x", "unknown state"),
            ("redb", "redb:PATH"),
            ("redb:", "redb:PATH"),
            ("etcd:", "not an etcd endpoint"),
            ("etcd:127.0.0.1:2379", "not an etcd endpoint"),
            ("etcd:http://127.0.0.1", "not an etcd endpoint"),
            ("etcd:http://127.0.0.1:2379,", "not an etcd endpoint"),
            ("etcd:http://:2379", "not an etcd endpoint"),
            ("etcd:http://h:99999", "not an etcd endpoint"),
            ("etcd:unix:///run/etcd.sock", "not an etcd endpoint"),
            ("etcd:https://a:1,http://b:2", "all be https://"),
        ] {
            let err = text.parse::<StateSpec>().expect_err(text);
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
