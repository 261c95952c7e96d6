//! The resource types of a simulated system.
//!
//! Resource types are Rust types, and the runtime's exclusive-output rule is
//! per type, so a random graph needs a pool of them: `Stage0s` to `Stage7s`
//! are the types an exclusive writer may own (one writer per type and
//! graph), `Shares` the type every shared writer writes (each in its own
//! namespace, so each (namespace, type) is a kind of its own), `Sources` the
//! type the simulated clients write, in several namespaces, and `Selectors`
//! the switches that make controllers call `update_inputs`. All have the same
//! spec: a value and a layer (what `Merge` orders by).

use cosi::prelude::*;

/// What every simulated spec holds.
pub trait SimSpec: Resource + Default {
    fn value(&self) -> u64;
    fn set(&mut self, value: u64, layer: i64);
}

macro_rules! sim_types {
    ($($name:ident = $type:tt in $namespace:tt;)*) => {
        $(
            #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
            #[resource(type = $type, namespace = $namespace)]
            pub struct $name {
                pub value: u64,
                pub layer: i64,
            }

            impl SimSpec for $name {
                fn value(&self) -> u64 {
                    self.value
                }

                fn set(&mut self, value: u64, layer: i64) {
                    self.value = value;
                    self.layer = layer;
                }
            }
        )*

        /// The value and layer of a resource of any simulated type; `None`
        /// for another type or a spec that does not decode.
        pub fn value_of(resource: &DynamicResource) -> Option<(u64, i64)> {
            let r#type = resource.metadata().r#type();
            $(
                if r#type == <$name as Resource>::TYPE {
                    let typed = Typed::<$name>::try_from(resource).ok()?;
                    return Some((typed.value, typed.layer));
                }
            )*
            None
        }
    };
}

sim_types! {
    Src = "Sources.sim.cosi.dev" in "src";
    Sel = "Selectors.sim.cosi.dev" in "sel";
    Sh = "Shares.sim.cosi.dev" in "sh";
    Stage0 = "Stage0s.sim.cosi.dev" in "stage0";
    Stage1 = "Stage1s.sim.cosi.dev" in "stage1";
    Stage2 = "Stage2s.sim.cosi.dev" in "stage2";
    Stage3 = "Stage3s.sim.cosi.dev" in "stage3";
    Stage4 = "Stage4s.sim.cosi.dev" in "stage4";
    Stage5 = "Stage5s.sim.cosi.dev" in "stage5";
    Stage6 = "Stage6s.sim.cosi.dev" in "stage6";
    Stage7 = "Stage7s.sim.cosi.dev" in "stage7";
}

/// How many `Stage` types there are: at most this many exclusive writers per graph.
pub const STAGES: usize = 8;

/// The kind of stage `index` in its own namespace, where its one writer writes it.
pub fn stage_kind(index: usize) -> Kind {
    Kind::new(format!("stage{index}"), format!("Stage{index}s.sim.cosi.dev"))
}

/// Calls `$body` with `$T` bound to the type of stage `$index` (0 to 7).
macro_rules! with_stage {
    ($index:expr, $T:ident => $body:expr) => {
        match $index {
            0 => {
                type $T = $crate::types::Stage0;
                $body
            }
            1 => {
                type $T = $crate::types::Stage1;
                $body
            }
            2 => {
                type $T = $crate::types::Stage2;
                $body
            }
            3 => {
                type $T = $crate::types::Stage3;
                $body
            }
            4 => {
                type $T = $crate::types::Stage4;
                $body
            }
            5 => {
                type $T = $crate::types::Stage5;
                $body
            }
            6 => {
                type $T = $crate::types::Stage6;
                $body
            }
            _ => {
                type $T = $crate::types::Stage7;
                $body
            }
        }
    };
}
pub(crate) use with_stage;

/// Calls `$body` with `$In` and `$Out` bound to the types of stages
/// `$index - 1` and `$index` (1 to 7): a transform's pair of types.
macro_rules! with_stage_pair {
    ($index:expr, $In:ident, $Out:ident => $body:expr) => {
        match $index {
            1 => {
                type $In = $crate::types::Stage0;
                type $Out = $crate::types::Stage1;
                $body
            }
            2 => {
                type $In = $crate::types::Stage1;
                type $Out = $crate::types::Stage2;
                $body
            }
            3 => {
                type $In = $crate::types::Stage2;
                type $Out = $crate::types::Stage3;
                $body
            }
            4 => {
                type $In = $crate::types::Stage3;
                type $Out = $crate::types::Stage4;
                $body
            }
            5 => {
                type $In = $crate::types::Stage4;
                type $Out = $crate::types::Stage5;
                $body
            }
            6 => {
                type $In = $crate::types::Stage5;
                type $Out = $crate::types::Stage6;
                $body
            }
            _ => {
                type $In = $crate::types::Stage6;
                type $Out = $crate::types::Stage7;
                $body
            }
        }
    };
}
pub(crate) use with_stage_pair;
