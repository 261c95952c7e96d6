//! The OS's controller graph is checked in as `examples/os/graph.dot` and
//! drawn in the README as Mermaid; both must be the graph the code builds.
//!
//! After changing a controller's inputs or outputs, regenerate both with
//! `UPDATE_OS_GRAPH=1 cargo test -p example-os --test graph`.

use std::collections::BTreeSet;
use std::path::PathBuf;

const START: &str = "<!-- os-graph:start -->";
const END: &str = "<!-- os-graph:end -->";
const REGENERATE: &str = "regenerate with `UPDATE_OS_GRAPH=1 cargo test -p example-os --test graph`";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_graph_has_every_controller_and_type() {
    let graph = example_os::controllers::graph().expect("the controllers register");
    assert_eq!(graph.controllers.len(), 19);
    let types: BTreeSet<&str> = graph
        .controllers
        .iter()
        .flat_map(|controller| {
            let inputs = controller.inputs.iter().map(|input| input.r#type.as_str());
            inputs.chain(controller.outputs.iter().map(|output| output.r#type.as_str()))
        })
        .collect();
    let defined: BTreeSet<String> =
        example_os::resources::definitions().into_iter().map(|definition| definition.r#type).collect();
    assert_eq!(types, defined.iter().map(String::as_str).collect());
}

#[test]
fn the_checked_in_graph_and_the_readme_are_current() {
    let graph = example_os::controllers::graph().expect("the controllers register");
    let dot = graph.to_dot();
    let mermaid = format!("{START}\n```mermaid\n{}```\n{END}", graph.to_mermaid());
    let dot_path = manifest_dir().join("graph.dot");
    let readme_path = manifest_dir().join("../../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("the README");
    let (Some(start), Some(end)) = (readme.find(START), readme.find(END)) else {
        panic!("README.md has no {START} ... {END} block for the OS's graph");
    };
    let current = &readme[start..end + END.len()];

    if std::env::var_os("UPDATE_OS_GRAPH").is_some() {
        std::fs::write(&dot_path, &dot).expect("write graph.dot");
        std::fs::write(&readme_path, readme.replace(current, &mermaid)).expect("write the README");
        return;
    }
    let checked_in = std::fs::read_to_string(&dot_path).unwrap_or_default();
    assert!(checked_in == dot, "examples/os/graph.dot is out of date: {REGENERATE}");
    assert!(current == mermaid, "the README's Mermaid graph of the OS is out of date: {REGENERATE}");
}
