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
        self.render::<Dot>()
    }

    /// The graph as a Mermaid flowchart.
    pub fn to_mermaid(&self) -> String {
        self.render::<Mermaid>()
    }

    /// The graph in format `F`: the controllers, the resource types, then
    /// each controller's input and output edges.
    fn render<F: Format>(&self) -> String {
        let types = self.types();
        let mut text = String::from(F::HEADER);
        for (index, controller) in self.controllers.iter().enumerate() {
            F::controller(&mut text, index, &controller.name);
        }
        for (r#type, index) in &types {
            F::resource_type(&mut text, *index, r#type);
        }
        for (index, controller) in self.controllers.iter().enumerate() {
            for input in &controller.inputs {
                F::input(&mut text, types[input.r#type.as_str()], index, input);
            }
            for output in &controller.outputs {
                F::output(&mut text, index, types[output.r#type.as_str()], output);
            }
        }
        text.push_str(F::FOOTER);
        text
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

/// A text format of the graph: how it writes each part, numbered
/// controllers `c<index>` and resource types `t<index>` (see [`Graph::render`]).
trait Format {
    const HEADER: &'static str;
    const FOOTER: &'static str;
    fn controller(text: &mut String, index: usize, name: &str);
    fn resource_type(text: &mut String, index: usize, name: &str);
    fn input(text: &mut String, r#type: usize, controller: usize, input: &GraphInput);
    fn output(text: &mut String, controller: usize, r#type: usize, output: &GraphOutput);
}

/// Graphviz DOT.
struct Dot;

impl Format for Dot {
    const HEADER: &'static str = "digraph cosi {\n  rankdir=LR;\n";
    const FOOTER: &'static str = "}\n";

    fn controller(text: &mut String, index: usize, name: &str) {
        let _ = writeln!(text, "  c{index} [shape=box, style=rounded, label={}];", dot_string(name));
    }

    fn resource_type(text: &mut String, index: usize, name: &str) {
        let _ = writeln!(text, "  t{index} [shape=ellipse, label={}];", dot_string(name));
    }

    fn input(text: &mut String, r#type: usize, controller: usize, input: &GraphInput) {
        let style = match input.kind {
            InputKind::Strong | InputKind::Primary => ", style=bold",
            InputKind::DestroyReady | InputKind::MappedDestroyReady => ", style=dashed",
            InputKind::Weak | InputKind::Mapped => "",
        };
        let _ = writeln!(text, "  t{type} -> c{controller} [label={}{style}];", dot_string(&input_label(input)));
    }

    fn output(text: &mut String, controller: usize, r#type: usize, output: &GraphOutput) {
        let _ = writeln!(text, "  c{controller} -> t{type} [label={}];", dot_string(output.kind.as_str()));
    }
}

/// A Mermaid flowchart.
struct Mermaid;

impl Format for Mermaid {
    const HEADER: &'static str = "flowchart LR\n";
    const FOOTER: &'static str = "";

    fn controller(text: &mut String, index: usize, name: &str) {
        let _ = writeln!(text, "  c{index}[\"{}\"]", mermaid_text(name));
    }

    fn resource_type(text: &mut String, index: usize, name: &str) {
        let _ = writeln!(text, "  t{index}([\"{}\"])", mermaid_text(name));
    }

    fn input(text: &mut String, r#type: usize, controller: usize, input: &GraphInput) {
        let (arrow, tail) = match input.kind {
            InputKind::Strong | InputKind::Primary => ("==", "==>"),
            InputKind::DestroyReady | InputKind::MappedDestroyReady => ("-.", ".->"),
            InputKind::Weak | InputKind::Mapped => ("--", "-->"),
        };
        let label = mermaid_text(&input_label(input));
        let _ = writeln!(text, "  t{type} {arrow} \"{label}\" {tail} c{controller}");
    }

    fn output(text: &mut String, controller: usize, r#type: usize, output: &GraphOutput) {
        let _ = writeln!(text, "  c{controller} -- \"{}\" --> t{type}", output.kind);
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
