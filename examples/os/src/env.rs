//! What the controllers share: the sandbox, the fake kernel, the background
//! tasks and the fake delays.

use std::time::Duration;

use cosi::runtime::BackoffOptions;

use crate::kernel::Kernel;
use crate::platform::Cmdline;
use crate::sandbox::SandboxRoot;
use crate::tasks::Tasks;

/// The fake delays and intervals of the OS. The defaults make a boot take a
/// couple of seconds, as a real one would; [`Timings::instant`] removes the
/// waits, for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timings {
    /// How long the fake DHCP server takes to answer.
    pub dhcp_lease: Duration,
    /// How often the fake DHCP client logs a renewal of its lease (at debug
    /// level; the lease never expires, so a renewal changes nothing).
    pub dhcp_renew: Duration,
    /// How long the fake NTP server takes to answer.
    pub ntp_sync: Duration,
    /// How long the fake NTP client waits before asking again when no server answers.
    pub ntp_retry: Duration,
    /// How long a file must be quiet after a change before it is read: an
    /// editor's save is several events.
    pub file_debounce: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            dhcp_lease: Duration::from_secs(1),
            dhcp_renew: Duration::from_secs(30),
            ntp_sync: Duration::from_secs(1),
            ntp_retry: Duration::from_secs(3),
            file_debounce: Duration::from_millis(30),
        }
    }
}

impl Timings {
    /// No fake delay: DHCP and NTP answer at once; retries stay short but
    /// not zero, so nothing spins.
    pub fn instant() -> Self {
        Timings {
            dhcp_lease: Duration::ZERO,
            dhcp_renew: Duration::from_secs(30),
            ntp_sync: Duration::ZERO,
            ntp_retry: Duration::from_millis(100),
            file_debounce: Duration::from_millis(30),
        }
    }
}

/// The environment of the controllers.
#[derive(Clone, Debug)]
pub struct Env {
    /// Where every file is.
    pub sandbox: SandboxRoot,
    /// The fake kernel's links and addresses.
    pub kernel: Kernel,
    /// The background tasks (file watches, DHCP clients, timers, services).
    pub tasks: Tasks,
    /// The fake delays.
    pub timings: Timings,
    /// The kernel command line, read at boot.
    pub cmdline: Cmdline,
    /// The live page's URL, when it is served: the banner shows it.
    pub ui_url: Option<String>,
    /// The backoff of crashing services (the runtime's, for failing controllers).
    pub backoff: BackoffOptions,
}

impl Env {
    /// The environment of a booted sandbox.
    pub fn new(sandbox: SandboxRoot, timings: Timings, tasks: Tasks, cmdline: Cmdline) -> Self {
        Env {
            kernel: Kernel::new(sandbox.clone()),
            sandbox,
            tasks,
            timings,
            cmdline,
            ui_url: None,
            backoff: crate::boot::default_backoff(),
        }
    }
}

/// The environment of `cargo run --example os`: `./sandbox`, default timings.
///
/// `cosi::system!` builds controllers with `Default`; the OS itself builds
/// them with the environment of its sandbox (see [`Os::boot`](crate::Os::boot)).
impl Default for Env {
    fn default() -> Self {
        Env::new(SandboxRoot::at("sandbox"), Timings::default(), Tasks::default(), Cmdline::default())
    }
}

/// The machine configuration the user edits, in the sandbox.
pub const MACHINE_YAML: &str = "machine.yaml";
/// The platform's metadata, in the sandbox.
pub const PLATFORM_JSON: &str = "platform.json";
/// The kernel command line, read at boot, in the sandbox.
pub const CMDLINE: &str = "cmdline";
/// The gRPC socket, in the sandbox.
pub const SOCKET: &str = "cosi.sock";
/// The machine's status as JSON, for scripts.
pub const MACHINE_STATUS_JSON: &str = "run/machine-status.json";
