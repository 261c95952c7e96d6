//! The `redb_file` target: a whole store file from outside, as
//! `RedbState::open` reads it, redb's pages included.
//!
//! redb checks a damaged file with assertions in places, which panic;
//! `RedbState` catches those (at open, and around each commit) and returns
//! an error. libFuzzer's panic hook aborts at any panic, caught or not, so
//! while this target runs a hook of its own counts the panics instead of
//! aborting. A panic that leaves this target is still a crash: it is raised
//! again with what was panicked, and libFuzzer's hook aborts then.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use cosi::resource::{DynamicResource, EncodedSpec, Kind, Metadata, Resource};
use cosi::state::{CreateOptions, DestroyOptions, ListOptions, META_NAMESPACE, Namespace, State};
use cosi::testing::resources::PathResource;
use cosi_redb::{Error, Options, RedbState};

/// Set while a store file is being opened, read and written.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Panics inside the store (caught by it) since the current input started.
static PANICS: AtomicU64 = AtomicU64::new(0);
/// The last of them, to tell a panic that escaped.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// The kinds the seed stores hold, which the target lists and reads back.
fn kinds() -> [Kind; 4] {
    [
        Kind::new("ns", "Things.fuzz.cosi.dev"),
        PathResource::kind(),
        Kind::new(META_NAMESPACE, cosi::resource::ResourceDefinition::TYPE),
        Kind::new(META_NAMESPACE, Namespace::TYPE),
    ]
}

/// A store file: written to a temporary file, opened (with the fuzz key when
/// it is encrypted), every kind of the seeds listed and each resource read
/// back, one resource written and destroyed, and the store closed. Opening
/// must load a state or fail with an error; nothing may panic out of the
/// store or hang (libFuzzer's `-timeout` bounds each input).
pub fn redb_file(data: &[u8]) {
    let _ = redb_file_outcome(data);
}

/// What [`redb_file`] saw: `opened`, `opened, the write failed`, or
/// `refused: ` and the kind of error; with how many panics inside redb the
/// store caught. `fuzz/src/bin/redb_outcomes.rs` tallies them over a corpus.
pub fn redb_file_outcome(data: &[u8]) -> String {
    count_panics();
    PANICS.store(0, Ordering::SeqCst);
    RUNNING.store(true, Ordering::SeqCst);
    let outcome = catch_unwind(AssertUnwindSafe(|| open_read_write(data)));
    RUNNING.store(false, Ordering::SeqCst);
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(_) => {
            let last = LAST_PANIC.lock().map(|last| last.clone()).unwrap_or_default();
            panic!("a panic left the store: {}", last.unwrap_or_default())
        }
    };
    match PANICS.load(Ordering::SeqCst) {
        0 => outcome,
        panics => format!("{outcome} (redb panicked {panics} times, caught)"),
    }
}

/// Installs, once, the hook that counts panics while a store file is handled
/// and leaves every other panic to the hook it replaces.
fn count_panics() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match RUNNING.load(Ordering::SeqCst) {
            true => {
                PANICS.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut last) = LAST_PANIC.lock() {
                    *last = Some(info.to_string());
                }
            }
            false => previous(info),
        }));
    });
}

fn open_read_write(data: &[u8]) -> String {
    // In memory where the system offers it: each input commits (fsyncs) several times.
    let shm = std::path::Path::new("/dev/shm");
    let dir = match shm.is_dir() {
        true => shm.to_path_buf(),
        false => std::env::temp_dir(),
    };
    let mut file =
        tempfile::Builder::new().prefix("cosi-fuzz-").suffix(".redb").tempfile_in(dir).expect("a temporary file");
    std::io::Write::write_all(&mut file, data).expect("write the input");
    let opened = match RedbState::open(file.path(), Options::default()) {
        Err(Error::KeyRequired) => RedbState::open(file.path(), Options::default().encryption_key(crate::key())),
        opened => opened,
    };
    let state = match opened {
        Ok(state) => state,
        Err(error) => return format!("refused: {}", category(&error)),
    };
    let written = crate::runtime().block_on(async {
        for kind in kinds() {
            // A kind the damage renamed is simply not there.
            let Ok(listed) = state.list_dynamic(&kind, &ListOptions::default()).await else { continue };
            for resource in listed {
                let pointer = resource.metadata().pointer().clone();
                let read = state.get_dynamic(&pointer).await.expect("a listed resource reads");
                assert_eq!(read, resource, "a resource reads back otherwise than it was listed");
            }
        }
        let spec = EncodedSpec { proto: b"written".to_vec(), yaml: Some("written: true\n".to_owned()) };
        let resource = DynamicResource::encoded(Metadata::new("ns", "Things.fuzz.cosi.dev", "written-by-fuzz"), spec);
        let pointer = resource.metadata().pointer().clone();
        match state.create_dynamic(resource, CreateOptions::default()).await {
            Ok(_) => state.destroy_dynamic(&pointer, DestroyOptions::default()).await.is_ok(),
            Err(_) => false,
        }
    });
    // Closing commits what is queued, on the committer thread.
    drop(state);
    match written {
        true => "opened".to_owned(),
        false => "opened, the write failed".to_owned(),
    }
}

/// The kind of error, without what names this file.
fn category(error: &Error) -> String {
    match error {
        Error::NotAStore { reason, .. } => format!("not a store, {}", head(reason)),
        Error::Corrupt { reason, .. } => format!("corrupt record, {}", head(reason)),
        Error::Redb(redb::Error::Io(io)) => format!("redb I/O error, {:?}", io.kind()),
        Error::Redb(error) => format!("redb error, {}", head(&error.to_string())),
        Error::Load(error) => format!("not loaded, {}", head(&error.to_string())),
        other => head(&other.to_string()).to_owned(),
    }
}

/// A message up to its first colon: what kind of failure, not its details.
fn head(message: &str) -> &str {
    message.split(':').next().unwrap_or_default()
}
