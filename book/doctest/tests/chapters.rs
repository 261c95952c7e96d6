//! What the chapters quote must be what the code does now:
//!
//! - a compiler message after `<!-- ui-test: <macro>/fail/<case> -->` is the
//!   one `ui-tests/` records for that case (the trybuild test checks the
//!   record against the pinned compiler), and the snippet above it is that
//!   case's source, hidden lines included;
//! - a graph between `<!-- graph: <name> -->` and `<!-- graph:end -->` is the
//!   Mermaid text the runtime exports for it now (`Graph::to_mermaid`), after
//!   one line of display settings.
//!
//! It also runs the recipes of chapter 6 (`examples/recipes/`), whose graphs
//! the chapter draws.
//!
//! After changing a controller's inputs or outputs, regenerate the graphs with
//! `UPDATE_BOOK_GRAPHS=1 cargo test -p cosi-book --test chapters`.

use std::path::{Path, PathBuf};

// The recipes are programs of their own (`cargo run --example NAME`); here
// they are modules, so that their scenarios run as tests and their graphs
// are drawn (their `main`s are not used).
#[allow(dead_code)]
#[path = "../../../examples/recipes/device_manager.rs"]
mod device_manager;
#[allow(dead_code)]
#[path = "../../../examples/recipes/fleet_reconciler.rs"]
mod fleet_reconciler;
#[allow(dead_code)]
#[path = "../../../examples/recipes/gitops_agent.rs"]
mod gitops_agent;
#[allow(dead_code)]
#[path = "../../../examples/recipes/vm_control_plane.rs"]
mod vm_control_plane;

const GRAPH_END: &str = "<!-- graph:end -->";
/// Before each graph, a display setting of Mermaid's: draw it at its natural
/// size (the page scrolls sideways), not shrunk to the page's width, which
/// makes the example OS's graph unreadable.
const NATURAL_SIZE: &str = "%%{init: {\"flowchart\": {\"useMaxWidth\": false}}}%%\n";
const REGENERATE: &str = "regenerate with `UPDATE_BOOK_GRAPHS=1 cargo test -p cosi-book --test chapters`";

fn book() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../src")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every chapter: its file name and text.
fn chapters() -> Vec<(String, String)> {
    let mut chapters: Vec<(String, String)> = std::fs::read_dir(book())
        .expect("book/src")
        .map(|entry| entry.expect("an entry of book/src").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a chapter");
            (path.file_name().expect("a file name").to_string_lossy().into_owned(), text)
        })
        .collect();
    chapters.sort();
    chapters
}

/// A fenced block: its info string and its body.
struct Block {
    info: String,
    body: String,
}

/// The fenced blocks of `text`, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else { continue };
        let mut body = String::new();
        for line in lines.by_ref() {
            if line == "```" {
                break;
            }
            body.push_str(line);
            body.push('\n');
        }
        blocks.push(Block { info: info.to_owned(), body });
    }
    blocks
}

/// A Rust snippet as the compiler sees it: rustdoc's hidden lines (`# code`,
/// and `#` alone for an empty line) shown.
fn unhide(body: &str) -> String {
    body.lines()
        .map(|line| match line {
            "#" => "",
            _ => line.strip_prefix("# ").unwrap_or(line),
        })
        .fold(String::new(), |text, line| text + line + "\n")
}

#[test]
fn quoted_compiler_messages_are_the_ui_tests() {
    let mut quoted = 0;
    for (chapter, text) in chapters() {
        for (at, _) in text.match_indices("<!-- ui-test: ") {
            let rest = &text[at + "<!-- ui-test: ".len()..];
            let case = &rest[..rest.find(" -->").expect("a closed ui-test marker")];
            let following = blocks(rest);
            let [snippet, message, ..] = following.as_slice() else {
                panic!("{chapter}: `{case}` needs a snippet and a message after it");
            };
            let ui = workspace().join("ui-tests").join(case);
            let source = std::fs::read_to_string(ui.with_extension("rs")).expect("the ui-test's source");
            let stderr = std::fs::read_to_string(ui.with_extension("stderr")).expect("the ui-test's output");
            assert!(
                snippet.info.starts_with("rust,compile_fail"),
                "{chapter}: the snippet of `{case}` is not compile_fail"
            );
            assert_eq!(unhide(&snippet.body), source, "{chapter}: the snippet of `{case}` is not the ui-test's source");
            assert_eq!(message.info, "text", "{chapter}: the message of `{case}` is not a text block");
            assert_eq!(
                message.body.trim_end(),
                stderr.trim_end(),
                "{chapter}: the message of `{case}` is not the ui-test's"
            );
            if let Some(code) = stderr.strip_prefix("error[").and_then(|rest| rest.get(..5)) {
                assert!(snippet.info.ends_with(code), "{chapter}: the snippet of `{case}` must expect {code}");
            }
            quoted += 1;
        }
    }
    assert!(quoted >= 5, "the chapters quote {quoted} compiler messages; the markers are not being found");
}

/// The graphs the book draws, by the name its markers use.
fn graph(name: &str) -> String {
    match name {
        "example-os" => example_os::controllers::graph().expect("the OS's controllers register").to_mermaid(),
        "vm_control_plane" => vm_control_plane::graph().to_mermaid(),
        "device_manager" => device_manager::graph().to_mermaid(),
        "gitops_agent" => gitops_agent::graph().to_mermaid(),
        "fleet_reconciler" => fleet_reconciler::graph().to_mermaid(),
        _ => panic!("the book draws an unknown graph `{name}`"),
    }
}

#[test]
fn graphs_are_the_runtime_s_export() {
    let update = std::env::var_os("UPDATE_BOOK_GRAPHS").is_some();
    let mut drawn = 0;
    for (chapter, text) in chapters() {
        let mut updated = text.clone();
        for (at, _) in text.match_indices("<!-- graph: ") {
            let rest = &text[at..];
            let name = &rest["<!-- graph: ".len()..rest.find(" -->").expect("a closed graph marker")];
            let end = rest.find(GRAPH_END).expect("a graph:end marker") + GRAPH_END.len();
            let current = &rest[..end];
            let expected = format!("<!-- graph: {name} -->\n```mermaid\n{NATURAL_SIZE}{}```\n{GRAPH_END}", graph(name));
            if update {
                updated = updated.replace(current, &expected);
            } else {
                assert!(current == expected, "{chapter}: the graph `{name}` is out of date: {REGENERATE}");
            }
            drawn += 1;
        }
        if update && updated != text {
            std::fs::write(book().join(&chapter), updated).expect("write the chapter");
        }
    }
    assert!(drawn >= 5, "the chapters draw {drawn} graphs; the markers are not being found");
}

#[tokio::test]
async fn the_vm_control_plane_runs() {
    vm_control_plane::run().await.expect("the VM control plane recipe");
}

#[tokio::test]
async fn the_device_manager_runs() {
    device_manager::run().await.expect("the device manager recipe");
}

#[tokio::test]
async fn the_gitops_agent_runs() {
    gitops_agent::run().await.expect("the GitOps agent recipe");
}

#[tokio::test]
async fn the_fleet_reconciler_runs() {
    fleet_reconciler::run().await.expect("the fleet reconciler recipe");
}
