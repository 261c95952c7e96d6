//! A random system: the controller graph a seed describes, and the model
//! that says what its outputs must be once it has settled.
//!
//! The graph is acyclic by construction: each controller reads only kinds
//! that exist before it (the clients' kinds and earlier controllers'
//! outputs), so the model computes every output in one pass, in the order
//! the controllers were drawn.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cosi::prelude::*;

use crate::types::{STAGES, Sel, Sh, Src, stage_kind};

/// Running resources by kind, then ID: (value, layer).
pub type World = BTreeMap<Kind, BTreeMap<String, (u64, i64)>>;

/// The IDs clients write in their data kinds.
pub const IDS: [&str; 5] = ["a", "b", "c", "d", "e"];

#[derive(Clone, Debug)]
pub struct System {
    pub nodes: Vec<Node>,
    /// Kinds of `Src` the clients write.
    pub sources: Vec<Kind>,
    /// Kinds of `Sh` the clients write as merge layers (IDs `<id>@<n>`).
    pub layers: Vec<Kind>,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    /// The kind it writes, alone.
    pub output: Kind,
    /// Whether its output type is exclusive to it (a stage type).
    pub exclusive: bool,
    pub logic: Logic,
    pub salt: u64,
    /// How it reads a value from outside the state, which it adds to every
    /// output's (reconcile and queue controllers only).
    pub outside: Outside,
}

/// How a controller learns that its value from outside the state changed
/// (the clients change it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outside {
    /// It reads none.
    None,
    /// It hands out a `Waker` (`ctx.waker()`), which the clients call after
    /// they change the value.
    Woken,
    /// Nobody tells it: it looks again this long after each reconcile
    /// (`Requeue::After`).
    Polled(Duration),
}

#[derive(Clone, Debug)]
pub enum Logic {
    /// A reconcile controller (`Fold<Out>`): one output per ID found in its
    /// inputs, the value a mix of theirs. It holds a finalizer on its strong
    /// inputs while they run. With `alternative`, the selector `sel-<name>`
    /// picks its weak inputs: the alternative while the selector's value is
    /// odd (`update_inputs`).
    Fold { strong: Vec<Kind>, weak: Vec<Kind>, alternative: Option<Vec<Kind>> },
    /// A queue controller (`Queued<Out>`): one output per resource of its
    /// primary input, mixed with the same ID of its mapped inputs; it holds a
    /// finalizer on each primary resource until the output is gone.
    Queue { primary: Kind, mapped: Vec<Kind> },
    /// `cosi::controller::Transform` from `Src` (in `src`) or the stage
    /// before, to its stage.
    Transform { input: Kind, finalizers: bool },
    /// `cosi::controller::QueueTransform`, likewise.
    QueueTransform { input: Kind },
    /// `cosi::controller::Merge<Sh>` of the layers in `source`.
    Merge { source: Kind },
}

impl Logic {
    pub fn family(&self) -> &'static str {
        match self {
            Logic::Fold { .. } => "fold",
            Logic::Queue { .. } => "queue",
            Logic::Transform { .. } => "transform",
            Logic::QueueTransform { .. } => "queue-transform",
            Logic::Merge { .. } => "merge",
        }
    }
}

/// The kind of a client-written selector.
pub fn selector_kind() -> Kind {
    Sel::kind()
}

/// The value a controller writes for `sum`, its inputs' values mixed.
pub fn mix(salt: u64, sum: u64) -> (u64, i64) {
    let value = sum.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(salt) % 1000;
    (value, (value % 4) as i64)
}

/// The output ID of a merge layer: the part before `@`.
pub fn layer_base(id: &str) -> &str {
    id.split_once('@').map_or(id, |(base, _)| base)
}

impl System {
    pub fn generate(rng: &mut fastrand::Rng) -> Self {
        let sources: Vec<Kind> = (0..rng.usize(1..=3))
            .map(|i| if i == 0 { Src::kind() } else { Kind::new(format!("src-{i}"), Src::TYPE) })
            .collect();
        let mut readable = sources.clone();
        let mut system = System { nodes: Vec::new(), sources, layers: Vec::new() };
        let mut stage = 0;
        // Most graphs small, a quarter large (up to 32 controllers and about 40 kinds).
        let controllers = match rng.u8(0..4) {
            0 => rng.usize(17..=32),
            _ => rng.usize(5..=16),
        };
        for index in 0..controllers {
            let salt = rng.u64(..);
            let exclusive = stage < STAGES && rng.u8(0..3) > 0;
            let (output, logic) = match exclusive {
                true => {
                    let output = stage_kind(stage);
                    let logic = match rng.u8(0..4) {
                        0 => Logic::Transform { input: transform_input(rng, stage), finalizers: rng.bool() },
                        1 => Logic::QueueTransform { input: transform_input(rng, stage) },
                        2 => queue(rng, &readable),
                        _ => fold(rng, &readable),
                    };
                    stage += 1;
                    (output, logic)
                }
                false => {
                    let logic = match rng.u8(0..4) {
                        0 => {
                            // A merge of layers the clients write, or of an
                            // earlier shared fold's outputs.
                            let folds: Vec<&Node> = system
                                .nodes
                                .iter()
                                .filter(|node| !node.exclusive && matches!(node.logic, Logic::Fold { .. }))
                                .collect();
                            let source = match folds.is_empty() || rng.bool() {
                                true => {
                                    let layer = Kind::new(format!("l{index}"), Sh::TYPE);
                                    system.layers.push(layer.clone());
                                    layer
                                }
                                false => folds[rng.usize(..folds.len())].output.clone(),
                            };
                            Logic::Merge { source }
                        }
                        _ => fold(rng, &readable),
                    };
                    let prefix = if matches!(logic, Logic::Merge { .. }) { "m" } else { "n" };
                    (Kind::new(format!("{prefix}{index}"), Sh::TYPE), logic)
                }
            };
            let outside = match logic {
                Logic::Fold { .. } | Logic::Queue { .. } => outside(rng),
                _ => Outside::None,
            };
            let node = Node { name: format!("{}-{index}", logic.family()), output, exclusive, logic, salt, outside };
            readable.push(node.output.clone());
            system.nodes.push(node);
        }
        system
    }

    /// Every kind of the system, sorted: the clients' and the controllers'.
    pub fn kinds(&self) -> Vec<Kind> {
        let mut kinds: BTreeSet<Kind> = self.sources.iter().chain(&self.layers).cloned().collect();
        kinds.insert(selector_kind());
        kinds.extend(self.nodes.iter().map(|node| node.output.clone()));
        kinds.into_iter().collect()
    }

    /// The selectors the clients may flip: one per fold with alternative inputs.
    pub fn selectors(&self) -> Vec<String> {
        let switched = |node: &&Node| matches!(&node.logic, Logic::Fold { alternative: Some(_), .. });
        self.nodes.iter().filter(switched).map(|node| format!("sel-{}", node.name)).collect()
    }

    /// What every controller's output must hold, given what the clients'
    /// kinds hold (their running resources) and the controllers' values
    /// from outside the state (by controller; none is 0).
    pub fn expected(&self, clients: &World, outside: &BTreeMap<String, u64>) -> World {
        let mut world = clients.clone();
        let running = |world: &World, kind: &Kind| world.get(kind).cloned().unwrap_or_default();
        for node in &self.nodes {
            let mut out: BTreeMap<String, (u64, i64)> = BTreeMap::new();
            let outside = outside.get(&node.name).copied().unwrap_or_default();
            match &node.logic {
                Logic::Fold { strong, weak, alternative } => {
                    let selector = world.get(&selector_kind()).and_then(|kind| kind.get(&format!("sel-{}", node.name)));
                    let weak = match (alternative, selector) {
                        (Some(alternative), Some((value, _))) if value % 2 == 1 => alternative,
                        _ => weak,
                    };
                    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
                    for kind in strong.iter().chain(weak) {
                        for (id, (value, _)) in running(&world, kind) {
                            let sum = sums.entry(id).or_default();
                            *sum = sum.wrapping_add(value);
                        }
                    }
                    out = sums.into_iter().map(|(id, sum)| (id, mix(node.salt, sum.wrapping_add(outside)))).collect();
                }
                Logic::Queue { primary, mapped } => {
                    for (id, (value, _)) in running(&world, primary) {
                        let mut sum = value.wrapping_add(outside);
                        for kind in mapped {
                            if let Some((value, _)) = running(&world, kind).get(&id) {
                                sum = sum.wrapping_add(*value);
                            }
                        }
                        out.insert(id, mix(node.salt, sum));
                    }
                }
                Logic::Transform { input, .. } | Logic::QueueTransform { input } => {
                    for (id, (value, _)) in running(&world, input) {
                        out.insert(id, mix(node.salt, value));
                    }
                }
                Logic::Merge { source } => {
                    // Layers sorted by ID, stably by layer; the last one wins.
                    let mut layers: BTreeMap<String, Vec<(i64, u64)>> = BTreeMap::new();
                    for (id, (value, layer)) in running(&world, source) {
                        layers.entry(layer_base(&id).to_owned()).or_default().push((layer, value));
                    }
                    for (id, mut specs) in layers {
                        specs.sort_by_key(|(layer, _)| *layer);
                        if let Some((layer, value)) = specs.last() {
                            out.insert(id, (*value, *layer));
                        }
                    }
                }
            }
            world.insert(node.output.clone(), out);
        }
        world
    }
}

/// A quarter of reconcile and queue controllers are woken, one in eight polls.
fn outside(rng: &mut fastrand::Rng) -> Outside {
    match rng.u8(0..8) {
        0 | 1 => Outside::Woken,
        2 => Outside::Polled(Duration::from_millis(rng.u64(100..3_000))),
        _ => Outside::None,
    }
}

fn transform_input(rng: &mut fastrand::Rng, stage: usize) -> Kind {
    match stage > 0 && rng.bool() {
        true => stage_kind(stage - 1),
        false => Src::kind(),
    }
}

/// Up to `count` distinct kinds of `readable`.
fn pick(rng: &mut fastrand::Rng, readable: &[Kind], count: usize, except: &[Kind]) -> Vec<Kind> {
    let mut candidates: Vec<Kind> = readable.iter().filter(|kind| !except.contains(kind)).cloned().collect();
    rng.shuffle(&mut candidates);
    candidates.truncate(count);
    candidates.sort();
    candidates
}

fn fold(rng: &mut fastrand::Rng, readable: &[Kind]) -> Logic {
    let count = rng.usize(1..=3);
    let chosen = pick(rng, readable, count, &[]);
    let (strong, weak): (Vec<Kind>, Vec<Kind>) = chosen.into_iter().partition(|_| rng.u8(0..3) == 0);
    let alternative = match rng.u8(0..4) {
        0 => {
            let count = rng.usize(1..=2);
            Some(pick(rng, readable, count, &strong))
        }
        _ => None,
    };
    Logic::Fold { strong, weak, alternative }
}

fn queue(rng: &mut fastrand::Rng, readable: &[Kind]) -> Logic {
    let primary = readable[rng.usize(..readable.len())].clone();
    let count = rng.usize(0..=2);
    let mapped = pick(rng, readable, count, std::slice::from_ref(&primary));
    Logic::Queue { primary, mapped }
}
