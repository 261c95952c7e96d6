//! Booting and stopping the OS: the sandbox, the state, the controllers and
//! the gRPC server, in that order, and back.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use cosi::prelude::*;
use cosi::runtime::{BackoffOptions, RuntimeOptions};
use cosi::state::{MemoryState, NamespacedState};
use cosi_grpc::{Endpoint, Security, Server};
use cosi_redb::RedbState;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::env::{CMDLINE, Env, MACHINE_YAML, PLATFORM_JSON, SOCKET, Timings};
use crate::error::Error;
use crate::kernel::{Kernel, SYSCTL_DEFAULTS};
use crate::machine_config::STARTER;
use crate::platform::{Cmdline, STARTER_CMDLINE, STARTER_PLATFORM};
use crate::resources::{CONFIG, MachineConfig, register_namespaces};
use crate::sandbox::SandboxRoot;
use crate::tasks::Tasks;

/// Where the `config` namespace is kept, in the sandbox.
pub const CONFIG_STORE: &str = "var/lib/cosi/config.redb";

/// How long shutdown waits for gRPC calls in flight before it drops them.
const SERVER_GRACE: Duration = Duration::from_secs(3);

/// COSI's backoff (500 ms, times 1.5), capped at 10 s: a controller or a
/// service retries at least that often.
pub(crate) fn default_backoff() -> BackoffOptions {
    BackoffOptions { max: Duration::from_secs(10), ..BackoffOptions::default() }
}

/// How to boot.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The sandbox directory, created on first boot.
    pub sandbox: PathBuf,
    /// The fake delays.
    pub timings: Timings,
    /// The backoff of failing controllers and service restarts: COSI's,
    /// capped at 10 s (not 60 s), so that a fixed mistake is picked up
    /// within seconds.
    pub backoff: BackoffOptions,
    /// Where to serve the live page (`cosi-ui`), if at all.
    pub ui: Option<SocketAddr>,
}

impl Options {
    /// Boots in `sandbox`, with the default timings.
    pub fn new(sandbox: impl Into<PathBuf>) -> Self {
        Options { sandbox: sandbox.into(), timings: Timings::default(), backoff: default_backoff(), ui: None }
    }

    /// With other timings ([`Timings::instant`] for tests).
    #[must_use]
    pub fn timings(mut self, timings: Timings) -> Self {
        self.timings = timings;
        self
    }

    /// Serving the live page on `address` (port 0: a free one).
    #[must_use]
    pub fn ui(mut self, address: SocketAddr) -> Self {
        self.ui = Some(address);
        self
    }

    /// With another backoff for failing controllers and crashing services.
    #[must_use]
    pub fn backoff(mut self, backoff: BackoffOptions) -> Self {
        self.backoff = backoff;
        self
    }
}

/// A booted OS: its controllers run and its state is served on
/// `<sandbox>/cosi.sock`. Stop it with [`shutdown`](Os::shutdown).
pub struct Os {
    env: Env,
    state: Arc<dyn State>,
    runtime: Runtime,
    endpoint: Endpoint,
    server: Option<Serving>,
    ui: Option<(String, Serving<cosi_ui::Error>)>,
    store: Weak<RedbState>,
}

/// The gRPC server's task, and how to stop it.
type Serving<E = cosi_grpc::ServeError> = (oneshot::Sender<()>, JoinHandle<Result<(), E>>);

impl std::fmt::Debug for Os {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Os").field("sandbox", &self.env.sandbox.root()).field("endpoint", &self.endpoint).finish()
    }
}

impl Os {
    /// Boots: opens (on first boot, creates) the sandbox, opens the state
    /// (the `config` namespace from its redb file), starts the controllers
    /// and serves the state over gRPC.
    pub async fn boot(options: Options) -> Result<Os, Error> {
        let sandbox = SandboxRoot::open(&options.sandbox)?;
        tracing::info!("booting the example OS in {}", sandbox.root().display());

        sandbox.create_dir_all("var/lib/cosi")?;
        let store_path = sandbox.resolve(CONFIG_STORE)?;
        // Opening reads the whole file, which blocks: on the blocking pool,
        // as `RedbState::open` asks, not on the runtime's threads.
        let opening = store_path.clone();
        let opened =
            match tokio::task::spawn_blocking(move || RedbState::open(opening, cosi_redb::Options::default())).await {
                Ok(opened) => opened,
                Err(error) => match error.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    // Not run: the process's runtime is shutting down.
                    Err(error) => return Err(cosi::Error::other(error).into()),
                },
            };
        let store = opened
            .map_err(|source| Error::Store { path: store_path.display().to_string(), source: Box::new(source) })?;
        let store = Arc::new(store);
        let durable: Arc<dyn State> = Arc::clone(&store) as Arc<dyn State>;
        let state: Arc<dyn State> = Arc::new(
            NamespacedState::new(|_| Arc::new(MemoryState::default()) as Arc<dyn State>)
                .with_namespace(CONFIG, durable),
        );

        prepare(&sandbox, &*state).await?;
        let cmdline = Cmdline::parse(&sandbox.read(CMDLINE)?.unwrap_or_default());
        let mut env = Env::new(sandbox, options.timings, Tasks::default(), cmdline);
        env.backoff = options.backoff;
        register_namespaces(&*state).await?;
        // Bound before the controllers start, so that the banner has its URL.
        let ui = match options.ui {
            Some(address) => {
                let ui = cosi_ui::Ui::new(Arc::clone(&state), cosi_ui::Config::default().listen(address));
                let listening = ui.bind().await?;
                env.ui_url = Some(listening.url());
                Some(listening)
            }
            None => None,
        };

        let mut runtime_options = RuntimeOptions::default();
        runtime_options.backoff = options.backoff;
        let runtime = Runtime::with_options(Arc::clone(&state), runtime_options);
        // The runtime publishes the definitions of the types its
        // controllers use (all 17) in `meta`, for `cosictl get`.
        crate::controllers::register(&runtime, &env)?;
        runtime.start()?;

        let endpoint = Endpoint::Unix(options.sandbox.join(SOCKET));
        let listening = match Server::new(Arc::clone(&state)).bind(&endpoint, Security::Insecure).await {
            Ok(listening) => listening,
            Err(error) => {
                runtime.shutdown().await;
                env.tasks.shutdown().await;
                return Err(error.into());
            }
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(listening.serve_with_shutdown(async {
            let _ = stopped.await;
        }));
        tracing::info!("serving the state on {endpoint} (try: cosictl -e {endpoint} get rd)");
        let ui = ui.map(|listening| {
            let url = listening.url();
            tracing::info!("serving the live page on {url}");
            let (stop, stopped) = oneshot::channel::<()>();
            let serving = tokio::spawn(listening.serve_with_shutdown(async {
                let _ = stopped.await;
            }));
            (url, (stop, serving))
        });
        Ok(Os { env, state, runtime, endpoint, server: Some((stop, server)), ui, store: Arc::downgrade(&store) })
    }

    /// The state: every resource of the OS.
    pub fn state(&self) -> &Arc<dyn State> {
        &self.state
    }

    /// The controller runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Where the state is served.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The live page's URL, when [`Options::ui`] asked for it.
    pub fn ui_url(&self) -> Option<&str> {
        self.ui.as_ref().map(|(url, _)| url.as_str())
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &SandboxRoot {
        &self.env.sandbox
    }

    /// Runs until `signal` completes, then shuts down.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<(), Error> {
        signal.await;
        self.shutdown().await
    }

    /// Stops serving, stops the controllers and the OS's tasks, clears
    /// `run/` as a tmpfs is cleared at power-off (the machine's status, the
    /// services' pid files, the fake kernel's links: nothing there may say
    /// the machine is still up), and closes the configuration store.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        tracing::info!("shutting down");
        if let Some((_, (stop, mut serving))) = self.ui.take() {
            let _ = stop.send(());
            if tokio::time::timeout(SERVER_GRACE, &mut serving).await.is_err() {
                serving.abort();
                let _ = serving.await;
            }
        }
        let served = match self.server.take() {
            Some((stop, mut server)) => {
                let _ = stop.send(());
                match tokio::time::timeout(SERVER_GRACE, &mut server).await {
                    Ok(Ok(result)) => result.map_err(Error::from),
                    Ok(Err(_panicked)) => Ok(()),
                    Err(_late) => {
                        server.abort();
                        let _ = server.await;
                        Ok(())
                    }
                }
            }
            None => Ok(()),
        };
        self.runtime.shutdown().await;
        self.env.tasks.shutdown().await;
        // Nothing writes in the sandbox any more.
        if let Err(error) = self.env.sandbox.remove_dir_all("run") {
            tracing::warn!("cannot clear run/: {error}");
        }
        let Os { state, runtime, store, env, .. } = self;
        drop((state, runtime, env));
        // Everything that held the state has ended, so the store's last
        // handle is gone and its file is closed; say so if not.
        if store.strong_count() > 0 {
            tracing::warn!("the configuration store is still open; it closes when the process exits");
        }
        tracing::info!("stopped");
        served
    }
}

/// Makes the sandbox ready for a boot. `machine.yaml`, `platform.json` and
/// `cmdline` are the user's and are written only when missing: the starters
/// on first boot, and `machine.yaml` as last accepted when the configuration
/// store has one. `proc/`, `run/` and `etc/` are the kernel's and the OS's:
/// rebuilt at every boot, as tmpfs would be.
async fn prepare(sandbox: &SandboxRoot, state: &dyn State) -> Result<(), Error> {
    // The configuration is sensitive (`MachineConfig` is): the owner's only.
    match sandbox.exists(MACHINE_YAML)? {
        true => sandbox.make_private(MACHINE_YAML)?,
        false => match state.get::<MachineConfig>(MachineConfig::ID).await {
            Ok(machine) => {
                sandbox.write_atomic(MACHINE_YAML, &machine.raw, 0o600)?;
                tracing::info!("{MACHINE_YAML} was missing: restored the last accepted one");
            }
            Err(error) if error.is_not_found() => {
                sandbox.write_atomic(MACHINE_YAML, STARTER, 0o600)?;
                tracing::info!("first boot: wrote the starter {}", Path::new(MACHINE_YAML).display());
            }
            Err(error) => return Err(error.into()),
        },
    }
    if !sandbox.exists(PLATFORM_JSON)? {
        sandbox.write_atomic(PLATFORM_JSON, STARTER_PLATFORM, 0o644)?;
    }
    if !sandbox.exists(CMDLINE)? {
        sandbox.write_atomic(CMDLINE, STARTER_CMDLINE, 0o644)?;
    }
    for dir in ["proc", "run", "etc"] {
        sandbox.remove_dir_all(dir)?;
    }
    for (key, value) in SYSCTL_DEFAULTS {
        sandbox.write_atomic(format!("proc/sys/{key}").as_str(), &format!("{value}\n"), 0o644)?;
    }
    for dir in ["run/kernel", "run/services", "etc", "var/log/services"] {
        sandbox.create_dir_all(dir)?;
    }
    Kernel::new(sandbox.clone()).reset()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_controller_or_service_retries_within_ten_seconds() {
        let options = Options::new("sandbox");
        assert_eq!(options.backoff.max, Duration::from_secs(10));
        assert_eq!(options.backoff.initial, BackoffOptions::default().initial);
    }
}
