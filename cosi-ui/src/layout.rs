//! The graph's layout, as `talosctl inspect dependencies` draws it through
//! Graphviz, computed here so that the page needs nothing else: a layered
//! drawing, left to right, of controllers (boxes) and resource types
//! (rounded), each in the horizontal band of its namespace.
//!
//! - **Layers:** the graph's cycles are broken by leaving out the edges a
//!   depth-first search finds going back; each node then goes one column
//!   right of the furthest node with an edge into it.
//! - **Bands:** a type belongs to its definition's default namespace (or the
//!   namespace it is first read from); a controller to the band of the
//!   first type it writes (or, writing none, the first it reads).
//! - **Order:** within a band and column, nodes are sorted by the mean
//!   height of their neighbours on the left, a few sweeps over (the
//!   barycentre heuristic), which keeps most edges short and uncrossed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cosi::controller::InputKind;
use cosi::resource::ResourceDefinition;
use cosi::runtime::GraphController;
use serde::Serialize;

/// A laid out graph, in pixels.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Layout {
    /// The drawing's width.
    pub width: f64,
    /// The drawing's height.
    pub height: f64,
    /// The namespaces' bands, top to bottom.
    pub bands: Vec<Band>,
    /// Controllers and types.
    pub nodes: Vec<Node>,
    /// Inputs (type → controller) and outputs (controller → type).
    pub edges: Vec<Edge>,
}

/// The band of one namespace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Band {
    /// The namespace.
    pub namespace: String,
    /// Its top.
    pub y: f64,
    /// Its height.
    pub height: f64,
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeKind {
    /// A controller.
    Controller,
    /// A resource type.
    Type,
}

/// A controller or a resource type, with its box.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Node {
    /// `c:NAME` for a controller, `t:TYPE` for a type.
    pub id: String,
    /// What it is.
    pub kind: NodeKind,
    /// The controller's name, or the type.
    pub name: String,
    /// What to write in the box: the controller's name without its first
    /// dotted part (`network.AddressSpecController`: `AddressSpecController`),
    /// the type's display name.
    pub label: String,
    /// The band it is drawn in.
    pub namespace: String,
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
}

/// An edge, with the dependency kind it carries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Edge {
    /// The node it leaves.
    pub from: String,
    /// The node it enters.
    pub to: String,
    /// `input` or `output`.
    pub direction: &'static str,
    /// The input kind (`strong`, `weak`, ...) or output kind (`exclusive`, `shared`).
    pub kind: String,
    /// How to draw it: `bold` (strong and primary inputs), `dashed`
    /// (destroy-ready inputs), `plain` (other inputs) or `output`.
    pub style: &'static str,
    /// For inputs: the namespace read, and the ID when narrowed to one.
    pub label: String,
}

const TYPE_HEIGHT: f64 = 40.0;
const CONTROLLER_HEIGHT: f64 = 58.0;
const ROW_GAP: f64 = 14.0;
const COLUMN_GAP: f64 = 64.0;
const BAND_PADDING: f64 = 22.0;
const MARGIN: f64 = 140.0;
const CHAR_WIDTH: f64 = 7.3;

/// Lays out the graph of `controllers`; `definitions` name the types and place them in their namespaces.
pub fn layout(controllers: &[GraphController], definitions: &BTreeMap<String, ResourceDefinition>) -> Layout {
    let mut graph = Graph::default();
    for controller in controllers {
        let id = format!("c:{}", controller.name);
        for input in &controller.inputs {
            let from = graph.type_node(&input.r#type, definitions, Some(&input.namespace));
            let style = match input.kind {
                InputKind::Strong | InputKind::Primary => "bold",
                InputKind::DestroyReady | InputKind::MappedDestroyReady => "dashed",
                InputKind::Weak | InputKind::Mapped => "plain",
            };
            let label = match &input.id {
                Some(one) => format!("{}/{one}", input.namespace),
                None => input.namespace.clone(),
            };
            graph.edges.push(Edge {
                from,
                to: id.clone(),
                direction: "input",
                kind: input.kind.to_string(),
                style,
                label,
            });
        }
        for output in &controller.outputs {
            let to = graph.type_node(&output.r#type, definitions, None);
            graph.edges.push(Edge {
                from: id.clone(),
                to,
                direction: "output",
                kind: output.kind.to_string(),
                style: "output",
                label: String::new(),
            });
        }
        let band = controller
            .outputs
            .first()
            .map(|output| graph.namespace(&format!("t:{}", output.r#type)))
            .or_else(|| controller.inputs.first().map(|input| graph.namespace(&format!("t:{}", input.r#type))))
            .unwrap_or_default();
        // The name's first dotted part is drawn small, above the rest.
        let label = controller.name.split_once('.').map_or(controller.name.as_str(), |(_, rest)| rest);
        graph.add(id, NodeKind::Controller, &controller.name, label, band);
    }
    graph.place()
}

#[derive(Default)]
struct Graph {
    nodes: Vec<Node>,
    index: HashMap<String, usize>,
    edges: Vec<Edge>,
}

impl Graph {
    fn type_node(
        &mut self,
        r#type: &str,
        definitions: &BTreeMap<String, ResourceDefinition>,
        read_from: Option<&str>,
    ) -> String {
        let id = format!("t:{type}");
        if !self.index.contains_key(&id) {
            let definition = definitions.get(r#type);
            let label = definition.map_or(r#type, |definition| definition.display_type.as_str());
            let namespace = definition
                .map(|definition| definition.default_namespace.clone())
                .or_else(|| read_from.map(str::to_owned))
                .unwrap_or_default();
            self.add(id.clone(), NodeKind::Type, r#type, label, namespace);
        }
        id
    }

    fn namespace(&self, id: &str) -> String {
        self.index.get(id).map(|&i| self.nodes[i].namespace.clone()).unwrap_or_default()
    }

    fn add(&mut self, id: String, kind: NodeKind, name: &str, label: &str, namespace: String) {
        let (height, chars) = match kind {
            NodeKind::Type => (TYPE_HEIGHT, label.len() + 6),
            NodeKind::Controller => (CONTROLLER_HEIGHT, label.len().max(20)),
        };
        #[allow(clippy::cast_precision_loss, reason = "labels are short")]
        let width = (chars as f64).mul_add(CHAR_WIDTH, 28.0);
        self.index.insert(id.clone(), self.nodes.len());
        self.nodes.push(Node {
            id,
            kind,
            name: name.to_owned(),
            label: label.to_owned(),
            namespace,
            x: 0.0,
            y: 0.0,
            width,
            height,
        });
    }

    fn place(mut self) -> Layout {
        let count = self.nodes.len();
        let writes: BTreeSet<(&str, &str)> = self
            .edges
            .iter()
            .filter(|edge| edge.direction == "output")
            .map(|edge| (edge.from.as_str(), edge.to.as_str()))
            .collect();
        let mut successors: Vec<Vec<usize>> = vec![Vec::new(); count];
        for edge in &self.edges {
            // A controller reading what it writes (to tear it down, say) is
            // feedback: it does not decide where the controller goes.
            if edge.direction == "input" && writes.contains(&(edge.to.as_str(), edge.from.as_str())) {
                continue;
            }
            let (from, to) = (self.index[&edge.from], self.index[&edge.to]);
            if !successors[from].contains(&to) {
                successors[from].push(to);
            }
        }
        let forward = acyclic(&successors);
        let layers = longest_path(&forward);
        let mut predecessors: Vec<Vec<usize>> = vec![Vec::new(); count];
        for (from, targets) in forward.iter().enumerate() {
            for &to in targets {
                predecessors[to].push(from);
            }
        }

        // Bands in name order, columns by layer; cells hold node indexes.
        let namespaces: BTreeSet<String> = self.nodes.iter().map(|node| node.namespace.clone()).collect();
        let band_of: HashMap<&str, usize> =
            namespaces.iter().enumerate().map(|(band, namespace)| (namespace.as_str(), band)).collect();
        let columns = layers.iter().copied().max().map_or(0, |max| max + 1);
        let mut cells: Vec<Vec<Vec<usize>>> = vec![vec![Vec::new(); columns]; namespaces.len()];
        let mut by_name: Vec<usize> = (0..count).collect();
        by_name.sort_by(|&a, &b| self.nodes[a].label.cmp(&self.nodes[b].label));
        for node in by_name {
            cells[band_of[self.nodes[node].namespace.as_str()]][layers[node]].push(node);
        }

        let mut column_width = vec![0.0_f64; columns];
        for (node, &layer) in self.nodes.iter().zip(&layers) {
            column_width[layer] = column_width[layer].max(node.width);
        }
        let mut column_x = Vec::with_capacity(columns);
        let mut x = MARGIN;
        for width in &column_width {
            column_x.push(x);
            x += width + COLUMN_GAP;
        }
        let width = x - COLUMN_GAP + 40.0;

        let mut bands = Vec::new();
        for sweep in 0..4 {
            bands.clear();
            let mut y = 20.0;
            for (band, namespace) in namespaces.iter().enumerate() {
                let top = y;
                let mut tallest = 0.0_f64;
                for column in 0..columns {
                    if sweep > 0 {
                        let nodes = &self.nodes;
                        let centre = |node: usize| {
                            let from = &predecessors[node];
                            if from.is_empty() {
                                return nodes[node].y;
                            }
                            #[allow(clippy::cast_precision_loss, reason = "few edges")]
                            let mean = from.iter().map(|&p| nodes[p].y + nodes[p].height / 2.0).sum::<f64>()
                                / from.len() as f64;
                            mean
                        };
                        let mut keyed: Vec<(f64, usize)> =
                            cells[band][column].iter().map(|&node| (centre(node), node)).collect();
                        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
                        cells[band][column] = keyed.into_iter().map(|(_, node)| node).collect();
                    }
                    let mut cell_y = top + BAND_PADDING;
                    for &node in &cells[band][column] {
                        let node = &mut self.nodes[node];
                        node.x = column_x[column] + (column_width[column] - node.width) / 2.0;
                        node.y = cell_y;
                        cell_y += node.height + ROW_GAP;
                    }
                    tallest = tallest.max(cell_y - top);
                }
                let height = tallest + BAND_PADDING - ROW_GAP;
                bands.push(Band { namespace: namespace.clone(), y: top, height });
                y = top + height + 14.0;
            }
        }
        let height = bands.last().map_or(40.0, |band| band.y + band.height + 20.0);
        Layout { width, height, bands, nodes: self.nodes, edges: self.edges }
    }
}

/// The edges of `successors` without those a depth-first search finds
/// going back to a node on its path: a graph without cycles.
fn acyclic(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut marks = vec![Mark::New; successors.len()];
    let mut forward = vec![Vec::new(); successors.len()];
    // Sources first: a search that starts inside a cycle would cut it at the wrong edge.
    let mut entered = vec![false; successors.len()];
    for targets in successors {
        for &to in targets {
            entered[to] = true;
        }
    }
    let roots = (0..successors.len()).filter(|&node| !entered[node]).chain(0..successors.len());
    for root in roots {
        if marks[root] != Mark::New {
            continue;
        }
        // An explicit stack of (node, next successor to look at).
        let mut stack = vec![(root, 0)];
        marks[root] = Mark::OnPath;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            match successors[node].get(*next) {
                Some(&to) => {
                    *next += 1;
                    match marks[to] {
                        Mark::OnPath => (),
                        Mark::Done => forward[node].push(to),
                        Mark::New => {
                            forward[node].push(to);
                            marks[to] = Mark::OnPath;
                            stack.push((to, 0));
                        }
                    }
                }
                None => {
                    marks[node] = Mark::Done;
                    stack.pop();
                }
            }
        }
    }
    forward
}

/// Each node's layer in a graph without cycles: one more than the largest of its predecessors'.
fn longest_path(forward: &[Vec<usize>]) -> Vec<usize> {
    let mut indegree = vec![0_usize; forward.len()];
    for targets in forward {
        for &to in targets {
            indegree[to] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..forward.len()).filter(|&node| indegree[node] == 0).collect();
    let mut layers = vec![0; forward.len()];
    while let Some(node) = ready.pop() {
        for &to in &forward[node] {
            layers[to] = layers[to].max(layers[node] + 1);
            indegree[to] -= 1;
            if indegree[to] == 0 {
                ready.push(to);
            }
        }
    }
    layers
}

#[cfg(test)]
mod tests {
    use cosi::controller::OutputKind;
    use cosi::runtime::{GraphInput, GraphOutput};

    use super::*;

    fn controller(name: &str, inputs: &[(&str, &str)], outputs: &[&str]) -> GraphController {
        GraphController {
            name: name.into(),
            inputs: inputs
                .iter()
                .map(|(namespace, r#type)| GraphInput {
                    namespace: (*namespace).into(),
                    r#type: (*r#type).into(),
                    id: None,
                    kind: InputKind::Weak,
                })
                .collect(),
            outputs: outputs
                .iter()
                .map(|r#type| GraphOutput { r#type: (*r#type).into(), kind: OutputKind::Exclusive })
                .collect(),
        }
    }

    #[test]
    fn a_chain_goes_left_to_right_and_a_cycle_is_still_drawn() {
        let controllers = [
            controller("b", &[("ns1", "T1")], &["T2"]),
            controller("a", &[], &["T1"]),
            // A cycle: c reads T2 and writes it.
            controller("c", &[("ns2", "T2")], &["T2"]),
        ];
        let layout = layout(&controllers, &BTreeMap::new());
        let node = |id: &str| layout.nodes.iter().find(|node| node.id == id).expect(id);
        assert!(node("c:a").x < node("t:T1").x);
        assert!(node("t:T1").x < node("c:b").x);
        assert!(node("c:b").x < node("t:T2").x);
        assert_eq!(layout.nodes.len(), 5);
        assert_eq!(layout.edges.len(), 5);
        for node in &layout.nodes {
            assert!(node.x + node.width <= layout.width && node.y + node.height <= layout.height, "{node:?}");
        }
    }

    #[test]
    fn nodes_are_drawn_in_their_namespace_band_without_overlapping() {
        let controllers = [
            controller("x", &[("one", "A"), ("two", "B")], &["C"]),
            controller("y", &[("one", "A")], &["D"]),
            controller("z", &[("two", "B")], &["E"]),
        ];
        let layout = layout(&controllers, &BTreeMap::new());
        let bands: Vec<&str> = layout.bands.iter().map(|band| band.namespace.as_str()).collect();
        // The written types are neither defined nor read: no namespace, and their writers go with them.
        assert_eq!(bands, ["", "one", "two"]);
        assert!(layout.bands.windows(2).all(|pair| pair[0].y + pair[0].height <= pair[1].y));
        for node in &layout.nodes {
            let band = layout.bands.iter().find(|band| band.namespace == node.namespace).expect("band");
            assert!(node.y >= band.y && node.y + node.height <= band.y + band.height, "{node:?} outside {band:?}");
            for other in &layout.nodes {
                let apart = node.id == other.id
                    || node.x + node.width <= other.x
                    || other.x + other.width <= node.x
                    || node.y + node.height <= other.y
                    || other.y + other.height <= node.y;
                assert!(apart, "{node:?} overlaps {other:?}");
            }
        }
    }
}
