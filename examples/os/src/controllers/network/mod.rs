//! The network controllers: sources become layered specs in
//! `network-config`, the layers are merged into `network`, and the merged
//! specs are applied to the fake kernel, whose state is observed back.
//!
//! ```text
//! machine.yaml, cmdline ─▶ NetworkConfig ─┐
//! platform.json ────────▶ PlatformConfig ─┼─▶ network-config ─▶ merges ─▶ network ─▶ HostnameSpec / AddressSpec
//! links ─▶ OperatorSpec (fake DHCP) ──────┘                                            (proc/sys, run/kernel/net.json)
//! run/kernel/net.json ─▶ LinkStatus ─▶ LinkStatus, AddressStatus ─▶ back to the sources, EtcFile, time
//! ```

mod address;
mod config;
mod etc_file;
mod hostname;
mod link_status;
mod merge;
mod operator;
mod platform;

pub use address::AddressSpecController;
pub use config::NetworkConfigController;
pub use etc_file::{EtcFileController, NETWORK_FILES};
pub use hostname::{HOSTNAME_SPEC, hostname_spec};
pub use link_status::LinkStatusController;
pub use merge::{address_merge, hostname_merge, resolver_merge};
pub use operator::OperatorSpecController;
pub use platform::PlatformConfigController;

use cosi::prelude::*;

use crate::machine_config::FileMode;
use crate::resources::{AddressSpec, ConfigLayer, EtcFileSpec, HostnameSpec, NETWORK_CONFIG, ResolverSpec};

/// The fallback DNS server of the default layer.
pub(super) const DEFAULT_NAMESERVER: &str = "8.8.8.8";

/// The name the platform layer is published under.
pub(super) const PLATFORM_NAME: &str = "sandbox";

/// A resource of type `T` in `network-config`.
pub(super) fn layered<T: Resource>(id: &str) -> Pointer {
    Pointer::new(NETWORK_CONFIG, T::TYPE, id)
}

/// `demo-node.lab.local` as (`demo-node`, `lab.local`).
pub(super) fn split_hostname(name: &str) -> (String, String) {
    match name.split_once('.') {
        Some((host, domain)) => (host.to_owned(), domain.to_owned()),
        None => (name.to_owned(), String::new()),
    }
}

pub(super) async fn write_file<C>(ctx: &Ctx<C>, id: &str, contents: String) -> cosi::Result<()>
where
    EtcFileSpec: cosi::controller::Writes<C>,
{
    ctx.modify::<EtcFileSpec>(id, move |file| {
        file.contents.clone_from(&contents);
        file.mode = FileMode(0o644);
    })
    .await
    .map(drop)
}

pub(super) async fn write_hostname<C>(ctx: &Ctx<C>, layer: ConfigLayer, name: &str) -> cosi::Result<()>
where
    HostnameSpec: cosi::controller::Writes<C>,
{
    let (hostname, domainname) = split_hostname(name);
    ctx.modify::<HostnameSpec>(layered::<HostnameSpec>(&layer.id("hostname")), move |spec| {
        spec.hostname.clone_from(&hostname);
        spec.domainname.clone_from(&domainname);
        spec.layer = layer;
    })
    .await
    .map(drop)
}

pub(super) async fn write_resolvers<C>(
    ctx: &Ctx<C>,
    layer: ConfigLayer,
    nameservers: &[String],
    search_domains: &[String],
) -> cosi::Result<()>
where
    ResolverSpec: cosi::controller::Writes<C>,
{
    ctx.modify::<ResolverSpec>(layered::<ResolverSpec>(&layer.id("resolvers")), |spec| {
        spec.nameservers = nameservers.to_vec();
        spec.search_domains = search_domains.to_vec();
        spec.layer = layer;
    })
    .await
    .map(drop)
}

pub(super) async fn write_address<C>(
    ctx: &Ctx<C>,
    id: String,
    link: &str,
    address: &str,
    layer: ConfigLayer,
) -> cosi::Result<()>
where
    AddressSpec: cosi::controller::Writes<C>,
{
    ctx.modify::<AddressSpec>(layered::<AddressSpec>(&id), |spec| {
        spec.link = link.to_owned();
        spec.address = address.to_owned();
        spec.layer = layer;
    })
    .await
    .map(drop)
}
