//! `network.LinkStatusController`: observes the fake kernel.

use std::collections::BTreeMap;

use cosi::prelude::*;

use crate::env::Env;
use crate::error::Error;
use crate::kernel::{KernelError, NET_FILE};
use crate::resources::{AddressStatus, LinkStatus};
use crate::watch::FileWatch;

/// Observes the fake kernel: reads `run/kernel/net.json` at start and
/// whenever it changes (a file watch wakes it) and publishes every link and
/// address. A file that does not parse is reported and changes nothing.
#[controller(
    name = "network.LinkStatusController",
    outputs = [Exclusive<LinkStatus>, Exclusive<AddressStatus>],
    inventory = false,
)]
#[derive(Default)]
pub struct LinkStatusController {
    env: Env,
    watch: Option<FileWatch>,
    /// Whether each link was up when last seen, to report changes.
    up: BTreeMap<String, bool>,
    /// The last error reported, so a wake-up with the same one says nothing again.
    last_error: Option<String>,
}

impl LinkStatusController {
    /// The controller for the kernel of `env`.
    pub fn new(env: Env) -> Self {
        LinkStatusController { env, watch: None, up: BTreeMap::new(), last_error: None }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        if self.watch.is_none() {
            let waker = ctx.waker();
            let dir = self.env.sandbox.resolve("run/kernel")?;
            let name = NET_FILE.rsplit('/').next().unwrap_or(NET_FILE);
            let watch =
                FileWatch::start(&self.env.tasks, &dir, name, self.env.timings.file_debounce, move || waker.wake())
                    .map_err(|source| Error::Watch { path: dir.display().to_string(), source })?;
            self.watch = Some(watch);
        }
        let net = match self.env.kernel.read() {
            Ok(net) => net,
            Err(error @ (KernelError::Invalid { .. } | KernelError::Missing)) => {
                let message = error.to_string();
                if self.last_error.as_ref() != Some(&message) {
                    tracing::error!("{message}; the links and addresses stay as last seen");
                    self.last_error = Some(message);
                }
                return Ok(());
            }
            Err(error) => return Err(error.into()),
        };
        self.last_error = None;
        for link in &net.links {
            match self.up.insert(link.name.clone(), link.up) {
                Some(before) if before != link.up => {
                    tracing::info!("link {} is {}", link.name, if link.up { "up" } else { "down" });
                }
                _ => (),
            }
            ctx.modify::<LinkStatus>(link.name.as_str(), |status| {
                status.index = link.index;
                status.up = link.up;
                status.mac.clone_from(&link.mac);
                status.mtu = link.mtu;
            })
            .await?;
        }
        self.up.retain(|name, _| net.link(name).is_some());
        for address in &net.addresses {
            ctx.modify::<AddressStatus>(format!("{}/{}", address.link, address.address).as_str(), |status| {
                status.link.clone_from(&address.link);
                status.address.clone_from(&address.address);
            })
            .await?;
        }
        ctx.cleanup_outputs::<LinkStatus>().await?;
        ctx.cleanup_outputs::<AddressStatus>().await?;
        Ok(())
    }
}
