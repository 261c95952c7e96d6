//! The dependency graph: controllers, resource types, and the edges between
//! them, labelled with the input or output kind. Rendered as Graphviz DOT,
//! Mermaid or JSON.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::controller::Collected;
use crate::controller::{Declaration, Input, InputKind, OutputKind};

/// Controllers and what they read and write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graph {
    /// The controllers, by name.
    pub controllers: Vec<GraphController>,
}

/// One controller of a [`Graph`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphController {
    /// Its name.
    pub name: String,
    /// What it reads.
    pub inputs: Vec<GraphInput>,
    /// What it writes.
    pub outputs: Vec<GraphOutput>,
}

/// An input edge: resource kind → controller.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GraphInput {
    /// The namespace.
    pub namespace: String,
    /// The resource type.
    #[serde(rename = "type")]
    pub r#type: String,
    /// The one ID read, if narrowed to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The dependency kind.
    pub kind: InputKind,
}

/// An output edge: controller → resource type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GraphOutput {
    /// The resource type.
    #[serde(rename = "type")]
    pub r#type: String,
    /// Exclusive or shared.
    pub kind: OutputKind,
}

impl GraphController {
    pub(crate) fn new(name: &str, declaration: &Declaration, inputs: &[Input]) -> Self {
        let mut inputs: Vec<GraphInput> = inputs
            .iter()
            .map(|input| GraphInput {
                namespace: input.kind.namespace().to_owned(),
                r#type: input.kind.r#type().to_owned(),
                id: input.id.as_deref().map(str::to_owned),
                kind: input.dependency,
            })
            .collect();
        inputs.sort();
        let mut outputs: Vec<GraphOutput> = declaration
            .outputs
            .iter()
            .map(|output| GraphOutput { r#type: output.r#type.to_owned(), kind: output.kind })
            .collect();
        outputs.sort();
        GraphController { name: name.to_owned(), inputs, outputs }
    }
}

impl Graph {
    /// The graph of every controller in the inventory, without running anything.
    pub fn from_inventory() -> Self {
        let mut graph = Graph::default();
        for collected in Collected::sorted() {
            let declaration = collected.declaration;
            graph.controllers.push(GraphController::new(declaration.name, declaration, &declaration.runtime_inputs()));
        }
        graph.controllers.sort_by(|a, b| a.name.cmp(&b.name));
        graph
    }

    /// The graph as JSON.
    pub fn to_json(&self) -> String {
        // Serializing these plain structs to a string cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The graph in Graphviz DOT: controllers are boxes, resource types
    /// ellipses; input edges are labelled with their kind (strong inputs
    /// bold, destroy-ready ones dashed), output edges with theirs.
    pub fn to_dot(&self) -> String {
        let types = self.types();
        let mut dot = String::from("digraph cosi {\n  rankdir=LR;\n");
        for (index, controller) in self.controllers.iter().enumerate() {
            let _ = writeln!(dot, "  c{index} [shape=box, style=rounded, label={}];", dot_string(&controller.name));
        }
        for (r#type, index) in &types {
            let _ = writeln!(dot, "  t{index} [shape=ellipse, label={}];", dot_string(r#type));
        }
        for (index, controller) in self.controllers.iter().enumerate() {
            for input in &controller.inputs {
                let style = match input.kind {
                    InputKind::Strong | InputKind::Primary => ", style=bold",
                    InputKind::DestroyReady | InputKind::MappedDestroyReady => ", style=dashed",
                    InputKind::Weak | InputKind::Mapped => "",
                };
                let _ = writeln!(
                    dot,
                    "  t{} -> c{index} [label={}{style}];",
                    types[input.r#type.as_str()],
                    dot_string(&input_label(input))
                );
            }
            for output in &controller.outputs {
                let _ = writeln!(
                    dot,
                    "  c{index} -> t{} [label={}];",
                    types[output.r#type.as_str()],
                    dot_string(output.kind.as_str())
                );
            }
        }
        dot.push_str("}\n");
        dot
    }

    /// The graph as a Mermaid flowchart.
    pub fn to_mermaid(&self) -> String {
        let types = self.types();
        let mut mermaid = String::from("flowchart LR\n");
        for (index, controller) in self.controllers.iter().enumerate() {
            let _ = writeln!(mermaid, "  c{index}[\"{}\"]", mermaid_text(&controller.name));
        }
        for (r#type, index) in &types {
            let _ = writeln!(mermaid, "  t{index}([\"{}\"])", mermaid_text(r#type));
        }
        for (index, controller) in self.controllers.iter().enumerate() {
            for input in &controller.inputs {
                let arrow = match input.kind {
                    InputKind::Strong | InputKind::Primary => "==",
                    InputKind::DestroyReady | InputKind::MappedDestroyReady => "-.",
                    InputKind::Weak | InputKind::Mapped => "--",
                };
                let tail = match arrow {
                    "==" => "==>",
                    "-." => ".->",
                    _ => "-->",
                };
                let _ = writeln!(
                    mermaid,
                    "  t{} {arrow} \"{}\" {tail} c{index}",
                    types[input.r#type.as_str()],
                    mermaid_text(&input_label(input))
                );
            }
            for output in &controller.outputs {
                let _ = writeln!(mermaid, "  c{index} -- \"{}\" --> t{}", output.kind, types[output.r#type.as_str()]);
            }
        }
        mermaid
    }

    /// Every resource type in the graph, numbered in name order.
    fn types(&self) -> BTreeMap<&str, usize> {
        let mut types: BTreeMap<&str, usize> = BTreeMap::new();
        for controller in &self.controllers {
            for input in &controller.inputs {
                types.insert(&input.r#type, 0);
            }
            for output in &controller.outputs {
                types.insert(&output.r#type, 0);
            }
        }
        for (index, number) in types.values_mut().enumerate() {
            *number = index;
        }
        types
    }
}

fn input_label(input: &GraphInput) -> String {
    match &input.id {
        Some(id) => format!("{} {}/{id}", input.kind, input.namespace),
        None => format!("{} {}", input.kind, input.namespace),
    }
}

fn dot_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn mermaid_text(text: &str) -> String {
    text.replace('"', "#quot;")
}
