//! `cosictl graph`: the live controller graph of the runtimes writing to a state.
//!
//! Read from the [`ControllerStatus`] resources every running runtime publishes
//! (one per controller, in the `runtime` namespace unless told otherwise), and
//! rendered with [`Graph`]. Unhealthy controllers are marked in every format:
//! red in DOT and Mermaid with their last error in a comment, listed under
//! `unhealthy` in JSON (which otherwise is exactly [`Graph`]'s).

use std::fmt::Write as _;
use std::io::Write as _;

use clap::{Args, ValueEnum};
use cosi::runtime::{ControllerStatus, Graph, RUNTIME_NAMESPACE};
use cosi::state::{ListOptions, StateExt};
use serde::Serialize;

use crate::{CliError, ConnectArgs};

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Graphviz DOT (`cosictl graph | dot -Tsvg > graph.svg`).
    Dot,
    /// A Mermaid flowchart.
    Mermaid,
    /// JSON: the controllers with their inputs and outputs.
    Json,
}

#[derive(Args)]
pub struct GraphArgs {
    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value = "dot")]
    output: Format,
    /// The namespace the runtimes publish their controller statuses in.
    #[arg(long, short = 'n', default_value = RUNTIME_NAMESPACE)]
    namespace: String,
}

/// A controller whose last reconcile failed.
#[derive(Debug, Serialize)]
struct Unhealthy {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
}

pub async fn run(args: GraphArgs, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = connect.connect().await?;
    let statuses = client.list_in::<ControllerStatus>(&args.namespace, &ListOptions::default()).await?;
    if statuses.is_empty() {
        let _ = writeln!(
            std::io::stderr(),
            "cosictl: no controller statuses in namespace {:?}: no runtime runs against this state, or it publishes elsewhere (-n)",
            args.namespace
        );
    }
    let mut graph = Graph::default();
    let mut unhealthy = Vec::new();
    for status in &statuses {
        graph.controllers.push(status.graph_controller(status.id()));
        if !status.healthy {
            unhealthy.push(Unhealthy { name: status.id().to_owned(), last_error: status.last_error.clone() });
        }
    }
    graph.controllers.sort_by(|a, b| a.name.cmp(&b.name));
    unhealthy.sort_by(|a, b| a.name.cmp(&b.name));
    let text = render(&graph, &unhealthy, args.output);
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|err| CliError::Output(err.to_string()))
}

/// The graph in `format`, with the unhealthy controllers marked.
fn render(graph: &Graph, unhealthy: &[Unhealthy], format: Format) -> String {
    // Node `c{i}` is the i-th controller in both DOT and Mermaid renderings.
    let index = |name: &str| graph.controllers.iter().position(|controller| controller.name == name);
    match format {
        Format::Json => {
            #[derive(Serialize)]
            struct Output<'a> {
                #[serde(flatten)]
                graph: &'a Graph,
                #[serde(skip_serializing_if = "<[_]>::is_empty")]
                unhealthy: &'a [Unhealthy],
            }
            // Plain structs of strings serialize without fail.
            let mut json = serde_json::to_string_pretty(&Output { graph, unhealthy }).unwrap_or_default();
            json.push('\n');
            json
        }
        Format::Dot => {
            let dot = graph.to_dot();
            let body = dot.trim_end().strip_suffix('}').unwrap_or(&dot);
            let mut marked = body.to_owned();
            for controller in unhealthy {
                if let Some(i) = index(&controller.name) {
                    let _ = writeln!(marked, "  // {}", describe(controller));
                    let _ = writeln!(marked, "  c{i} [color=red, fontcolor=red];");
                }
            }
            marked.push_str("}\n");
            marked
        }
        Format::Mermaid => {
            let mut mermaid = graph.to_mermaid();
            for controller in unhealthy {
                if let Some(i) = index(&controller.name) {
                    let _ = writeln!(mermaid, "  %% {}", describe(controller));
                    let _ = writeln!(mermaid, "  style c{i} stroke:#d00,color:#d00");
                }
            }
            mermaid
        }
    }
}

/// `NAME is unhealthy: LAST ERROR`, on one line.
fn describe(controller: &Unhealthy) -> String {
    match &controller.last_error {
        Some(error) => {
            let error = crate::output::printable(&error.split_whitespace().collect::<Vec<_>>().join(" "));
            format!("{} is unhealthy: {error}", controller.name)
        }
        None => format!("{} is unhealthy", controller.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosi::runtime::GraphController;

    fn graph() -> Graph {
        let controller = |name: &str| GraphController { name: name.into(), inputs: Vec::new(), outputs: Vec::new() };
        Graph { controllers: vec![controller("a"), controller("b")] }
    }

    #[test]
    fn unhealthy_controllers_are_marked_in_every_format() {
        let sick = [Unhealthy { name: "b".into(), last_error: Some("boom\nat line\u{1b}[2J 2".into()) }];
        let dot = render(&graph(), &sick, Format::Dot);
        assert!(
            dot.contains("  // b is unhealthy: boom at line\\u{1b}[2J 2\n  c1 [color=red, fontcolor=red];\n}\n"),
            "{dot}"
        );
        let mermaid = render(&graph(), &sick, Format::Mermaid);
        assert!(
            mermaid.ends_with("  %% b is unhealthy: boom at line\\u{1b}[2J 2\n  style c1 stroke:#d00,color:#d00\n")
        );
        let json: serde_json::Value = serde_json::from_str(&render(&graph(), &sick, Format::Json)).expect("json");
        assert_eq!(json["unhealthy"][0]["name"], "b");
        let back: Graph = serde_json::from_value(json).expect("the JSON reads back as a graph");
        assert_eq!(back, graph());

        // Healthy: exactly the library's renderings.
        assert_eq!(render(&graph(), &[], Format::Dot), graph().to_dot());
        assert_eq!(render(&graph(), &[], Format::Mermaid), graph().to_mermaid());
        assert!(!render(&graph(), &[], Format::Json).contains("unhealthy"));
    }
}
