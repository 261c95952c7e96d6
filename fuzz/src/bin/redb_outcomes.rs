//! Tallies what the `redb_file` target sees over a corpus: how many store
//! files opened, were refused (by kind of error), and made redb panic inside
//! the store (caught). `fuzz/run` grows the corpus in `target/fuzz/corpus/redb_file`:
//!
//! ```text
//! cargo run -p cosi-fuzz --bin redb_outcomes -- target/fuzz/corpus/redb_file fuzz/seeds/redb_file
//! ```

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::io::Write as _;

fn main() -> std::io::Result<()> {
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut files = 0;
    for dir in std::env::args_os().skip(1) {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if !path.is_file() {
                continue;
            }
            let data = std::fs::read(&path)?;
            *outcomes.entry(cosi_fuzz::redb_file_outcome(&data)).or_default() += 1;
            files += 1;
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{files} files")?;
    let mut sorted: Vec<_> = outcomes.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (outcome, count) in sorted {
        writeln!(out, "{count:>8}  {outcome}")?;
    }
    Ok(())
}
