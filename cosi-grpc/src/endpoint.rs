//! Where a server listens and a client connects: `unix:PATH` or `tcp://HOST:PORT`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

/// A listening or connecting address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix domain socket at this path.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

/// An endpoint that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid endpoint {input:?}: {reason}")]
pub struct EndpointError {
    input: String,
    reason: &'static str,
}

/// As a [`cosi::Error::Other`], for `?` in a
/// function returning `cosi::Result`.
impl From<EndpointError> for cosi::Error {
    fn from(error: EndpointError) -> Self {
        cosi::Error::other(error)
    }
}

impl Endpoint {
    /// Whether the address is reachable only from this machine (a Unix socket or a loopback address).
    pub fn is_local(&self) -> bool {
        match self {
            Endpoint::Unix(_) => true,
            Endpoint::Tcp(addr) => addr.ip().is_loopback(),
        }
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    /// Parses `unix:PATH`, `unix://PATH`, `tcp://HOST:PORT` or `HOST:PORT`,
    /// where HOST is an IP address or `localhost`.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = |reason| EndpointError { input: input.to_owned(), reason };
        if let Some(path) = input.strip_prefix("unix://").or_else(|| input.strip_prefix("unix:")) {
            return match path.is_empty() {
                true => Err(error("the socket path is empty")),
                false => Ok(Endpoint::Unix(PathBuf::from(path))),
            };
        }
        let address = input.strip_prefix("tcp://").unwrap_or(input);
        if let Some(port) = address.strip_prefix("localhost:") {
            let port = port.parse().map_err(|_| error("the port is not a number from 0 to 65535"))?;
            return Ok(Endpoint::Tcp(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
        }
        address.parse().map(Endpoint::Tcp).map_err(|_| error("expected unix:PATH or tcp://IP:PORT"))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
            Endpoint::Tcp(addr) => write!(f, "tcp://{addr}"),
        }
    }
}
