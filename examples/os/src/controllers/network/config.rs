//! `network.NetworkConfigController`: the default, cmdline and configuration layers.

use cosi::prelude::*;

use crate::controllers::network::{DEFAULT_NAMESERVER, write_address, write_hostname, write_resolvers};
use crate::env::Env;
use crate::error::Error;
use crate::resources::{
    AddressSpec, AddressStatus, ConfigLayer, HostnameSpec, LinkStatus, MachineConfig, NETWORK_CONFIG, OperatorSpec,
    ResolverSpec,
};

/// The sources of the default, cmdline and configuration layers: an
/// automatic hostname from the first address, fallback DNS, the kernel
/// command line, and `machine.yaml` (hostname, DNS, static addresses, and a
/// DHCP operator per interface that asks for one).
#[controller(
    name = "network.NetworkConfigController",
    inputs = [Weak<MachineConfig>(id = "active"), Weak<AddressStatus>, Weak<LinkStatus>],
    outputs = [Shared<HostnameSpec>, Shared<ResolverSpec>, Shared<AddressSpec>, Exclusive<OperatorSpec>],
    inventory = false,
)]
#[derive(Default)]
pub struct NetworkConfigController {
    env: Env,
}

impl NetworkConfigController {
    /// The controller, with the command line of `env`.
    pub fn new(env: Env) -> Self {
        NetworkConfigController { env }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;
        let addresses = ctx.list::<AddressStatus>(&ListOptions::default()).await?;
        let links = ctx.list::<LinkStatus>(&ListOptions::default()).await?;

        // Default layer: a name from the first address, and fallback DNS.
        if let Some(address) = addresses.iter().find(|address| !address.is_loopback()) {
            let name = format!("node-{}", address.ip().replace(['.', ':'], "-"));
            write_hostname(ctx, ConfigLayer::Default, &name).await?;
        }
        write_resolvers(ctx, ConfigLayer::Default, &[DEFAULT_NAMESERVER.to_owned()], &[]).await?;

        // Cmdline layer.
        let cmdline = &self.env.cmdline;
        if let Some(hostname) = &cmdline.hostname {
            write_hostname(ctx, ConfigLayer::Cmdline, hostname).await?;
        }
        if !cmdline.nameservers.is_empty() {
            write_resolvers(ctx, ConfigLayer::Cmdline, &cmdline.nameservers, &[]).await?;
        }

        // Configuration layer.
        if let Some(machine) = &machine {
            let config = &machine.config;
            if let Some(hostname) = &config.hostname {
                write_hostname(ctx, ConfigLayer::Configuration, hostname.as_str()).await?;
            }
            let network = &config.network;
            if !network.nameservers.is_empty() || !network.search_domains.is_empty() {
                let nameservers: Vec<String> = network.nameservers.iter().map(ToString::to_string).collect();
                write_resolvers(ctx, ConfigLayer::Configuration, &nameservers, &network.search_domains).await?;
            }
            for interface in &network.interfaces {
                let link = interface.name.as_str();
                for address in &interface.addresses {
                    write_address(
                        ctx,
                        ConfigLayer::Configuration.id(&format!("{link}/{address}")),
                        link,
                        address.as_str(),
                        ConfigLayer::Configuration,
                    )
                    .await?;
                }
                // An operator runs on a link the kernel has; when the link
                // appears, its status wakes this controller.
                if interface.dhcp && links.iter().any(|status| status.id() == link) {
                    ctx.modify::<OperatorSpec>(format!("dhcp4/{link}").as_str(), |operator| {
                        operator.link = link.to_owned();
                        operator.require_up = true;
                    })
                    .await?;
                }
            }
        }

        ctx.cleanup_outputs_in::<HostnameSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs_in::<ResolverSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs_in::<AddressSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs::<OperatorSpec>().await?;
        Ok(())
    }
}
