//! No crate of the workspace uses `unsafe`, and none can start to quietly:
//! the root of every library, binary, example and fuzz target (and of the
//! test crates whose root is a `main.rs`) forbids it, which no `allow`
//! further in can undo. A new crate or target without the attribute fails
//! here, naming its file.

#![forbid(unsafe_code)]

use std::process::Command;

const ATTRIBUTE: &str = "#![forbid(unsafe_code)]";

#[test]
fn every_crate_root_forbids_unsafe_code() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .args(["metadata", "--no-deps", "--offline", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|error| panic!("cannot run {cargo} metadata: {error}"));
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");

    let mut checked = Vec::new();
    let mut missing = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            let kinds: Vec<&str> =
                target["kind"].as_array().expect("kinds").iter().filter_map(|k| k.as_str()).collect();
            let path = target["src_path"].as_str().expect("src_path");
            let shipped = kinds.iter().any(|kind| ["lib", "proc-macro", "bin", "example"].contains(kind));
            let test_main = kinds.contains(&"test") && path.ends_with("/main.rs");
            if !shipped && !test_main {
                continue;
            }
            let source = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("read {path}: {error}"));
            match source.lines().any(|line| line.trim() == ATTRIBUTE) {
                true => checked.push(path.to_owned()),
                false => missing.push(path.to_owned()),
            }
        }
    }
    assert!(missing.is_empty(), "these crate roots lack `{ATTRIBUTE}`:\n{}", missing.join("\n"));
    // The workspace's libraries, cosictl, the example OS, the fuzz targets, the book's crate.
    assert!(checked.len() >= 25, "only {} crate roots found: {checked:?}", checked.len());
}
