//! The example OS: `cargo run --example os [-- --sandbox DIR]`.
//!
//! Boots a small, Talos-shaped control plane whose every side effect is a
//! file in the sandbox directory, serves its state on `DIR/cosi.sock`, and
//! runs until Ctrl-C; with `--ui`, serves the live page too (on a free
//! loopback port, or `--ui ADDR`) and shows its URL, which carries the
//! page's token, in the banner. The OS
//! itself is the `example-os` crate beside this file; the README walks
//! through what to do with it.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use example_os::{Options, Os};

/// The example OS: edit `DIR/machine.yaml` while it runs, and look at it with
/// `cosictl -e unix:DIR/cosi.sock get ...`.
#[derive(Parser)]
#[command(name = "os", version)]
struct Args {
    /// The sandbox directory: created with starter files on first boot, and
    /// the only place the OS writes to. Each boot deletes and rebuilds its
    /// `proc/`, `run/` and `etc/`, so an existing directory is taken only if
    /// the OS made it (it has a `.example-os-sandbox` file), or if it is
    /// empty or holds only the files you edit.
    #[arg(long, default_value = "sandbox")]
    sandbox: PathBuf,
    /// Serves the live page (the controller graph, every resource) on
    /// ADDR, or on a free loopback port without it; the banner shows the
    /// URL, with the token the page answers only to.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0")]
    ui: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> cosi::Result<()> {
    let args = Args::parse();
    example_os::logging::init();
    let mut options = Options::new(args.sandbox);
    if let Some(address) = args.ui {
        options = options.ui(address);
    }
    let os = Os::boot(options).await.inspect_err(|error| tracing::error!("cannot boot: {error}"))?;
    os.run_until(cosi::runtime::shutdown_signal()).await.inspect_err(|error| tracing::error!("{error}"))?;
    Ok(())
}
