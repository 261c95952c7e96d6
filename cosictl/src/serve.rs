//! `cosictl serve`: one state backend (memory, a redb file, etcd) served over gRPC.
//!
//! Invariants:
//! - A backend that cannot be opened or reached is an error before anything
//!   listens: the server never serves a state it could not open.
//! - Reaching etcd is bounded by [`ETCD_CONNECT_TIMEOUT`]: etcd's client
//!   connects lazily, so an unreachable cluster would otherwise hang the first call.
//! - On SIGTERM or SIGINT the server stops, then the last handle on the
//!   backend is dropped before the process exits: a redb file is committed
//!   and closed, and opens again without repair.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use cosi::state::{MemoryState, Registry, State};
use cosi_grpc::{Endpoint, Security, Server, ServerTls};

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
    /// `etcd:URL[,URL...]`: an etcd cluster, keys under `/cosi`.
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
                match endpoints.iter().find(|url| !is_etcd_url(url)) {
                    Some(bad) => Err(format!(
                        "{bad:?} is not an etcd endpoint: expected etcd:http://HOST:PORT[,http://HOST:PORT...]"
                    )),
                    None => Ok(StateSpec::Etcd(endpoints)),
                }
            }
            _ => Err(format!("unknown state {text:?}: expected memory, redb:PATH or etcd:http://HOST:PORT[,...]")),
        }
    }
}

/// `http://HOST:PORT`, with a host and a port.
fn is_etcd_url(url: &str) -> bool {
    url.strip_prefix("http://")
        .and_then(|authority| authority.trim_end_matches('/').rsplit_once(':'))
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

/// Opens the backend, publishes the default definitions, serves until a signal, closes the backend.
pub async fn run(args: ServeArgs) -> Result<(), CliError> {
    let security = security(&args)?;
    let state = open(&args.state).await?;
    let listening = Server::new(Arc::clone(&state)).bind(&args.listen, security).await?;
    println!("listening on {}", listening.endpoint());
    let served = listening.serve_with_shutdown(shutdown_signal()).await;
    close(state).await;
    served?;
    Ok(())
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

/// The backend, open and holding the default namespaces and definitions.
async fn open(spec: &StateSpec) -> Result<Arc<dyn State>, CliError> {
    let state: Arc<dyn State> = match spec {
        StateSpec::Memory => Arc::new(MemoryState::default()),
        StateSpec::Redb(path) => {
            let opening = path.clone();
            // Opening reads the whole file: keep it off the async threads.
            let opened = tokio::task::spawn_blocking(move || {
                cosi_redb::RedbState::open(&opening, cosi_redb::Options::default())
            })
            .await
            .map_err(|err| CliError::Open { state: format!("redb:{}", path.display()), reason: err.to_string() })?;
            let redb = opened
                .map_err(|err| CliError::Open { state: format!("redb:{}", path.display()), reason: err.to_string() })?;
            Arc::new(redb)
        }
        StateSpec::Etcd(endpoints) => {
            let unreachable =
                |reason: String| CliError::Open { state: format!("etcd:{}", endpoints.join(",")), reason };
            let options = cosi_etcd::Options { connect_timeout: ETCD_CONNECT_TIMEOUT, ..cosi_etcd::Options::default() };
            let etcd =
                cosi_etcd::EtcdState::connect(endpoints, options).await.map_err(|err| unreachable(err.to_string()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_specs_parse_and_malformed_ones_say_what_is_expected() {
        assert_eq!("memory".parse(), Ok(StateSpec::Memory));
        assert_eq!("redb:/var/lib/cosi.redb".parse(), Ok(StateSpec::Redb("/var/lib/cosi.redb".into())));
        assert_eq!("redb:a:b".parse(), Ok(StateSpec::Redb("a:b".into())));
        assert_eq!(
            "etcd:http://127.0.0.1:2379,http://10.0.0.2:2379/".parse(),
            Ok(StateSpec::Etcd(vec!["http://127.0.0.1:2379".into(), "http://10.0.0.2:2379/".into()]))
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
        ] {
            let err = text.parse::<StateSpec>().expect_err(text);
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
