//! The OS's controllers: 19 registrations of 16 implementations, since the
//! three merge controllers are instances of `cosi::controller::Merge`, and
//! `network.HostnameSpecController` one of `cosi::controller::Transform`.
//!
//! | module | controllers |
//! |---|---|
//! | `config` | `config.MachineConfigController` |
//! | `network` | `network.NetworkConfigController`, `network.PlatformConfigController`, `network.OperatorSpecController`, the `network.{Hostname,Resolver,Address}MergeController`s, `network.HostnameSpecController`, `network.AddressSpecController`, `network.LinkStatusController`, `network.EtcFileController` |
//! | `files` | `files.EtcFileConfigController`, `files.EtcFileController` |
//! | `runtime` | `runtime.KernelParamConfigController`, `runtime.KernelParamSpecController`, `runtime.ServiceConfigController`, `runtime.ServiceController`, `runtime.MachineStatusController` |
//! | `time` | `time.SyncController` |
//!
//! A file the user edits never makes a controller fail: a `machine.yaml`,
//! `platform.json` or `net.json` that does not parse is reported and changes
//! nothing (the last good state stays); `network.AddressSpecController`,
//! which must edit `net.json`, waits for the file's next change, which its
//! file watch reports. A controller fails only for the world's reasons: a
//! sysctl the kernel lacks, a path a link diverts.

pub mod config;
pub mod files;
pub mod network;
pub mod runtime;
pub mod time;

use cosi::controller::{Merge, Register as _, Transform};
use cosi::runtime::Graph;
use cosi::{Runtime, RuntimeError};

use crate::env::Env;
use crate::resources::{AddressSpec, HostnameSpec, HostnameStatus, ResolverSpec};

cosi::system!(
    /// The OS's 19 controllers, in the order they are registered:
    /// `cosi::system!` checks their graph when the crate builds (two
    /// exclusive writers of one type, or one name twice, would not compile).
    /// The three merges and the hostname transform are instances of generic
    /// controllers, listed under the names they are registered with. [`register`] registers
    /// them all, each built for the sandbox.
    pub ExampleOs = [
        config::MachineConfigController,
        network::NetworkConfigController,
        network::PlatformConfigController,
        network::OperatorSpecController,
        Merge<HostnameSpec> as MERGES[0],
        Merge<ResolverSpec> as MERGES[1],
        Merge<AddressSpec> as MERGES[2],
        Transform<HostnameSpec, HostnameStatus> as network::HOSTNAME_SPEC,
        network::AddressSpecController,
        network::LinkStatusController,
        network::EtcFileController,
        files::EtcFileConfigController,
        files::EtcFileController,
        runtime::kernel_param_config,
        runtime::KernelParamSpecController,
        runtime::service_config,
        runtime::ServiceController,
        time::SyncController,
        runtime::MachineStatusController,
    ]
);

/// The names of the three merge controllers, as registered.
pub const MERGES: [&str; 3] =
    ["network.HostnameMergeController", "network.ResolverMergeController", "network.AddressMergeController"];

/// Registers the 19 controllers of the OS on `runtime`, each built for `env`.
pub fn register(runtime: &Runtime, env: &Env) -> Result<(), RuntimeError> {
    runtime.register(config::MachineConfigController::new(env.clone()))?;
    runtime.register(network::NetworkConfigController::new(env.clone()))?;
    runtime.register(network::PlatformConfigController::new(env.clone()))?;
    runtime.register(network::OperatorSpecController::new(env.clone()))?;
    runtime.register(network::hostname_merge())?;
    runtime.register(network::resolver_merge())?;
    runtime.register(network::address_merge())?;
    runtime.register(network::hostname_spec(env.clone()))?;
    runtime.register(network::AddressSpecController::new(env.clone()))?;
    runtime.register(network::LinkStatusController::new(env.clone()))?;
    runtime.register(network::EtcFileController)?;
    runtime.register(files::EtcFileConfigController::default())?;
    runtime.register(files::EtcFileController::new(env.clone()))?;
    runtime.register(runtime::kernel_param_config {})?;
    runtime.register(runtime::KernelParamSpecController::new(env.clone()))?;
    runtime.register(runtime::service_config {})?;
    runtime.register(runtime::ServiceController::new(env.clone()))?;
    runtime.register(time::SyncController::new(env.clone()).with_inputs(time::SyncController::initial_inputs()))?;
    runtime.register(runtime::MachineStatusController::new(env.clone()))?;
    Ok(())
}

/// The OS's controller graph: what each of the 19 registrations reads and
/// writes when the OS boots. Nothing runs: registering only checks.
pub fn graph() -> Result<Graph, RuntimeError> {
    let runtime = Runtime::new(cosi::state::memory());
    register(&runtime, &Env::default())?;
    Ok(runtime.graph())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_registers_what_the_system_lists_in_its_order() {
        let runtime = Runtime::new(cosi::state::memory());
        register(&runtime, &Env::default()).expect("the OS's controllers register");
        let listed: Vec<&str> = ExampleOs::DECLARATIONS.iter().map(|declaration| declaration.name).collect();
        assert_eq!(runtime.controllers(), listed);
    }
}
