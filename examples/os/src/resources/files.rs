//! The `files` namespace.

use cosi::prelude::*;

use crate::machine_config::FileMode;

/// A file to write under `etc/`; its ID is the path (`hosts`, `motd`).
/// Sensitive: files may hold secrets.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "EtcFileSpecs.files.exampleos.dev",
    namespace = "files",
    sensitive,
    print_columns(name = "Mode", json_path = "{.mode}")
)]
#[serde(rename_all = "camelCase")]
pub struct EtcFileSpec {
    /// The contents.
    pub contents: String,
    /// The permission bits, shown in octal (`0644`) as `ls` and
    /// `machine.yaml` write them.
    pub mode: FileMode,
}

/// A file written under `etc/`: which version of its spec is on disk.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "EtcFileStatuses.files.exampleos.dev",
    namespace = "files",
    print_columns(name = "SpecVersion", json_path = "{.specVersion}")
)]
#[serde(rename_all = "camelCase")]
pub struct EtcFileStatus {
    /// The version of the [`EtcFileSpec`] written.
    pub spec_version: u64,
}
