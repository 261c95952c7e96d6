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
