//! The redb path: `cosi_redb::RedbState` on a temporary file, whose commits
//! fail at seeded points (`RedbState::open_failing`).
//!
//! A failed commit stops the store for good (redb asks for a reopen after an
//! I/O error), so the run then restarts as a process would: it stops the
//! runtime and the observers, opens the file again, checks that the file
//! holds exactly what the state held, and starts again on it.
//!
//! The store commits on a thread of its own and the state writes from
//! tokio's blocking pool, so these runs are not replayable byte for byte.
//! The paused clock does not advance while blocking-pool work is in flight,
//! so no simulated timer fires while a write waits for its commit.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cosi::prelude::*;
use cosi::state::MemoryOptions;
use cosi_redb::{Options, RedbState};

use crate::faults::Faults;
use crate::run::{contents, differ};

pub struct RedbFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
    history: MemoryOptions,
    faults: Arc<Faults>,
    /// Set when a commit has failed; cleared when the file is opened again.
    failed: Arc<AtomicBool>,
}

impl RedbFile {
    /// A new file in a temporary directory.
    pub fn new(history: MemoryOptions, faults: &Arc<Faults>) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("state.redb");
        RedbFile { _dir: dir, path, history, faults: Arc::clone(faults), failed: Arc::default() }
    }

    /// Whether a commit has failed since the file was opened.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Opens the file, with commits that fail while faults are on.
    pub async fn open(&self) -> Result<Arc<dyn State>, cosi_redb::Error> {
        let (path, faults, failed) = (self.path.clone(), Arc::clone(&self.faults), Arc::clone(&self.failed));
        failed.store(false, Ordering::SeqCst);
        let options = Options::default().history(self.history.clone());
        // The committer's thread asks: in the runtime's context, its faults
        // are stamped with simulated time.
        let runtime = tokio::runtime::Handle::current();
        let fail = move || {
            let _context = runtime.enter();
            match faults.store_fails("the redb store fails a commit") {
                true => {
                    failed.store(true, Ordering::SeqCst);
                    Err(std::io::Error::other("injected commit failure"))
                }
                false => Ok(()),
            }
        };
        let opened = tokio::task::spawn_blocking(move || RedbState::open_failing(path, options, fail));
        let state = opened.await.expect("opening the file does not panic")?;
        Ok(Arc::new(state))
    }

    /// Closes `state` (which must be the last holder of it), opens the file
    /// again, and checks that it loads exactly what `state` held of `kinds`.
    pub async fn reopen(&self, state: Arc<dyn State>, kinds: &[Kind], failures: &mut Vec<String>) -> Arc<dyn State> {
        let held = contents(&state, kinds, failures).await;
        if Arc::strong_count(&state) > 1 {
            failures.push(format!(
                "{} holders of the state remain after the runtime stopped",
                Arc::strong_count(&state) - 1
            ));
        }
        drop(state);
        let reopened = match self.open().await {
            Ok(reopened) => reopened,
            Err(error) => panic!("the redb file does not open again: {error}"),
        };
        let loaded = contents(&reopened, kinds, failures).await;
        if let Some(differences) = differ(&loaded, &held) {
            failures.push(format!("the file differs from what the state held (file, state): {differences}"));
        }
        reopened
    }
}
