//! The runtime controllers: kernel parameters, services, and the machine's
//! status.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cosi::backoff::Backoff;
use cosi::controller::{BoxError, ReducedMetadata, Requeue, RequeueError, Waker};
use cosi::prelude::*;
use parking_lot::Mutex;

use crate::env::{Env, MACHINE_STATUS_JSON, SOCKET};
use crate::error::Error;
use crate::machine_config::SysctlKey;
use crate::resources::{
    EtcFileStatus, HostnameStatus, KernelParamSpec, KernelParamStatus, MachineConfig, MachineStage, MachineStatus,
    ServiceSpec, ServiceState, ServiceStatus, TimeStatus, UnmetCondition,
};
use crate::tasks::Task;

/// How often a service writes a heartbeat when `machine.yaml` does not say.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);

/// How long a service's process must stay up for its earlier crashes to be
/// forgotten: its next crash is restarted after the backoff's first delay.
pub const STABLE_AFTER: Duration = Duration::from_secs(10);

/// `sysctls:` of `machine.yaml` become `KernelParamSpec`s. A key removed
/// from the file is torn down; once `runtime.KernelParamSpecController` has
/// reset it and let it go, the destroy-ready input wakes this controller,
/// which destroys the spec.
#[controller(
    name = "runtime.KernelParamConfigController",
    inputs = [Weak<MachineConfig>(id = "active"), DestroyReady<KernelParamSpec>],
    outputs = [Shared<KernelParamSpec>],
    inventory = false,
)]
pub async fn kernel_param_config(ctx: &mut Ctx) -> cosi::Result<()> {
    let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;
    for (key, value) in machine.iter().flat_map(|machine| &machine.config.sysctls) {
        ctx.modify::<KernelParamSpec>(key.as_str(), |spec| {
            spec.value.clone_from(&value.0);
            spec.ignore_errors = false;
        })
        .await?;
    }
    ctx.cleanup_outputs::<KernelParamSpec>().await
}

/// Writes kernel parameters to `proc/sys/<a/b/c>` and reports them as
/// `KernelParamStatus`. It remembers the value each key had before it first
/// wrote it, and writes it back when the key is removed.
///
/// A key the kernel does not have (no such file under `proc/sys`) makes the
/// reconcile fail once every other key is applied: the runtime restarts the
/// controller with growing backoff until the key is removed or marked
/// `ignoreErrors`. The remembered defaults live in the controller, which
/// the runtime keeps across restarts.
#[controller(
    name = "runtime.KernelParamSpecController",
    inputs = [Strong<KernelParamSpec>],
    outputs = [Exclusive<KernelParamStatus>],
    inventory = false,
)]
#[derive(Default)]
pub struct KernelParamSpecController {
    env: Env,
    defaults: BTreeMap<String, String>,
}

impl KernelParamSpecController {
    /// The controller for the sandbox of `env`.
    pub fn new(env: Env) -> Self {
        KernelParamSpecController { env, defaults: BTreeMap::new() }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let finalizer = ctx.name().to_owned();
        let mut errors = Vec::new();
        for spec in ctx.list::<KernelParamSpec>(&ListOptions::default()).await? {
            let key = spec.id();
            let path = match SysctlKey::try_from(key.to_owned()) {
                Ok(key) => key.proc_path(),
                Err(error) => {
                    errors.push(error);
                    continue;
                }
            };
            match spec.metadata().phase() {
                Phase::Running => {
                    if !spec.metadata().finalizers().has(&finalizer) {
                        ctx.add_finalizers(&spec, &[&finalizer]).await?;
                    }
                    let Some(current) = self.env.sandbox.read(path.as_str())? else {
                        ctx.modify::<KernelParamStatus>(key, |status| {
                            status.current.clear();
                            status.default.clear();
                            status.unsupported = true;
                        })
                        .await?;
                        if !spec.ignore_errors {
                            errors.push(format!(
                                "sysctl {key}: the kernel has no such parameter ({path} does not exist)"
                            ));
                        }
                        continue;
                    };
                    let current = current.trim().to_owned();
                    let default = self.defaults.entry(key.to_owned()).or_insert_with(|| current.clone()).clone();
                    if self.env.sandbox.write_existing(path.as_str(), &format!("{}\n", spec.value))? {
                        tracing::info!("sysctl {key} = {} (was {current})", spec.value);
                    }
                    ctx.modify::<KernelParamStatus>(key, |status| {
                        status.current.clone_from(&spec.value);
                        status.default.clone_from(&default);
                        status.unsupported = false;
                    })
                    .await?;
                }
                Phase::TearingDown if spec.metadata().finalizers().has(&finalizer) => {
                    if let Some(default) = self.defaults.remove(key)
                        && self.env.sandbox.exists(path.as_str())?
                        && self.env.sandbox.write_existing(path.as_str(), &format!("{default}\n"))?
                    {
                        tracing::info!("sysctl {key} reset to {default}");
                    }
                    ctx.destroy::<KernelParamStatus>(key).await.ignore_not_found()?;
                    ctx.remove_finalizers(&spec, &[&finalizer]).await?;
                }
                Phase::TearingDown => (),
            }
        }
        Error::from_list(errors)
    }
}

/// `services:` of `machine.yaml` become `ServiceSpec`s. A service removed
/// from the file is torn down; once `runtime.ServiceController` has stopped
/// it and let it go, the destroy-ready input wakes this controller, which
/// destroys the spec.
#[controller(
    name = "runtime.ServiceConfigController",
    inputs = [Weak<MachineConfig>(id = "active"), DestroyReady<ServiceSpec>],
    outputs = [Exclusive<ServiceSpec>],
    inventory = false,
)]
pub async fn service_config(ctx: &mut Ctx) -> cosi::Result<()> {
    let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;
    for service in machine.iter().flat_map(|machine| &machine.config.services.0) {
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        ctx.modify::<ServiceSpec>(service.name.as_str(), |spec| {
            spec.after = service.after.iter().map(ToString::to_string).collect();
            spec.requires_time = service.requires_time;
            spec.crash_after_ms = service.crash_after.map(|duration| millis(duration.0));
            spec.heartbeat_ms = millis(service.heartbeat.map_or(DEFAULT_HEARTBEAT, |duration| duration.0));
        })
        .await?;
    }
    ctx.cleanup_outputs::<ServiceSpec>().await
}

/// A simulated process.
struct Process {
    pid: u32,
    /// The spec it was started with: a changed spec restarts it.
    spec: ServiceSpec,
    /// Set by the process when it exits, with why; it then queues its
    /// service, so the controller sees the exit at once.
    exit: Arc<Mutex<Option<String>>>,
    /// When it started, to tell a crash after a stable run from one in a row.
    started: tokio::time::Instant,
    _task: Task,
}

/// Runs each service as a simulated process (a task that writes
/// `run/services/<name>.pid` and a heartbeat to `var/log/services/<name>.log`),
/// once the files it comes `after` are written and, if it says so, the time
/// is synchronized.
///
/// A queue controller: each service is an item, up to four are reconciled at
/// once, and each has its own backoff, so a crashing service (`crashAfter`)
/// is restarted with backoff while the others go on. The controller counts
/// each service's crashes in a row and asks for the delay itself
/// ([`RequeueError`]): the runtime's backoff of an item starts over at every
/// success, and each restart is one. The delay grows with each crash, and
/// starts over once a process has stayed up [`STABLE_AFTER`]. A changed
/// `EtcFileStatus` or `TimeStatus` is mapped to the services that wait for
/// it. Nothing polls a running service: its process queues the service
/// itself when it exits ([`Waker::wake_item`]), as a real supervisor
/// learns of an exit from `SIGCHLD`.
#[controller(
    name = "runtime.ServiceController",
    inputs = [Primary<ServiceSpec>, Mapped<EtcFileStatus>, Mapped<TimeStatus>],
    outputs = [Exclusive<ServiceStatus>],
    concurrency = 4,
    inventory = false,
)]
#[derive(Default)]
pub struct ServiceController {
    env: Env,
    processes: Mutex<BTreeMap<String, Process>>,
    next_pid: AtomicU32,
    /// Each service's crashes in a row.
    crashes: Mutex<BTreeMap<String, Crashes>>,
}

/// A service's crashes in a row: the backoff before its next restart, and
/// when that restart is due (a wake-up before then starts nothing).
struct Crashes {
    backoff: Backoff,
    due: tokio::time::Instant,
}

impl ServiceController {
    /// The controller for the sandbox of `env`.
    pub fn new(env: Env) -> Self {
        ServiceController { env, processes: Mutex::default(), next_pid: AtomicU32::new(0), crashes: Mutex::default() }
    }

    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<Requeue, BoxError> {
        let name = item.id();
        let Some(spec) = ctx.get::<ServiceSpec>(item).await.ignore_not_found()? else {
            self.stop(name, "its spec is gone");
            self.crashes.lock().remove(name);
            return Ok(Requeue::Never);
        };
        let finalizer = ctx.name().to_owned();
        if spec.metadata().phase() == Phase::TearingDown {
            self.stop(name, "it was removed from machine.yaml");
            self.crashes.lock().remove(name);
            ctx.destroy::<ServiceStatus>(name).await.ignore_not_found()?;
            ctx.remove_finalizers(&spec, &[&finalizer]).await?;
            return Ok(Requeue::Never);
        }
        if !spec.metadata().finalizers().has(&finalizer) {
            ctx.add_finalizers(&spec, &[&finalizer]).await?;
        }

        let unmet = self.unmet(ctx, &spec).await?;
        if !unmet.is_empty() {
            let message = format!("waiting for {}", unmet.join(", "));
            self.stop(name, &message);
            let before = ctx.get::<ServiceStatus>(name).await.ignore_not_found()?;
            if before.as_ref().is_none_or(|before| before.message != message) {
                tracing::info!("service {name} is {message}");
            }
            ctx.modify::<ServiceStatus>(name, |status| {
                status.state = ServiceState::Waiting;
                status.pid = None;
                status.healthy = false;
                status.message.clone_from(&message);
            })
            .await?;
            return Ok(Requeue::Never);
        }

        let (pid, exit) = {
            let mut processes = self.processes.lock();
            if processes.get(name).is_some_and(|process| process.spec != *spec.spec()) {
                processes.remove(name);
            }
            match processes.get(name) {
                Some(process) => (process.pid, process.exit.lock().clone()),
                None => {
                    // Woken (a file, the time, the spec) before its restart is due.
                    if let Some(wait) = self.restart_wait(name) {
                        return Ok(Requeue::After(wait));
                    }
                    let process = self.start(name, &spec, ctx.waker())?;
                    tracing::info!("service {name} is running (pid {})", process.pid);
                    let pid = process.pid;
                    processes.insert(name.to_owned(), process);
                    (pid, None)
                }
            }
        };
        match exit {
            None => {
                ctx.modify::<ServiceStatus>(name, |status| {
                    status.state = ServiceState::Running;
                    status.pid = Some(pid);
                    status.healthy = true;
                    status.message.clear();
                })
                .await?;
                Ok(Requeue::Never)
            }
            Some(reason) => {
                let process = self.processes.lock().remove(name);
                let delay = self.next_restart(name, process.map(|process| process.started.elapsed()));
                let status = ctx
                    .modify::<ServiceStatus>(name, |status| {
                        status.state = ServiceState::Crashed;
                        status.pid = None;
                        status.healthy = false;
                        status.restarts += 1;
                        status.message.clone_from(&reason);
                    })
                    .await?;
                tracing::warn!("service {name} crashed ({reason}); restart {} in {delay:.1?}", status.restarts);
                Err(RequeueError::new(format!("service {name} crashed: {reason}"), delay).into())
            }
        }
    }

    async fn map(&self, ctx: &Ctx<Self>, input: &ReducedMetadata) -> Result<Vec<Pointer>, Error> {
        let changed = &input.pointer;
        let services = ctx.list::<ServiceSpec>(&ListOptions::default()).await?;
        let affected = services.iter().filter(|service| match changed.r#type() {
            t if t == <EtcFileStatus as Resource>::TYPE => service.after.iter().any(|file| file == changed.id()),
            t if t == <TimeStatus as Resource>::TYPE => service.requires_time,
            _ => false,
        });
        Ok(affected.map(|service| service.metadata().pointer().clone()).collect())
    }

    /// How long to wait before restarting `name`, whose process crashed
    /// after being `up` that long: the next delay of its backoff, which
    /// starts over when the process had run [`STABLE_AFTER`].
    fn next_restart(&self, name: &str, up: Option<Duration>) -> Duration {
        let mut crashes = self.crashes.lock();
        let now = tokio::time::Instant::now();
        let crashes = crashes
            .entry(name.to_owned())
            .or_insert_with(|| Crashes { backoff: Backoff::new(self.env.backoff), due: now });
        if up.is_some_and(|up| up >= STABLE_AFTER) {
            crashes.backoff.reset();
        }
        let delay = crashes.backoff.next_delay();
        crashes.due = now + delay;
        delay
    }

    /// How long until `name`'s restart after a crash is due; `None` when it is.
    fn restart_wait(&self, name: &str) -> Option<Duration> {
        let due = self.crashes.lock().get(name)?.due;
        Some(due.checked_duration_since(tokio::time::Instant::now())?).filter(|wait| !wait.is_zero())
    }

    /// What `spec` waits for: files not yet written, the time not yet synchronized.
    async fn unmet(&self, ctx: &Ctx<Self>, spec: &Typed<ServiceSpec>) -> Result<Vec<String>, Error> {
        let mut unmet = Vec::new();
        for file in &spec.after {
            let written = ctx.get::<EtcFileStatus>(file).await.ignore_not_found()?;
            if written.is_none_or(|status| status.metadata().phase() != Phase::Running) {
                unmet.push(format!("etc/{file}"));
            }
        }
        if spec.requires_time {
            let time = ctx.get::<TimeStatus>("node").await.ignore_not_found()?;
            if !time.is_some_and(|time| time.synced) {
                unmet.push("time sync".to_owned());
            }
        }
        Ok(unmet)
    }

    /// Starts the simulated process of `name`: its pid file is written
    /// before this returns, so it is there whenever the status says Running.
    /// When the process exits, it queues its service with `waker`.
    fn start(&self, name: &str, spec: &Typed<ServiceSpec>, waker: Waker) -> Result<Process, Error> {
        let pid = 1000 + self.next_pid.fetch_add(1, Ordering::Relaxed);
        let pid_file = format!("run/services/{name}.pid");
        let log_file = format!("var/log/services/{name}.log");
        let sandbox = self.env.sandbox.clone();
        sandbox.write_atomic(pid_file.as_str(), &format!("{pid}\n"), 0o644)?;
        sandbox.append(log_file.as_str(), &format!("started (pid {pid})\n"))?;
        let exit = Arc::new(Mutex::new(None));
        let crash_after = spec.crash_after_ms.map(Duration::from_millis);
        let heartbeat = Duration::from_millis(spec.heartbeat_ms.max(10));
        let item = spec.metadata().pointer().clone();
        let service = name.to_owned();
        let task = self.env.tasks.spawn({
            let exit = Arc::clone(&exit);
            async move {
                let started = tokio::time::Instant::now();
                let mut beats = tokio::time::interval_at(started + heartbeat, heartbeat);
                // Whether the last heartbeat failed: a log that cannot be
                // written is reported once, not at every beat, and again
                // after it could be written.
                let mut failing = false;
                let crash = async {
                    match crash_after {
                        Some(after) => tokio::time::sleep_until(started + after).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::pin!(crash);
                loop {
                    tokio::select! {
                        () = &mut crash => break,
                        _ = beats.tick() => match sandbox.append(log_file.as_str(), "heartbeat\n") {
                            Ok(()) => failing = false,
                            Err(error) if !failing => {
                                failing = true;
                                tracing::warn!("service {service} cannot write its heartbeat (until it can again): {error}");
                            }
                            Err(_) => (),
                        },
                    }
                }
                let after = humantime::format_duration(crash_after.unwrap_or_default());
                let reason = format!("simulated crash after {after}");
                if let Err(error) = sandbox.append(log_file.as_str(), &format!("{reason}: exit status 1\n")) {
                    tracing::warn!("service {service} cannot log its exit: {error}");
                }
                if let Err(error) = sandbox.remove(pid_file.as_str()) {
                    tracing::warn!("service {service} exited, but its pid file stays: {error}");
                }
                *exit.lock() = Some(reason);
                // The service is a resource of the controller's primary
                // input, so queueing it cannot be refused; if it were, the
                // next change of the service would still see the exit.
                if let Err(error) = waker.wake_item(&item) {
                    tracing::warn!("service {}: the exit is seen at the next change only: {error}", item.id());
                }
            }
        });
        Ok(Process { pid, spec: spec.spec().clone(), exit, started: tokio::time::Instant::now(), _task: task })
    }

    /// Stops the process of `name`, if it runs.
    fn stop(&self, name: &str, why: &str) {
        let Some(process) = self.processes.lock().remove(name) else { return };
        drop(process);
        tracing::info!("service {name} stopped: {why}");
        if let Err(error) = self.env.sandbox.remove(format!("run/services/{name}.pid").as_str()) {
            tracing::warn!("service {name} stopped, but its pid file stays: {error}");
        }
        if let Err(error) = self.env.sandbox.append(format!("var/log/services/{name}.log").as_str(), "stopped\n") {
            tracing::warn!("service {name} cannot log its stop: {error}");
        }
    }
}

/// Condenses the statuses into one `MachineStatus/machine`: the stage
/// (`booting` until every condition held once, then `running`), whether the
/// machine is ready now, and what is not. Writes it to
/// `run/machine-status.json` too, and logs a banner when the machine reaches
/// `running`.
#[controller(
    name = "runtime.MachineStatusController",
    inputs = [Weak<ServiceStatus>, Weak<TimeStatus>, Weak<EtcFileStatus>, Weak<HostnameStatus>, Weak<KernelParamStatus>],
    outputs = [Exclusive<MachineStatus>],
    inventory = false,
)]
pub struct MachineStatusController {
    env: Env,
    booted: Instant,
    /// Whether the machine was ready at the last reconcile, to log changes.
    ready: Option<bool>,
}

impl Default for MachineStatusController {
    fn default() -> Self {
        MachineStatusController::new(Env::default())
    }
}

/// The files the network writes, which the machine waits for.
const REQUIRED_FILES: &[&str] = &["hostname", "hosts", "resolv.conf"];

impl MachineStatusController {
    /// The controller for the sandbox of `env`; the boot time counts from now.
    pub fn new(env: Env) -> Self {
        MachineStatusController { env, booted: Instant::now(), ready: None }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let mut unmet = Vec::new();
        let mut condition = |name: &str, reason: String| {
            unmet.push(UnmetCondition { name: name.to_owned(), reason });
        };
        match ctx.get::<TimeStatus>("node").await.ignore_not_found()? {
            Some(time) if time.synced => (),
            Some(time) if !time.servers.is_empty() => {
                condition("time", format!("not synchronized with {}", time.servers.join(", ")));
            }
            _ => condition("time", "not synchronized".to_owned()),
        }
        if ctx.get::<HostnameStatus>("hostname").await.ignore_not_found()?.is_none() {
            condition("hostname", "not set".to_owned());
        }
        let written: BTreeSet<String> =
            ctx.list::<EtcFileStatus>(&ListOptions::default()).await?.iter().map(|s| s.id().to_owned()).collect();
        let missing: Vec<String> =
            REQUIRED_FILES.iter().filter(|file| !written.contains(**file)).map(|file| format!("etc/{file}")).collect();
        if !missing.is_empty() {
            condition("etcFiles", format!("not written: {}", missing.join(", ")));
        }
        let services: Vec<String> = ctx
            .list::<ServiceStatus>(&ListOptions::default())
            .await?
            .iter()
            .filter(|service| service.state != ServiceState::Running || !service.healthy)
            .map(|service| match service.message.is_empty() {
                true => format!("{} is {:?}", service.id(), service.state),
                false => format!("{} is {:?} ({})", service.id(), service.state, service.message),
            })
            .collect();
        if !services.is_empty() {
            condition("services", services.join("; "));
        }
        let unsupported: Vec<String> = ctx
            .list::<KernelParamStatus>(&ListOptions::default())
            .await?
            .iter()
            .filter(|param| param.unsupported)
            .map(|param| param.id().to_owned())
            .collect();
        if !unsupported.is_empty() {
            condition("sysctls", format!("not supported by the kernel: {}", unsupported.join(", ")));
        }

        let ready = unmet.is_empty();
        let before = ctx.get::<MachineStatus>("machine").await.ignore_not_found()?.map(|status| status.stage);
        let stage = match (before, ready) {
            (Some(MachineStage::Running), _) | (_, true) => MachineStage::Running,
            _ => MachineStage::Booting,
        };
        let status = MachineStatus { stage, ready, unmet_conditions: unmet };
        // The file first: whoever sees the resource change finds the file written.
        let json = serde_json::to_string_pretty(&status).unwrap_or_default();
        self.env.sandbox.write_atomic(MACHINE_STATUS_JSON, &format!("{json}\n"), 0o644)?;
        ctx.modify::<MachineStatus>("machine", |stored| *stored.spec_mut() = status.clone()).await?;
        let unmet = status.unmet_conditions;

        if before != Some(MachineStage::Running) && stage == MachineStage::Running {
            self.banner();
        } else if self.ready.is_some_and(|was| was != ready) {
            match ready {
                true => tracing::info!("the machine is ready again"),
                false => {
                    let reasons: Vec<String> =
                        unmet.iter().map(|condition| format!("{}: {}", condition.name, condition.reason)).collect();
                    tracing::warn!("the machine is not ready: {}", reasons.join("; "));
                }
            }
        }
        self.ready = Some(ready);
        Ok(())
    }

    fn banner(&self) {
        let socket = self.env.sandbox.root().join(SOCKET);
        let mut banner = String::new();
        let _ = writeln!(banner, "the machine is running (booted in {:.1?})", self.booted.elapsed());
        let _ = write!(banner, "  look at it: cosictl -e unix:{} get ms", socket.display());
        if let Some(url) = &self.env.ui_url {
            let _ = write!(banner, "\n  watch it live: {url}");
        }
        let line = "=".repeat(64);
        tracing::info!("{line}");
        for text in banner.lines() {
            tracing::info!("{text}");
        }
        tracing::info!("{line}");
    }
}
