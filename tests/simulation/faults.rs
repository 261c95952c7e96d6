//! Seeded faults: controllers that fail, panic or are slow; state
//! operations that fail, conflict or fail after they wrote; runtime watches
//! that break or overrun; a backing store that refuses batches. Every fault
//! is drawn from the run's one generator while faults are on, and none after
//! [`Faults::stop`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cosi::controller::BoxError;
use cosi::prelude::*;
use cosi::state::{
    BackingStore, DestroyOptions, Error, Immediate, InProcess, ListOptions, Observation, Observer, StoreWrite, Watch,
    WatchKindOptions, WatchOptions,
};
use futures_util::stream;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::trace::Trace;

/// How likely each fault is while faults are on: drawn per seed.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub read_error: f64,
    pub write_error: f64,
    pub write_conflict: f64,
    /// A write that is made, and reported as failed.
    pub write_ambiguous: f64,
    pub watch_open_error: f64,
    /// A runtime watch's stream ends (it resumes from its bookmark).
    pub watch_cut: f64,
    /// A runtime watch's stream reports an overrun and ends (it starts over).
    pub watch_overrun: f64,
    /// The backing store refuses a batch.
    pub store_error: f64,
    /// The gRPC network cuts a connection about this often (milliseconds, on average).
    pub connection_cut: Option<u64>,
    /// The chance that the gRPC network refuses a connection, and then
    /// every connection for up to 5 s.
    pub connect_refused: f64,
    /// Controllers that fail, by name, with the chance per reconcile.
    pub failing: BTreeMap<String, f64>,
    /// Controllers that panic, by name, with the chance per reconcile.
    pub panicking: BTreeMap<String, f64>,
    /// Controllers whose reconciles take up to this many milliseconds.
    pub slow: BTreeMap<String, u64>,
}

impl Profile {
    pub fn draw(rng: &mut fastrand::Rng, controllers: &[String]) -> Self {
        let mut chance = |max: f64| if rng.bool() { rng.f64() * max } else { 0.0 };
        let mut profile = Profile {
            read_error: chance(0.05),
            write_error: chance(0.08),
            write_conflict: chance(0.08),
            write_ambiguous: chance(0.05),
            watch_open_error: chance(0.3),
            watch_cut: chance(0.1),
            watch_overrun: chance(0.05),
            store_error: chance(0.1),
            connect_refused: chance(0.5),
            ..Profile::default()
        };
        profile.connection_cut = rng.bool().then(|| rng.u64(200..5_000));
        for name in controllers {
            match rng.u8(0..10) {
                0 | 1 => drop(profile.failing.insert(name.clone(), 0.2 + rng.f64() * 0.8)),
                2 => drop(profile.panicking.insert(name.clone(), 0.1 + rng.f64() * 0.5)),
                3 | 4 => drop(profile.slow.insert(name.clone(), rng.u64(1..500))),
                _ => (),
            }
        }
        profile
    }
}

pub struct Faults {
    rng: Mutex<fastrand::Rng>,
    active: AtomicBool,
    profile: Profile,
    trace: Arc<Trace>,
    /// State writes through the runtime's state, for the runaway guard.
    writes: AtomicU64,
    write_limit: AtomicU64,
    runaway: Notify,
}

/// The message of every injected panic, which the panic hook keeps quiet.
pub const INJECTED_PANIC: &str = "injected panic";

impl Faults {
    pub fn new(seed: u64, profile: Profile, trace: Arc<Trace>) -> Arc<Self> {
        Arc::new(Faults {
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            active: AtomicBool::new(true),
            profile,
            trace,
            writes: AtomicU64::new(0),
            write_limit: AtomicU64::new(u64::MAX),
            runaway: Notify::new(),
        })
    }

    pub fn stop(&self) {
        self.active.store(false, Ordering::SeqCst);
    }

    pub fn active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// Whether a fault of chance `p` fires now; `what` goes to the trace when it does.
    fn roll(&self, p: f64, what: impl FnOnce() -> String) -> bool {
        if p <= 0.0 || !self.active() {
            return false;
        }
        let fired = self.rng.lock().f64() < p;
        if fired {
            self.trace.log(format_args!("fault: {}", what()));
        }
        fired
    }

    /// The faults of one reconcile of `controller`: a delay, then an error
    /// or a panic, or nothing.
    pub async fn reconcile(&self, controller: &str) -> Result<(), BoxError> {
        if let Some(&max) = self.profile.slow.get(controller)
            && self.active()
        {
            let delay = self.rng.lock().u64(0..=max);
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        self.decide(controller)
    }

    /// The faults of one call into a controller's code that cannot wait (a transform).
    pub fn decide(&self, controller: &str) -> Result<(), BoxError> {
        let fail = self.profile.failing.get(controller).copied().unwrap_or_default();
        if self.roll(fail, || format!("{controller} fails")) {
            return Err(format!("injected failure of {controller}").into());
        }
        let panic = self.profile.panicking.get(controller).copied().unwrap_or_default();
        if self.roll(panic, || format!("{controller} panics")) {
            panic!("{INJECTED_PANIC} in {controller}");
        }
        Ok(())
    }

    /// Whether the store fails what it is asked now (`what`, for the trace).
    pub fn store_fails(&self, what: &str) -> bool {
        self.roll(self.profile.store_error, || what.to_owned())
    }

    /// While faults are on, how long the network refuses connections from
    /// now, if it starts refusing now.
    pub fn refusal(&self) -> Option<Duration> {
        match self.roll(self.profile.connect_refused, || "network: connections are refused".to_owned()) {
            true => Some(Duration::from_millis(self.rng.lock().u64(0..5_000))),
            false => None,
        }
    }

    /// While faults are on, when the network cuts its next connection.
    pub fn next_cut(&self) -> Option<Duration> {
        let mean = self.profile.connection_cut.filter(|_| self.active())?;
        Some(Duration::from_millis(self.rng.lock().u64(0..=2 * mean)))
    }

    /// From now on, more than `more` writes wake [`runaway`](Faults::runaway).
    pub fn limit_writes(&self, more: u64) {
        self.write_limit.store(self.writes.load(Ordering::SeqCst) + more, Ordering::SeqCst);
    }

    /// Resolves once the write limit is passed: controllers that never stop writing.
    pub async fn runaway(&self) {
        loop {
            let notified = self.runaway.notified();
            if self.writes.load(Ordering::SeqCst) > self.write_limit.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    fn count_write(&self) {
        let writes = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if writes > self.write_limit.load(Ordering::SeqCst) {
            self.runaway.notify_waiters();
        }
    }
}

fn injected(what: &str) -> Error {
    Error::Backend(Arc::new(std::io::Error::other(format!("injected {what} failure"))))
}

/// The state the runtime works on: the real one, behind the faults.
pub struct FaultyState {
    pub inner: Arc<dyn State>,
    pub faults: Arc<Faults>,
    pub trace: Arc<Trace>,
    /// Whether the inner state's observers are offered: the runtime's feeds
    /// are then observers, which no fault reaches (a write that fails is not
    /// observed), else watch tasks, which the faults cut and overrun.
    pub observed: bool,
}

impl FaultyState {
    fn read_fault(&self, what: &str, at: &dyn std::fmt::Display) -> Result<(), Error> {
        match self.faults.roll(self.faults.profile.read_error, || format!("{what} {at} fails")) {
            true => Err(injected(what)),
            false => Ok(()),
        }
    }

    /// The fault before a write, if any: an error, or (updates) a conflict.
    fn write_fault(&self, what: &str, resource: &DynamicResource) -> Result<(), Error> {
        let pointer = resource.metadata().pointer();
        let profile = &self.faults.profile;
        if self.faults.roll(profile.write_error, || format!("{what} {pointer} fails")) {
            return Err(injected(what));
        }
        if what == "update" && self.faults.roll(profile.write_conflict, || format!("{what} {pointer} conflicts")) {
            let version = resource.metadata().version();
            return Err(Error::VersionConflict { pointer: pointer.clone(), given: version, stored: version.next() });
        }
        Ok(())
    }

    /// A write (`what`: a create or an update) through the inner state's
    /// in-process face, with the faults of the same write through `State`.
    fn write_now(
        &self,
        what: &str,
        resource: DynamicResource,
        owner: Option<&str>,
        write: impl FnOnce(&dyn InProcess, DynamicResource) -> Immediate<DynamicResource>,
    ) -> Immediate<DynamicResource> {
        if let Err(error) = self.write_fault(what, &resource) {
            return Immediate::Done(Err(error));
        }
        let Some(inner) = self.inner.in_process() else { return Immediate::Deferred(resource) };
        let pointer = resource.metadata().pointer().clone();
        match write(inner, resource) {
            Immediate::Done(result) => Immediate::Done(self.finish(what, owner, &pointer, result)),
            deferred @ Immediate::Deferred(_) => deferred,
        }
    }

    /// Whether a write that succeeded is reported as failed.
    fn ambiguous(&self, what: &str, pointer: &Pointer) -> bool {
        self.faults.roll(self.faults.profile.write_ambiguous, || format!("{what} {pointer} is written but fails"))
    }

    fn wrote(&self, what: &str, owner: Option<&str>, result: &Result<DynamicResource, Error>, pointer: &Pointer) {
        self.faults.count_write();
        let by = owner.unwrap_or("-");
        match result {
            Ok(stored) => self.trace.log(format_args!("{what} {pointer} by {by}: v{}", stored.metadata().version())),
            Err(error) => self.trace.log(format_args!("{what} {pointer} by {by}: {}", error_name(error))),
        }
    }

    fn finish(
        &self,
        what: &str,
        owner: Option<&str>,
        pointer: &Pointer,
        result: Result<DynamicResource, Error>,
    ) -> Result<DynamicResource, Error> {
        self.wrote(what, owner, &result, pointer);
        match result {
            Ok(_) if self.ambiguous(what, pointer) => Err(injected(what)),
            result => result,
        }
    }
}

/// A short, deterministic name for an error in the trace.
pub fn error_name(error: &Error) -> String {
    match error {
        Error::NotFound(_) => "not found".into(),
        Error::AlreadyExists(_) => "already exists".into(),
        Error::VersionConflict { .. } => "version conflict".into(),
        Error::PendingFinalizers { .. } => "pending finalizers".into(),
        Error::OwnerConflict { .. } => "owner conflict".into(),
        Error::PhaseConflict { .. } => "phase conflict".into(),
        Error::Backend(_) => "backend error".into(),
        other => other.to_string(),
    }
}

#[async_trait]
impl State for FaultyState {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource, Error> {
        self.read_fault("get", pointer)?;
        self.inner.get_dynamic(pointer).await
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>, Error> {
        self.read_fault("list", kind)?;
        self.inner.list_dynamic(kind, options).await
    }

    async fn create_dynamic(
        &self,
        resource: DynamicResource,
        options: CreateOptions,
    ) -> Result<DynamicResource, Error> {
        self.write_fault("create", &resource)?;
        let pointer = resource.metadata().pointer().clone();
        let owner = options.owner.clone();
        let result = self.inner.create_dynamic(resource, options).await;
        self.finish("create", owner.as_deref(), &pointer, result)
    }

    async fn update_dynamic(
        &self,
        resource: DynamicResource,
        options: UpdateOptions,
    ) -> Result<DynamicResource, Error> {
        self.write_fault("update", &resource)?;
        let pointer = resource.metadata().pointer().clone();
        let owner = options.owner.clone();
        let result = self.inner.update_dynamic(resource, options).await;
        self.finish("update", owner.as_deref(), &pointer, result)
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<(), Error> {
        if self.faults.roll(self.faults.profile.write_error, || format!("destroy {pointer} fails")) {
            return Err(injected("destroy"));
        }
        let owner = options.owner.clone();
        let result = self.inner.destroy_dynamic(pointer, options).await;
        self.faults.count_write();
        let by = owner.as_deref().unwrap_or("-");
        match &result {
            Ok(()) => self.trace.log(format_args!("destroy {pointer} by {by}: done")),
            Err(error) => self.trace.log(format_args!("destroy {pointer} by {by}: {}", error_name(error))),
        }
        match result {
            Ok(()) if self.ambiguous("destroy", pointer) => Err(injected("destroy")),
            result => result,
        }
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch, Error> {
        self.inner.watch_dynamic(pointer, options).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch, Error> {
        if self.faults.roll(self.faults.profile.watch_open_error, || format!("watch {kind} fails to open")) {
            return Err(injected("watch"));
        }
        let inner = self.inner.watch_kind_dynamic(kind, options).await?;
        let progress = inner.progress();
        let faults = Arc::clone(&self.faults);
        let kind = kind.clone();
        // Each batch may be the last: the stream ends (a dropped stream, which
        // the runtime resumes from its last bookmark) or reports an overrun
        // (which makes the runtime start over). What was read and not
        // delivered is dropped, as a broken connection drops it.
        let batches = stream::unfold(Some(inner), move |watch| {
            let faults = Arc::clone(&faults);
            let kind = kind.clone();
            async move {
                let mut watch = watch?;
                let profile = &faults.profile;
                if faults.roll(profile.watch_cut, || format!("watch {kind} is cut")) {
                    return None;
                }
                if faults.roll(profile.watch_overrun, || format!("watch {kind} overruns")) {
                    let error = Error::BufferOverrun { kind: kind.clone(), behind: 0, capacity: 0 };
                    return Some((vec![Event::Errored { error }], None));
                }
                let batch = watch.recv_batch().await?;
                Some((batch, Some(watch)))
            }
        });
        let watch = Watch::from_batches(batches);
        Ok(match progress {
            Some(progress) => watch.with_progress(progress),
            None => watch,
        })
    }

    /// The inner state's in-process face, behind the same faults.
    fn in_process(&self) -> Option<&dyn InProcess> {
        self.inner.in_process().map(|_| self as &dyn InProcess)
    }
}

/// The faults of the [`State`] methods, on the inner state's in-process face
/// (which [`FaultyState::in_process`] offers only where there is one).
impl InProcess for FaultyState {
    fn get_now(&self, pointer: &Pointer) -> Option<Result<DynamicResource, Error>> {
        if let Err(error) = self.read_fault("get", pointer) {
            return Some(Err(error));
        }
        self.inner.in_process()?.get_now(pointer)
    }

    fn list_now(&self, kind: &Kind, options: &ListOptions) -> Option<Result<Vec<DynamicResource>, Error>> {
        if let Err(error) = self.read_fault("list", kind) {
            return Some(Err(error));
        }
        self.inner.in_process()?.list_now(kind, options)
    }

    fn create_now(&self, resource: DynamicResource, options: &CreateOptions) -> Immediate<DynamicResource> {
        self.write_now("create", resource, options.owner.as_deref(), |inner, resource| {
            inner.create_now(resource, options)
        })
    }

    fn update_now(&self, resource: DynamicResource, options: &UpdateOptions) -> Immediate<DynamicResource> {
        self.write_now("update", resource, options.owner.as_deref(), |inner, resource| {
            inner.update_now(resource, options)
        })
    }

    fn observe_kind(&self, kind: &Kind, observer: Arc<dyn Observer>) -> Option<Result<Observation, Error>> {
        match self.observed {
            true => self.inner.in_process()?.observe_kind(kind, observer),
            false => None,
        }
    }
}

/// A backing store in memory (the simulated disk) that refuses batches
/// while faults are on; what it holds is compared with the state at the end.
pub struct FaultyStore {
    pub stored: Mutex<BTreeMap<Pointer, DynamicResource>>,
    pub faults: Arc<Faults>,
}

impl BackingStore for FaultyStore {
    fn load(&self) -> Result<Vec<DynamicResource>, Error> {
        Ok(self.stored.lock().values().cloned().collect())
    }

    fn write(&self, batch: &[StoreWrite<'_>]) -> Result<(), Error> {
        if self.faults.store_fails(&format!("the store refuses a batch of {}", batch.len())) {
            return Err(injected("store"));
        }
        let mut stored = self.stored.lock();
        for write in batch {
            match write {
                StoreWrite::Put(resource) => {
                    stored.insert(resource.metadata().pointer().clone(), (*resource).clone());
                }
                StoreWrite::Destroy(pointer) => {
                    stored.remove(*pointer);
                }
            }
        }
        Ok(())
    }
}
