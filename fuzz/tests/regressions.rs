//! Every target over its seeds and its regression inputs: each file in
//! `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/` runs through the
//! harness, so an input that once crashed a target stays a test. `fuzz/run`
//! copies each new crash there; the fix lands with it.

use std::path::Path;

#[test]
fn seeds_and_regressions_pass_every_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    for target in cosi_fuzz::TARGETS {
        for dir in ["seeds", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else { continue };
            for entry in entries {
                let path = entry.expect("a directory entry").path();
                let data = std::fs::read(&path).expect("an input file");
                eprintln!("{target}: {}", path.display());
                assert!(cosi_fuzz::run(target, &data), "unknown target {target}");
                ran += 1;
            }
        }
    }
    assert!(ran >= cosi_fuzz::TARGETS.len(), "every target has at least one seed, ran {ran} inputs");
}
