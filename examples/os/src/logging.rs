//! Logs for a person: one line per meaningful change, in a compact format,
//! timed from the start.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// What is logged unless `RUST_LOG` says otherwise: the OS's own lines, and
/// only warnings and errors of the libraries (among them the runtime's
/// "reconcile failed; restarting", with the next retry's delay).
pub const DEFAULT_FILTER: &str = "info,cosi=warn,cosi_grpc=warn,cosi_redb=warn";

/// Installs the log subscriber, writing to stderr (in colour on a terminal);
/// `RUST_LOG` is respected. A second call does nothing.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let _ = tracing_subscriber::fmt()
        .compact()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .with_env_filter(filter)
        .try_init();
}
