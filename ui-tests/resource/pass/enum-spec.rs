use cosi::Resource;
use serde::{Deserialize, Serialize};

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "MachineStages.runtime.example.org", namespace = "runtime", aliases = ["stage"])]
#[serde(rename_all = "lowercase")]
pub enum MachineStage {
    Booting,
    Running,
    Rebooting { reason: String },
}

fn main() {
    assert_eq!(MachineStage::TYPE, "MachineStages.runtime.example.org");

    let definition = MachineStage::definition();
    assert_eq!(definition.display_type, "MachineStage");
    assert_eq!(definition.aliases, ["stage", "machinestage", "ms"]);
    assert_eq!(
        definition.all_aliases,
        ["machinestages", "machinestages.runtime", "machinestages.runtime.example", "stage", "machinestage", "ms"]
    );
}
