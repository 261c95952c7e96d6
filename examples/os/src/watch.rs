//! File events: a controller whose input is a file (`machine.yaml`,
//! `platform.json`, `run/kernel/net.json`) is woken when it changes.
//!
//! The watch is on the file's directory, not on the file: editors save by
//! writing a new file and renaming it over the old one, which a watch on the
//! old file would miss. Events for other names in the directory, and mere
//! reads, are ignored; a burst of events (an editor's truncate, write and
//! close) wakes once, after the burst has been quiet for the debounce time.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use crate::tasks::{Task, Tasks};

/// A running watch; dropping it stops it.
pub struct FileWatch {
    _watcher: notify::RecommendedWatcher,
    _task: Task,
}

impl std::fmt::Debug for FileWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatch").finish_non_exhaustive()
    }
}

impl FileWatch {
    /// Calls `on_change` after each burst of changes to `name` in `dir`
    /// (created, written, renamed over or removed).
    pub fn start(
        tasks: &Tasks,
        dir: &Path,
        name: &str,
        debounce: Duration,
        on_change: impl Fn() + Send + Sync + 'static,
    ) -> Result<Self, notify::Error> {
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel::<()>();
        let name = OsString::from(name);
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) => {
                let changes = matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_));
                if changes && event.paths.iter().any(|path| path.file_name() == Some(name.as_os_str())) {
                    // The receiver is gone only once the watch is stopped.
                    let _ = events.send(());
                }
            }
            // Say so and go on: the next event may well come through.
            Err(error) => tracing::warn!("file watch error: {error}"),
        })?;
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        let task = tasks.spawn(async move {
            while received.recv().await.is_some() {
                loop {
                    match tokio::time::timeout(debounce, received.recv()).await {
                        Ok(Some(())) => continue,
                        Ok(None) => return,
                        Err(_quiet) => break,
                    }
                }
                on_change();
            }
        });
        Ok(FileWatch { _watcher: watcher, _task: task })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wakes_on_rename_replacement_and_ignores_other_files() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let tasks = Tasks::default();
        let (woken, mut wakes) = tokio::sync::mpsc::unbounded_channel();
        let count = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&count);
        let _watch = FileWatch::start(&tasks, dir.path(), "machine.yaml", Duration::from_millis(200), move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = woken.send(());
        })
        .expect("the watch starts");

        // An editor's save: a new file renamed over the old one.
        std::fs::write(dir.path().join(".machine.yaml.swp"), "hostname: a\n").expect("write");
        std::fs::rename(dir.path().join(".machine.yaml.swp"), dir.path().join("machine.yaml")).expect("rename");
        tokio::time::timeout(Duration::from_secs(10), wakes.recv()).await.expect("woken in time");

        // Reading the file and writing another one wake nobody: a write to
        // the watched file after them is the next wake-up.
        let _ = std::fs::read_to_string(dir.path().join("machine.yaml"));
        std::fs::write(dir.path().join("other.yaml"), "x").expect("write");
        std::fs::write(dir.path().join("machine.yaml"), "hostname: b\n").expect("write");
        tokio::time::timeout(Duration::from_secs(10), wakes.recv()).await.expect("woken in time");
        assert_eq!(count.load(Ordering::SeqCst), 2);
        tasks.shutdown().await;
    }
}
