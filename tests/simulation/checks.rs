//! The safety checks that hold at every step: observers watch every kind of
//! the system on the state itself (not through the faults) and check each
//! event against what they saw before.
//!
//! - Versions only grow, one at a time: a resource is created at version 1,
//!   each update is the next version, and a destroy is of the last one; so
//!   a watch delivers each version in order, without gaps or duplicates.
//! - Nothing is destroyed while it has finalizers.
//! - A controller's output is written by that controller alone (its owner),
//!   and a client's resources by no controller.
//! - A watch that ends, ends with exactly one `Errored` (the observers that
//!   read slowly fall behind until they overrun), and a watch resumed from a
//!   bookmark continues exactly where the last one stopped.
//!
//! At the end, each observer's mirror of its kind must equal the kind.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cosi::prelude::*;
use cosi::state::{Bookmark, Error, Watch, WatchKindOptions};
use parking_lot::Mutex;

use crate::faults::{Faults, error_name};
use crate::trace::Trace;

/// What went wrong, as it was seen.
#[derive(Default)]
pub struct Violations(Mutex<Vec<String>>);

impl Violations {
    pub fn report(&self, violation: String) {
        let mut violations = self.0.lock();
        if violations.len() < 20 {
            violations.push(violation);
        }
    }

    pub fn list(&self) -> Vec<String> {
        self.0.lock().clone()
    }
}

/// What an observer knows of one resource: version, phase, finalizers.
pub type Seen = (u64, Phase, Vec<String>);

/// An observer's copy of its kind: what it saw of each ID.
pub type Mirror = Arc<Mutex<BTreeMap<String, Seen>>>;

pub fn seen(resource: &DynamicResource) -> Seen {
    let metadata = resource.metadata();
    let finalizers = metadata.finalizers().iter().map(str::to_owned).collect();
    (metadata.version().get().unwrap_or_default(), metadata.phase(), finalizers)
}

pub struct Observer {
    pub kind: Kind,
    /// The owner every write must carry: the kind's controller, or none for a client's kind.
    pub owner: Option<String>,
    /// Reads slowly while faults are on, so it may overrun.
    pub slow: bool,
    /// The chance, per batch while faults are on, to drop the watch and resume from the bookmark.
    pub resume: f64,
    /// Whether its watch crosses a network, which may break it: it may then
    /// fail to open, or end with one `Errored` when it cannot resume.
    pub remote: bool,
    pub mirror: Mirror,
}

impl Observer {
    /// Watches until the runtime ends; violations go to `violations`.
    pub async fn run(
        self,
        state: Arc<dyn State>,
        mut rng: fastrand::Rng,
        faults: Arc<Faults>,
        trace: Arc<Trace>,
        violations: Arc<Violations>,
    ) {
        let kind = &self.kind;
        let mut bookmark: Option<Bookmark> = None;
        loop {
            let resuming = bookmark.is_some();
            let options = match bookmark.clone() {
                Some(bookmark) => WatchKindOptions::from_bookmark(bookmark),
                None => WatchKindOptions::bootstrap(),
            };
            let mut watch = match state.watch_kind_dynamic(kind, options).await {
                Ok(watch) => watch,
                Err(error) if resuming && error.is_invalid_bookmark() => {
                    trace.log(format_args!("observer {kind}: bookmark too old, starting over"));
                    bookmark = None;
                    continue;
                }
                Err(error) if self.remote && matches!(error, Error::Backend(_)) => {
                    trace.log(format_args!("observer {kind}: the watch could not open ({})", error_name(&error)));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(error) => {
                    violations.report(format!("observer {kind}: the watch could not open: {error}"));
                    return;
                }
            };
            let mut bootstrapping = !resuming;
            if bootstrapping {
                self.mirror.lock().clear();
            }
            let mut errored = false;
            loop {
                let Some(batch) = watch.recv_batch().await else {
                    violations.report(format!("observer {kind}: the watch ended without an error"));
                    return;
                };
                for event in batch {
                    if let Some(mark) = event.bookmark() {
                        bookmark = Some(mark.clone());
                    }
                    match event {
                        Event::Errored { error } => {
                            self.errored(&mut watch, &error, &trace, &violations).await;
                            (bookmark, errored) = (None, true);
                        }
                        Event::Bootstrapped { .. } => bootstrapping = false,
                        event => self.check(&event, bootstrapping, &violations),
                    }
                }
                if errored {
                    break; // Start over.
                }
                if faults.active() {
                    if self.slow {
                        tokio::time::sleep(Duration::from_millis(rng.u64(0..200))).await;
                    }
                    if rng.f64() < self.resume && !bootstrapping {
                        trace.log(format_args!("observer {kind}: resumes from its bookmark"));
                        break;
                    }
                }
            }
        }
    }

    /// An `Errored` must be the watch's last event.
    async fn errored(&self, watch: &mut Watch, error: &Error, trace: &Trace, violations: &Violations) {
        let kind = &self.kind;
        trace.log(format_args!("observer {kind}: errored ({})", error_name(error)));
        // Over a network, a watch that cannot resume (its bookmark is too
        // old, or the server stayed out of reach) ends with the reason.
        let broken = self.remote && (error.is_invalid_bookmark() || matches!(error, Error::Backend(_)));
        if !matches!(error, Error::BufferOverrun { .. }) && !broken {
            violations.report(format!("observer {kind}: the watch failed: {error}"));
        }
        if let Some(more) = watch.recv_batch().await {
            violations.report(format!("observer {kind}: {} events after Errored", more.len()));
        }
    }

    fn check(&self, event: &Event, bootstrapping: bool, violations: &Violations) {
        let kind = &self.kind;
        let Some(resource) = event.resource() else { return };
        let metadata = resource.metadata();
        let (id, now) = (metadata.id().to_owned(), seen(resource));
        let mut mirror = self.mirror.lock();
        let before = mirror.get(&id).cloned();
        let wrong = |what: String| violations.report(format!("observer {kind}: {id}: {what}"));
        if !matches!(event, Event::Destroyed { .. }) && metadata.owner() != self.owner.as_deref() {
            wrong(format!("written with owner {:?}, expected {:?}", metadata.owner(), self.owner));
        }
        match event {
            Event::Created { .. } if bootstrapping => drop(mirror.insert(id, now)),
            Event::Created { .. } => {
                if let Some(before) = before {
                    wrong(format!("created at v{} while it existed at v{}", now.0, before.0));
                }
                if now.0 != 1 {
                    wrong(format!("created at v{}", now.0));
                }
                mirror.insert(id, now);
            }
            Event::Updated { old, .. } => {
                match &before {
                    None => wrong(format!("updated to v{} unseen", now.0)),
                    Some(before) if now.0 != before.0 + 1 => {
                        wrong(format!("updated from v{} to v{}: a gap or a duplicate", before.0, now.0));
                    }
                    Some(before) if old.metadata().version().get() != Some(before.0) => {
                        wrong(format!(
                            "updated from v{}, whose old version says {}",
                            before.0,
                            old.metadata().version()
                        ));
                    }
                    Some(_) => (),
                }
                mirror.insert(id, now);
            }
            Event::Destroyed { .. } => {
                match &before {
                    None => wrong(format!("destroyed at v{} unseen", now.0)),
                    Some(before) if before.0 != now.0 => {
                        wrong(format!("destroyed at v{}, last seen v{}", now.0, before.0))
                    }
                    Some(_) => (),
                }
                if !now.2.is_empty() {
                    wrong(format!("destroyed with finalizers {:?}", now.2));
                }
                mirror.remove(&id);
            }
            _ => (),
        }
    }
}
