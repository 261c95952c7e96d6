//! The `network-config` and `network` namespaces.

use cosi::prelude::*;

use super::ConfigLayer;

/// The hostname (and domain name) one source asks for: in `network-config`
/// as `<layer>/hostname`, merged in `network` as `hostname`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "HostnameSpecs.net.exampleos.dev",
    namespace = "network",
    print_columns(name = "Hostname", json_path = "{.hostname}"),
    print_columns(name = "Domainname", json_path = "{.domainname}"),
    print_columns(name = "Layer", json_path = "{.layer}")
)]
#[serde(rename_all = "camelCase")]
pub struct HostnameSpec {
    /// The first label.
    pub hostname: String,
    /// The rest, possibly empty.
    pub domainname: String,
    /// Where it comes from.
    pub layer: ConfigLayer,
}

/// DNS settings one source asks for: `<layer>/resolvers`, merged as `resolvers`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "ResolverSpecs.net.exampleos.dev",
    namespace = "network",
    aliases = ["resolvers"],
    print_columns(name = "Nameservers", json_path = "{.nameservers[*]}"),
    print_columns(name = "Search", json_path = "{.searchDomains[*]}"),
    print_columns(name = "Layer", json_path = "{.layer}"),
)]
#[serde(rename_all = "camelCase")]
pub struct ResolverSpec {
    /// DNS servers.
    pub nameservers: Vec<String>,
    /// Search domains.
    pub search_domains: Vec<String>,
    /// Where it comes from (merged: the highest layer that has nameservers).
    pub layer: ConfigLayer,
}

/// An address one source asks for: `<layer>/<link>/<cidr>` (the operator
/// layer adds its own name: `operator/dhcp4/eth0/...`), merged as `<link>/<cidr>`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "AddressSpecs.net.exampleos.dev",
    namespace = "network",
    print_columns(name = "Link", json_path = "{.link}"),
    print_columns(name = "Address", json_path = "{.address}"),
    print_columns(name = "Layer", json_path = "{.layer}")
)]
#[serde(rename_all = "camelCase")]
pub struct AddressSpec {
    /// The link.
    pub link: String,
    /// The address, in CIDR form.
    pub address: String,
    /// Where it comes from.
    pub layer: ConfigLayer,
}

impl AddressSpec {
    /// The merged ID: `<link>/<cidr>`.
    pub fn merged_id(&self) -> String {
        format!("{}/{}", self.link, self.address)
    }
}

/// A network operator to run: `dhcp4/<link>`. Sensitive, as an operator's
/// settings hold secrets on a real machine (a VIP's shared key, for one).
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "OperatorSpecs.net.exampleos.dev",
    namespace = "network",
    sensitive,
    print_columns(name = "Link", json_path = "{.link}"),
    print_columns(name = "RequireUp", json_path = "{.requireUp}")
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSpec {
    /// The link it runs on.
    pub link: String,
    /// Whether it runs only while the link is up.
    pub require_up: bool,
}

/// The hostname the (fake) kernel has: `hostname`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "HostnameStatuses.net.exampleos.dev",
    namespace = "network",
    aliases = ["hostname"],
    print_columns(name = "Hostname", json_path = "{.hostname}"),
    print_columns(name = "Domainname", json_path = "{.domainname}"),
)]
#[serde(rename_all = "camelCase")]
pub struct HostnameStatus {
    /// The first label.
    pub hostname: String,
    /// The rest, possibly empty.
    pub domainname: String,
}

impl HostnameStatus {
    /// `hostname.domainname`, or the hostname alone.
    pub fn fqdn(&self) -> String {
        match self.domainname.is_empty() {
            true => self.hostname.clone(),
            false => format!("{}.{}", self.hostname, self.domainname),
        }
    }
}

/// A link of the fake kernel, by name.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "LinkStatuses.net.exampleos.dev",
    namespace = "network",
    aliases = ["link", "links"],
    print_columns(name = "Up", json_path = "{.up}"),
    print_columns(name = "Mac", json_path = "{.mac}"),
    print_columns(name = "Mtu", json_path = "{.mtu}"),
)]
#[serde(rename_all = "camelCase")]
pub struct LinkStatus {
    /// Its index.
    pub index: u32,
    /// Whether it is up.
    pub up: bool,
    /// Its hardware address.
    pub mac: String,
    /// Its MTU.
    pub mtu: u32,
}

/// An address the fake kernel has: `<link>/<cidr>`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "AddressStatuses.net.exampleos.dev",
    namespace = "network",
    aliases = ["address", "addresses"],
    print_columns(name = "Link", json_path = "{.link}"),
    print_columns(name = "Address", json_path = "{.address}"),
)]
#[serde(rename_all = "camelCase")]
pub struct AddressStatus {
    /// The link.
    pub link: String,
    /// The address, in CIDR form.
    pub address: String,
}

impl AddressStatus {
    /// The address without its prefix length.
    pub fn ip(&self) -> &str {
        self.address.split_once('/').map_or(&self.address, |(ip, _)| ip)
    }

    /// Whether it is a loopback address.
    pub fn is_loopback(&self) -> bool {
        self.ip().parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}
