//! `network.EtcFileController`: renders `etc/hostname`, `etc/hosts` and `etc/resolv.conf`.

use cosi::prelude::*;

use crate::controllers::network::write_file;
use crate::error::Error;
use crate::resources::{AddressStatus, EtcFileSpec, HostnameStatus, MachineConfig, ResolverSpec};

/// Renders the network's files under `etc/`: `hostname`, `hosts` and
/// `resolv.conf`, as `EtcFileSpec`s for `files.EtcFileController` to write.
#[controller(
    name = "network.EtcFileController",
    inputs = [
        Weak<HostnameStatus>(id = "hostname"),
        Weak<ResolverSpec>(id = "resolvers"),
        Weak<AddressStatus>,
        Weak<MachineConfig>(id = "active"),
    ],
    outputs = [Shared<EtcFileSpec>],
    inventory = false,
)]
#[derive(Default)]
pub struct EtcFileController;

/// The files `network.EtcFileController` writes; `machine.yaml` cannot name them.
pub const NETWORK_FILES: &[&str] = &["hostname", "hosts", "resolv.conf"];

impl EtcFileController {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let hostname = ctx.get::<HostnameStatus>("hostname").await.ignore_not_found()?;
        let resolvers = ctx.get::<ResolverSpec>("resolvers").await.ignore_not_found()?;
        let addresses = ctx.list::<AddressStatus>(&ListOptions::default()).await?;
        let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;

        if let Some(hostname) = &hostname {
            write_file(ctx, "hostname", format!("{}\n", hostname.hostname)).await?;
            let mut hosts = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
            let names = match hostname.domainname.is_empty() {
                true => hostname.hostname.clone(),
                false => format!("{} {}", hostname.fqdn(), hostname.hostname),
            };
            if let Some(address) = addresses.iter().find(|address| !address.is_loopback()) {
                hosts.push_str(&format!("{}\t{names}\n", address.ip()));
            }
            for entry in machine.iter().flat_map(|machine| &machine.config.network.extra_host_entries) {
                hosts.push_str(&format!("{}\t{}\n", entry.ip, entry.aliases.join(" ")));
            }
            write_file(ctx, "hosts", hosts).await?;
        }
        if let Some(resolvers) = &resolvers {
            let mut conf = String::new();
            for nameserver in &resolvers.nameservers {
                conf.push_str(&format!("nameserver {nameserver}\n"));
            }
            if !resolvers.search_domains.is_empty() {
                conf.push_str(&format!("search {}\n", resolvers.search_domains.join(" ")));
            }
            write_file(ctx, "resolv.conf", conf).await?;
        }
        Ok(())
    }
}
