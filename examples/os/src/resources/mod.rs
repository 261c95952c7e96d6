//! The OS's resource types (17) and namespaces (5 besides `meta`).
//!
//! Specs (`*Spec`) say what should be, statuses (`*Status`) what is; the
//! controllers reconcile so that statuses match specs. Every type name
//! follows COSI's rules (`HostnameStatuses.net.exampleos.dev`), so
//! `cosictl get` resolves the automatic aliases as well as the explicit
//! short ones given here (`mc`, `hostname`, `links`, `addresses`,
//! `resolvers`, `sysctl`, `svc`, `time`, `ms`).

mod config;
mod files;
mod network;
mod runtime;

use serde::{Deserialize, Serialize};

pub use config::MachineConfig;
pub use files::{EtcFileSpec, EtcFileStatus};
pub use network::{AddressSpec, AddressStatus, HostnameSpec, HostnameStatus, LinkStatus, OperatorSpec, ResolverSpec};
pub use runtime::{
    KernelParamSpec, KernelParamStatus, MachineStage, MachineStatus, PlatformMetadata, ServiceSpec, ServiceState,
    ServiceStatus, TimeStatus, UnmetCondition,
};

/// Where the user's configuration lives: kept in a redb file in the sandbox.
pub const CONFIG: &str = "config";
/// The layered network specs, one per source, before they are merged.
pub const NETWORK_CONFIG: &str = "network-config";
/// The merged network specs, and what the network looks like.
pub const NETWORK: &str = "network";
/// Files under `etc/`.
pub const FILES: &str = "files";
/// Kernel parameters, services, time and the machine's status (and the
/// runtime's controller statuses).
pub const RUNTIME: &str = "runtime";

/// The namespaces with their descriptions, as published in `meta`.
pub const NAMESPACES: &[(&str, &str)] = &[
    (CONFIG, "The machine configuration, read from machine.yaml; kept across boots."),
    (NETWORK_CONFIG, "Network specs per source (default, cmdline, platform, operator, configuration), not yet merged."),
    (NETWORK, "Merged network specs, and the links, addresses and hostname the kernel has."),
    (FILES, "Files under etc/: what should be written, and what was."),
    (RUNTIME, "Kernel parameters, services, time, the machine's status and the controllers' statuses."),
];

/// Where a network spec comes from, lowest to highest: a higher layer wins
/// when the layers are merged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigLayer {
    /// Built in (an automatic hostname, fallback DNS).
    #[default]
    Default,
    /// The kernel command line (`sandbox/cmdline`).
    Cmdline,
    /// The platform's metadata (`sandbox/platform.json`).
    Platform,
    /// A network operator (the fake DHCP client).
    Operator,
    /// The machine configuration (`sandbox/machine.yaml`).
    Configuration,
}

impl ConfigLayer {
    /// The name used in IDs: `configuration/hostname`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConfigLayer::Default => "default",
            ConfigLayer::Cmdline => "cmdline",
            ConfigLayer::Platform => "platform",
            ConfigLayer::Operator => "operator",
            ConfigLayer::Configuration => "configuration",
        }
    }

    /// The layer's rank for merging.
    pub const fn rank(self) -> i64 {
        self as i64
    }

    /// `<layer>/<id>`, the ID of a layered spec.
    pub fn id(self, id: &str) -> String {
        format!("{}/{id}", self.as_str())
    }
}

/// Publishes the OS's namespaces in `meta`.
pub async fn register_namespaces(state: &dyn cosi::State) -> cosi::Result<()> {
    let registry = cosi::state::Registry::new(state);
    registry.register_defaults().await?;
    for (name, description) in NAMESPACES {
        registry.register_namespace(name, description).await?;
    }
    Ok(())
}

/// The definitions of the OS's 17 types. The runtime publishes them in
/// `meta` (every one is an input or output of a controller), so clients list
/// them (`cosictl get rd`) and resolve their aliases.
pub fn definitions() -> Vec<cosi::ResourceDefinition> {
    use cosi::Resource as _;
    vec![
        MachineConfig::definition(),
        HostnameSpec::definition(),
        ResolverSpec::definition(),
        AddressSpec::definition(),
        OperatorSpec::definition(),
        HostnameStatus::definition(),
        LinkStatus::definition(),
        AddressStatus::definition(),
        EtcFileSpec::definition(),
        EtcFileStatus::definition(),
        PlatformMetadata::definition(),
        KernelParamSpec::definition(),
        KernelParamStatus::definition(),
        ServiceSpec::definition(),
        ServiceStatus::definition(),
        TimeStatus::definition(),
        MachineStatus::definition(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_aliases_are_the_contract_and_unique() {
        let definitions = definitions();
        assert_eq!(definitions.len(), 17);
        let explicit = |display: &str| -> Vec<String> {
            let definition = definitions.iter().find(|d| d.display_type == display).expect(display);
            definition.aliases.iter().take_while(|alias| **alias != display.to_lowercase()).cloned().collect()
        };
        assert_eq!(explicit("MachineConfig"), ["mc"]);
        assert_eq!(explicit("HostnameStatus"), ["hostname"]);
        assert_eq!(explicit("LinkStatus"), ["link", "links"]);
        assert_eq!(explicit("AddressStatus"), ["address", "addresses"]);
        assert_eq!(explicit("ResolverSpec"), ["resolvers"]);
        assert_eq!(explicit("KernelParamSpec"), ["sysctl"]);
        assert_eq!(explicit("ServiceStatus"), ["svc"]);
        assert_eq!(explicit("TimeStatus"), ["time"]);
        assert_eq!(explicit("MachineStatus"), ["ms"]);
        // Each explicit alias resolves to exactly one type, so `cosictl get ALIAS` is never ambiguous.
        for alias in
            ["mc", "hostname", "link", "links", "address", "addresses", "resolvers", "sysctl", "svc", "time", "ms"]
        {
            let owners: Vec<&str> = definitions
                .iter()
                .filter(|d| d.all_aliases.iter().any(|a| a == alias))
                .map(|d| d.r#type.as_str())
                .collect();
            assert_eq!(owners.len(), 1, "alias {alias} resolves to {owners:?}");
        }
    }

    #[test]
    fn sensitive_types_are_those_holding_secrets() {
        let sensitive: Vec<String> = definitions()
            .into_iter()
            .filter(|d| d.sensitivity == cosi::resource::Sensitivity::Sensitive)
            .map(|d| d.display_type)
            .collect();
        assert_eq!(sensitive, ["MachineConfig", "OperatorSpec", "EtcFileSpec"]);
    }

    #[test]
    fn file_modes_show_in_octal() {
        // What `cosictl get etcfilespecs` prints in its Mode column, and reads back.
        let spec = EtcFileSpec { contents: "x".into(), mode: crate::machine_config::FileMode(0o640) };
        let json = serde_json::to_value(&spec).expect("serializes");
        assert_eq!(json["mode"], "0640");
        assert_eq!(serde_json::from_value::<EtcFileSpec>(json).expect("deserializes"), spec);
    }

    #[test]
    fn layers_order_as_talos_does() {
        let layers = [
            ConfigLayer::Default,
            ConfigLayer::Cmdline,
            ConfigLayer::Platform,
            ConfigLayer::Operator,
            ConfigLayer::Configuration,
        ];
        assert!(layers.windows(2).all(|pair| pair[0].rank() < pair[1].rank()));
        assert_eq!(ConfigLayer::Configuration.id("hostname"), "configuration/hostname");
    }
}
