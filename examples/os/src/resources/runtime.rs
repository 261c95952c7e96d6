//! The `runtime` namespace.

use cosi::prelude::*;

/// What the platform says about the machine: `platform`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "PlatformMetadatas.runtime.exampleos.dev",
    namespace = "runtime",
    print_columns(name = "Platform", json_path = "{.platform}"),
    print_columns(name = "InstanceId", json_path = "{.instanceId}")
)]
#[serde(rename_all = "camelCase")]
pub struct PlatformMetadata {
    /// The platform's name.
    pub platform: String,
    /// The instance's ID.
    pub instance_id: String,
}

/// A kernel parameter to set; its ID is the sysctl key (`net.ipv4.ip_forward`).
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "KernelParamSpecs.runtime.exampleos.dev",
    namespace = "runtime",
    aliases = ["sysctl"],
    print_columns(name = "Value", json_path = "{.value}"),
)]
#[serde(rename_all = "camelCase")]
pub struct KernelParamSpec {
    /// The value.
    pub value: String,
    /// Whether a key the kernel does not have is only reported, not an error.
    pub ignore_errors: bool,
}

/// A kernel parameter as the kernel has it.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "KernelParamStatuses.runtime.exampleos.dev",
    namespace = "runtime",
    print_columns(name = "Current", json_path = "{.current}"),
    print_columns(name = "Default", json_path = "{.default}"),
    print_columns(name = "Unsupported", json_path = "{.unsupported}")
)]
#[serde(rename_all = "camelCase")]
pub struct KernelParamStatus {
    /// The value now.
    pub current: String,
    /// The value before the OS first set it, restored when the key is removed.
    pub default: String,
    /// Whether the kernel has no such key.
    pub unsupported: bool,
}

/// A service to run; its ID is the service's name.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "ServiceSpecs.runtime.exampleos.dev",
    namespace = "runtime",
    print_columns(name = "After", json_path = "{.after[*]}"),
    print_columns(name = "RequiresTime", json_path = "{.requiresTime}")
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// Files under `etc/` that must be written before it starts.
    pub after: Vec<String>,
    /// Whether it waits for the time to be synchronized.
    pub requires_time: bool,
    /// Makes the simulated process crash this long after each start, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_after_ms: Option<u64>,
    /// How often the simulated process writes a heartbeat, in milliseconds.
    pub heartbeat_ms: u64,
}

/// Where a service is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServiceState {
    /// Its dependencies are not met yet.
    #[default]
    Waiting,
    /// Its process runs.
    Running,
    /// Its process died; it is restarted with backoff.
    Crashed,
}

/// A service as it runs.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "ServiceStatuses.runtime.exampleos.dev",
    namespace = "runtime",
    aliases = ["svc"],
    print_columns(name = "State", json_path = "{.state}"),
    print_columns(name = "Pid", json_path = "{.pid}"),
    print_columns(name = "Restarts", json_path = "{.restarts}"),
    print_columns(name = "Healthy", json_path = "{.healthy}"),
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// Waiting, Running or Crashed.
    pub state: ServiceState,
    /// The simulated process's ID while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// How many times it was restarted after a crash.
    pub restarts: u64,
    /// Whether its last health check passed.
    pub healthy: bool,
    /// What it waits for, or why it crashed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The time: `node`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "TimeStatuses.time.exampleos.dev",
    namespace = "runtime",
    aliases = ["time"],
    print_columns(name = "Synced", json_path = "{.synced}"),
    print_columns(name = "Servers", json_path = "{.servers[*]}"),
)]
#[serde(rename_all = "camelCase")]
pub struct TimeStatus {
    /// Whether the clock is synchronized.
    pub synced: bool,
    /// How many times it was synchronized (after a change of servers).
    pub epoch: u64,
    /// The NTP servers in use.
    pub servers: Vec<String>,
}

/// How far the machine has come: `booting` until every condition held once,
/// then `running`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MachineStage {
    /// Starting up.
    #[default]
    Booting,
    /// Up: every condition held at least once.
    Running,
}

/// A condition the machine does not meet now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnmetCondition {
    /// What (`time`, `hostname`, `etcFiles`, `services`, `sysctls`).
    pub name: String,
    /// Why.
    pub reason: String,
}

/// The machine as a whole: `machine`.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "MachineStatuses.runtime.exampleos.dev",
    namespace = "runtime",
    aliases = ["ms"],
    print_columns(name = "Stage", json_path = "{.stage}"),
    print_columns(name = "Ready", json_path = "{.ready}"),
)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Booting or running.
    pub stage: MachineStage,
    /// Whether every condition holds now.
    pub ready: bool,
    /// The conditions that do not.
    pub unmet_conditions: Vec<UnmetCondition>,
}
