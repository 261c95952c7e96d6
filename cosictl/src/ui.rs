//! `cosictl ui`: the live page of the state behind an endpoint, served on
//! loopback until Ctrl-C (see the `cosi-ui` crate).

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use clap::Args;
use cosi::state::State;

use crate::{CliError, ConnectArgs};

#[derive(Args)]
pub struct UiArgs {
    /// Where to serve the page: a loopback IP:PORT (127.0.0.1 on a free
    /// port by default). The page has no TLS, so other addresses are
    /// refused, as `serve --insecure` refuses them; from another machine,
    /// use a tunnel (`ssh -L`). It answers only requests that carry its
    /// random token: open the URL printed, which holds it.
    #[arg(long, default_value_t = SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))]
    listen: SocketAddr,
    /// Show sensitive types too, as far as the connection may read them,
    /// to whoever has the page's URL. Off by default.
    #[arg(long)]
    show_sensitive: bool,
}

pub async fn run(args: UiArgs, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = connect.connect().await?;
    let state: Arc<dyn State> = Arc::new(client);
    let ui =
        cosi_ui::Ui::new(state, cosi_ui::Config::default().listen(args.listen).show_sensitive(args.show_sensitive));
    let listening = ui.bind().await?;
    // For whoever reads; a closed stdout stops nothing.
    let _ = writeln!(std::io::stdout(), "serving the live page of {} on {}", connect.endpoint, listening.url());
    listening.serve_with_shutdown(cosi::runtime::shutdown_signal()).await?;
    Ok(())
}
