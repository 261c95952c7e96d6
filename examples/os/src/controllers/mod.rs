//! The OS's controllers: 19 registrations of 17 implementations, since the
//! three merge controllers are instances of `cosi::controller::Merge`.
//!
//! | module | controllers |
//! |---|---|
//! | `config` | `config.MachineConfigController` |
//! | `network` | `network.NetworkConfigController`, `network.PlatformConfigController`, `network.OperatorSpecController`, the `network.{Hostname,Resolver,Address}MergeController`s, `network.HostnameSpecController`, `network.AddressSpecController`, `network.LinkStatusController`, `network.EtcFileController` |
//! | `files` | `files.EtcFileConfigController`, `files.EtcFileController` |
//! | `runtime` | `runtime.KernelParamConfigController`, `runtime.KernelParamSpecController`, `runtime.ServiceConfigController`, `runtime.ServiceController`, `runtime.MachineStatusController` |
//! | `time` | `time.SyncController` |

pub mod config;
pub mod files;
pub mod network;
pub mod runtime;
pub mod time;

use cosi::controller::{Declared, Entry, Merge, Register as _, check_graph};
use cosi::runtime::Graph;
use cosi::{Runtime, RuntimeError};

use crate::env::Env;
use crate::resources::{AddressSpec, HostnameSpec, ResolverSpec};

cosi::system!(
    /// The controllers of the OS declared with `#[controller]`, in the order
    /// they are registered: `cosi::system!` checks their graph when the crate
    /// builds (two exclusive writers of one type, or one name twice, would
    /// not compile). [`register`] registers them, each built for the sandbox,
    /// and the three merge controllers.
    pub ExampleOs = [
        config::MachineConfigController,
        network::NetworkConfigController,
        network::PlatformConfigController,
        network::OperatorSpecController,
        network::HostnameSpecController,
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

/// Every registration of the OS, merges included, checked as one graph when
/// the crate builds. `system!` lists types, and the merges are three
/// instances of one generic type (one declared name), so they are added here
/// under the names they are registered with.
const ALL: [Entry<'static>; 19] = {
    let mut all = [Entry { name: "", outputs: &[] }; 19];
    let mut i = 0;
    while i < ExampleOs::DECLARATIONS.len() {
        all[i] = Entry { name: ExampleOs::DECLARATIONS[i].name, outputs: ExampleOs::DECLARATIONS[i].outputs };
        i += 1;
    }
    all[16] = Entry { name: MERGES[0], outputs: <Merge<HostnameSpec> as Declared>::DECLARATION.outputs };
    all[17] = Entry { name: MERGES[1], outputs: <Merge<ResolverSpec> as Declared>::DECLARATION.outputs };
    all[18] = Entry { name: MERGES[2], outputs: <Merge<AddressSpec> as Declared>::DECLARATION.outputs };
    all
};
const _: () = assert!(
    ExampleOs::DECLARATIONS.len() == 16 && check_graph(&ALL).is_ok(),
    "the OS's controllers conflict: two exclusive writers of one type, or one name twice"
);

/// Registers the 19 controllers of the OS on `runtime`, each built for `env`.
pub fn register(runtime: &Runtime, env: &Env) -> Result<(), RuntimeError> {
    runtime.register(config::MachineConfigController::new(env.clone()))?;
    runtime.register(network::NetworkConfigController::new(env.clone()))?;
    runtime.register(network::PlatformConfigController::new(env.clone()))?;
    runtime.register(network::OperatorSpecController::new(env.clone()))?;
    runtime.register(network::hostname_merge())?;
    runtime.register(network::resolver_merge())?;
    runtime.register(network::address_merge())?;
    runtime.register(network::HostnameSpecController::new(env.clone()))?;
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

/// `Ok(None)` for a resource that does not exist.
pub(crate) fn optional<T>(result: cosi::Result<T>) -> cosi::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}
