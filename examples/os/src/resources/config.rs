//! The `config` namespace.

use cosi::prelude::*;

use crate::machine_config::Config;

/// The machine configuration: `machine.yaml` as last accepted, raw and
/// parsed. One resource, `active`. Sensitive, as configuration holds secrets
/// on a real machine: read-only clients do not see it.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "MachineConfigs.config.exampleos.dev",
    namespace = "config",
    aliases = ["mc"],
    sensitive,
    print_columns(name = "Hostname", json_path = "{.config.hostname}"),
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfig {
    /// The file's text.
    pub raw: String,
    /// What it says.
    pub config: Config,
}

impl MachineConfig {
    /// The ID of the one machine configuration.
    pub const ID: &'static str = "active";
}
