//! The example OS end to end, as a user drives it: boot in a temporary
//! sandbox (with no fake delays), edit `machine.yaml`, `platform.json` and
//! `run/kernel/net.json`, and check both the resources (read over gRPC on the
//! sandbox's socket, as `cosictl` reads them) and the files in the sandbox.
//!
//! Nothing here sleeps to synchronize: every wait is a watch for a condition
//! (over gRPC), or the runtime settling ([`Runtime::settled`]) once such a
//! condition shows the work has begun, each bounded by [`WAIT`]. Only edits
//! that by design change nothing (an invalid `machine.yaml`, and undoing
//! one) are waited for by their log lines. Logs are captured per test: each test runs on a
//! current-thread runtime with its own subscriber, so the lines it looks for
//! are its own OS's.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cosi::prelude::*;
use cosi::runtime::{BackoffOptions, ControllerStatus, RUNTIME_NAMESPACE};
use cosi::state::{EventType, META_NAMESPACE};
use cosi_grpc::testing::Pki;
use cosi_grpc::{ADMIN_ROLE, Client, ClientSecurity, READER_ROLE, Security, Server};
use example_os::resources::{
    AddressSpec, AddressStatus, EtcFileSpec, EtcFileStatus, HostnameSpec, HostnameStatus, KernelParamStatus,
    LinkStatus, MachineConfig, MachineStage, MachineStatus, NETWORK_CONFIG, ResolverSpec, ServiceState, ServiceStatus,
    TimeStatus,
};
use example_os::{Options, Os, Timings};
use parking_lot::Mutex;

/// The longest any one condition may take to come true. Generous: the
/// machine this runs on may be busy building other things.
const WAIT: Duration = Duration::from_secs(30);

/// A booted OS in a temporary directory, with a gRPC client on its socket.
struct Machine {
    dir: tempfile::TempDir,
    os: Option<Os>,
    client: Client,
    logs: Logs,
}

impl Machine {
    async fn boot(logs: &Logs) -> Machine {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (os, client) = boot_in(&dir.path().join("sandbox")).await;
        Machine { dir, os: Some(os), client, logs: logs.clone() }
    }

    fn os(&self) -> &Os {
        self.os.as_ref().expect("the OS runs")
    }

    fn sandbox(&self) -> PathBuf {
        self.dir.path().join("sandbox")
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.sandbox().join(path)).unwrap_or_else(|error| panic!("read {path}: {error}"))
    }

    fn exists(&self, path: &str) -> bool {
        self.sandbox().join(path).exists()
    }

    /// Saves a file as an editor does: a new file renamed over the old one.
    fn save(&self, path: &str, contents: &str) {
        self.logs.act();
        let target = self.sandbox().join(path);
        let swap = target.with_extension("swp");
        std::fs::write(&swap, contents).expect("write the new version");
        std::fs::rename(&swap, &target).expect("rename it into place");
    }

    /// Rewrites a file in place, as `echo > file` does.
    fn overwrite(&self, path: &str, contents: &str) {
        self.logs.act();
        let mut file = std::fs::File::create(self.sandbox().join(path)).expect("open for writing");
        file.write_all(contents.as_bytes()).expect("write");
    }

    /// Edits a file, replacing `from` (which must be there) by `to`.
    fn edit(&self, path: &str, from: &str, to: &str) {
        let text = self.read(path);
        assert!(text.contains(from), "{path} does not contain {from:?}:\n{text}");
        self.save(path, &text.replacen(from, to, 1));
    }

    /// Waits until the resource at `at` meets `predicate`; returns it.
    async fn until<T: Resource>(
        &self,
        at: impl cosi::resource::At<T>,
        what: &str,
        predicate: impl Fn(&Typed<T>) -> bool + Send + Sync + 'static,
    ) -> Typed<T> {
        let pointer = at.pointer();
        let condition = WatchCondition::new().resource(predicate);
        match tokio::time::timeout(WAIT, self.client.watch_for::<T>(&pointer, condition)).await {
            Ok(Ok(event)) => event.resource().cloned().expect("an event with a resource"),
            Ok(Err(error)) => panic!("waiting for {what}: {error}"),
            Err(_) => panic!("{what}: not within {WAIT:?}; {pointer} is {:?}", self.client.get::<T>(&pointer).await),
        }
    }

    /// Waits until the resource at `at` does not exist.
    async fn until_gone<T: Resource>(&self, at: impl cosi::resource::At<T>, what: &str) {
        let pointer = at.pointer();
        let condition = WatchCondition::new().event_types([EventType::Destroyed]);
        match tokio::time::timeout(WAIT, self.client.watch_for::<T>(&pointer, condition)).await {
            Ok(Ok(_)) => (),
            Ok(Err(error)) => panic!("waiting for {what}: {error}"),
            Err(_) => panic!("{what}: not within {WAIT:?}; {pointer} is {:?}", self.client.get::<T>(&pointer).await),
        }
    }

    /// Waits until the runtime has nothing left to do: what the last
    /// observed change set off has all been done (and logged). The OS's own
    /// background tasks (file events, DHCP, NTP) are outside the runtime, so
    /// this follows a wait for a condition that shows their effect began.
    async fn settled(&self) {
        tokio::time::timeout(WAIT, self.os().runtime().settled()).await.expect("the runtime settles in time");
    }

    /// Once the runtime has settled, the line logged since the last action
    /// that contains every one of `parts`.
    async fn logged(&self, parts: &[&str]) -> String {
        self.logged_since(self.logs.action.load(std::sync::atomic::Ordering::SeqCst), parts).await
    }

    /// Once the runtime has settled, the line logged since `from` (a
    /// [`Logs::mark`]) that contains every one of `parts`.
    async fn logged_since(&self, from: usize, parts: &[&str]) -> String {
        self.settled().await;
        match self.logs.find(from, parts) {
            Some(line) => line,
            None => panic!("no log line with {parts:?}; logged:\n{}", self.logs.lines.lock()[from..].join("")),
        }
    }

    async fn restart(&mut self, between: impl FnOnce(&Path)) {
        self.logs.act();
        self.os.take().expect("the OS runs").shutdown().await.expect("a clean shutdown");
        between(&self.sandbox());
        let (os, client) = boot_in(&self.sandbox()).await;
        self.os = Some(os);
        self.client = client;
    }
}

async fn boot_in(sandbox: &Path) -> (Os, Client) {
    // Failing controllers and crashing services retry quickly, so the test does not wait on backoff.
    let backoff = BackoffOptions {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(1),
        ..BackoffOptions::default()
    };
    let options = Options::new(sandbox).timings(Timings::instant()).backoff(backoff);
    let os = Os::boot(options).await.expect("the OS boots");
    let client = Client::connect(os.endpoint(), ClientSecurity::Insecure).await.expect("the client connects");
    (os, client)
}

/// The log lines of one test.
#[derive(Clone, Default)]
struct Logs {
    lines: Arc<Mutex<Vec<String>>>,
    added: Arc<tokio::sync::Notify>,
    /// Where the last action (an edit, a restart) started: what it caused is logged after.
    action: Arc<std::sync::atomic::AtomicUsize>,
}

impl Logs {
    /// Captures the logs of this thread until the guard drops.
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let logs = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_env_filter(example_os::logging::DEFAULT_FILTER)
            .with_writer(move || LogWriter(logs.clone()))
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Waits for a line that contains every one of `parts`, logged since the last action.
    async fn until(&self, parts: &[&str]) -> String {
        self.until_since(self.action.load(std::sync::atomic::Ordering::SeqCst), parts).await
    }

    /// Notes that an action starts: [`until`](Logs::until) looks at what is logged from here.
    fn act(&self) {
        self.action.store(self.mark(), std::sync::atomic::Ordering::SeqCst);
    }

    /// The first line logged since `from` (a [`mark`](Logs::mark)) that contains every one of `parts`.
    fn find(&self, from: usize, parts: &[&str]) -> Option<String> {
        self.lines.lock()[from..].iter().find(|line| parts.iter().all(|part| line.contains(part))).cloned()
    }

    /// Waits for a line that contains every one of `parts`, logged since `from` (a [`mark`](Logs::mark)).
    async fn until_since(&self, from: usize, parts: &[&str]) -> String {
        let found = async {
            loop {
                let added = self.added.notified();
                if let Some(line) = self.find(from, parts) {
                    return line;
                }
                added.await;
            }
        };
        match tokio::time::timeout(WAIT, found).await {
            Ok(line) => line,
            Err(_) => {
                panic!("no log line with {parts:?} within {WAIT:?}; logged:\n{}", self.lines.lock()[from..].join(""))
            }
        }
    }

    fn mark(&self) -> usize {
        self.lines.lock().len()
    }

    /// Whether a line since `mark` contains `part`.
    fn since(&self, mark: usize, part: &str) -> bool {
        self.lines.lock()[mark..].iter().any(|line| line.contains(part))
    }
}

struct LogWriter(Logs);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lines.lock().push(String::from_utf8_lossy(buf).into_owned());
        self.0.added.notify_waiters();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Boot: every resource and file the starter `machine.yaml` asks for, then
/// the six steps of the guided demo, then a restart.
#[tokio::test(flavor = "current_thread")]
async fn the_guided_tour() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let mut machine = Machine::boot(&logs).await;

    booted(&machine).await;
    step_1_hostname_layers(&machine).await;
    step_2_unplug_eth0(&machine).await;
    step_3_remove_motd(&machine).await;
    step_4_bogus_sysctl(&machine).await;
    step_5_flaky_service_and_unsynced_time(&machine).await;
    step_6_definitions(&machine).await;
    invalid_yaml_keeps_the_last_good_configuration(&machine).await;
    restart_keeps_the_configuration(&mut machine).await;

    machine.os.take().expect("the OS runs").shutdown().await.expect("a clean shutdown");
    assert!(!machine.exists(example_os::SOCKET), "the socket is removed at shutdown");
    // Nothing says the machine is still up: `run/` goes, as a tmpfs would.
    assert!(!machine.exists(example_os::MACHINE_STATUS_JSON), "the machine's status is cleared at shutdown");
    assert!(!machine.exists("run/services/web.pid"), "no pid file outlives its service");
}

async fn booted(machine: &Machine) {
    let status =
        machine.until::<MachineStatus>("machine", "the machine runs", |s| s.stage == MachineStage::Running).await;
    assert!(status.ready, "{status:?}");
    assert!(machine.logged_since(0, &["the machine is running"]).await.contains("booted in"));

    // The socket is the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(machine.sandbox().join(example_os::SOCKET)).expect("the socket").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // Network: the configuration layer's hostname, DNS and static address, and the DHCP lease.
    let hostname = machine.client.get::<HostnameStatus>("hostname").await.expect("hostname");
    assert_eq!(hostname.hostname, "demo-node");
    assert_eq!(machine.read("etc/hostname"), "demo-node\n");
    assert_eq!(machine.read("proc/sys/kernel/hostname"), "demo-node\n");
    assert_eq!(machine.read("etc/resolv.conf"), "nameserver 9.9.9.9\nsearch lab.local\n");
    let dhcp = machine.until::<AddressStatus>("eth0/10.0.2.15/24", "the DHCP lease", |_| true).await;
    assert_eq!(dhcp.link, "eth0");
    machine.until::<AddressStatus>("eth1/192.168.50.10/24", "the static address", |_| true).await;
    let net = machine.read("run/kernel/net.json");
    assert!(net.contains(r#""link":"eth0","address":"10.0.2.15/24""#), "{net}");
    assert!(net.contains(r#""link":"eth1","address":"192.168.50.10/24""#), "{net}");
    // The merged spec carries the finalizer of the controller that applied it.
    let merged = machine.client.get::<AddressSpec>("eth0/10.0.2.15/24").await.expect("the merged address spec");
    assert!(merged.metadata().finalizers().has("network.AddressSpecController"), "{merged:?}");
    assert!(machine.read("etc/hosts").contains("demo-node"));

    // Files, sysctls, services, time.
    assert_eq!(machine.read("etc/motd"), "Welcome to the example OS\n");
    assert_eq!(machine.read("proc/sys/net/ipv4/ip_forward"), "1\n");
    assert_eq!(machine.read("proc/sys/vm/swappiness"), "10\n");
    let time = machine.client.get::<TimeStatus>("node").await.expect("time");
    assert!(time.synced && time.servers == ["time.example.org"], "{time:?}");
    let web = machine.client.get::<ServiceStatus>("web").await.expect("web");
    assert_eq!(web.state, ServiceState::Running);
    let pid = web.pid.expect("a pid");
    assert_eq!(machine.read("run/services/web.pid"), format!("{pid}\n"));
    assert!(machine.read("var/log/services/web.log").contains(&format!("started (pid {pid})")));
    let json: serde_json::Value = serde_json::from_str(&machine.read("run/machine-status.json")).expect("JSON");
    assert_eq!(json["stage"], "running");
}

/// Step 1: without `hostname:`, the platform's wins; without the
/// platform's, the command line's.
async fn step_1_hostname_layers(machine: &Machine) {
    machine.edit("machine.yaml", "hostname: demo-node", "");
    machine
        .until_gone::<HostnameSpec>(
            Pointer::new(NETWORK_CONFIG, HostnameSpec::TYPE, "configuration/hostname"),
            "the configuration layer's hostname is cleaned up",
        )
        .await;
    machine.until::<HostnameStatus>("hostname", "the platform's hostname", |s| s.hostname == "platform-host").await;
    assert_eq!(machine.read("proc/sys/kernel/hostname"), "platform-host\n");
    assert_eq!(machine.written("hostname", "platform-host").await, "platform-host\n");
    assert!(machine.written("hosts", "platform-host").await.contains("\tplatform-host\n"));

    // In place, as `echo > platform.json` writes it.
    machine.overwrite("platform.json", r#"{"dns":["169.254.169.253"],"instanceId":"i-123"}"#);
    machine.until::<HostnameStatus>("hostname", "the command line's hostname", |s| s.hostname == "cmdline-host").await;
    assert_eq!(machine.read("proc/sys/kernel/hostname"), "cmdline-host\n");
    assert_eq!(machine.written("hostname", "cmdline-host").await, "cmdline-host\n");
}

impl Machine {
    /// Waits until the file `etc/<id>` is written with contents that contain
    /// `part` (its spec has them, and its status says that version is on
    /// disk); returns the file.
    async fn written(&self, id: &str, part: &str) -> String {
        let part = part.to_owned();
        let what = format!("etc/{id} with {part:?}");
        let spec = self.until::<EtcFileSpec>(id, &what, move |s| s.contents.contains(&part)).await;
        let version = spec.metadata().version().get().expect("a stored version");
        self.until::<EtcFileStatus>(id, &what, move |s| s.spec_version >= version).await;
        self.read(&format!("etc/{id}"))
    }
}

/// Step 2: unplugging eth0 stops DHCP; its layered specs go, and so does
/// the address in the kernel. Plugging it back brings the lease back.
async fn step_2_unplug_eth0(machine: &Machine) {
    let eth0 = r#""name":"eth0","index":2,"up":true"#;
    machine.edit("run/kernel/net.json", eth0, &eth0.replace("true", "false"));
    machine.until::<LinkStatus>("eth0", "eth0 is down", |s| !s.up).await;
    machine.logged(&["DHCP on eth0 stopped", "down"]).await;
    let layered = |r#type: &str, id: &str| Pointer::new(NETWORK_CONFIG, r#type, id);
    machine
        .until_gone::<AddressSpec>(
            layered(AddressSpec::TYPE, "operator/dhcp4/eth0/10.0.2.15/24"),
            "the operator's address",
        )
        .await;
    machine
        .until_gone::<ResolverSpec>(layered(ResolverSpec::TYPE, "operator/dhcp4/eth0/resolvers"), "the operator's DNS")
        .await;
    machine.until_gone::<AddressSpec>("eth0/10.0.2.15/24", "the merged address").await;
    machine.until_gone::<AddressStatus>("eth0/10.0.2.15/24", "the kernel's address").await;
    assert!(!machine.read("run/kernel/net.json").contains("10.0.2.15"));

    machine.edit("run/kernel/net.json", &eth0.replace("true", "false"), eth0);
    machine.until::<AddressStatus>("eth0/10.0.2.15/24", "the lease again", |_| true).await;
}

/// Step 3: removing `motd` from `files:` tears its spec down; the file goes,
/// then the finalizer, then the spec.
async fn step_3_remove_motd(machine: &Machine) {
    let mut watch =
        machine.client.watch::<EtcFileSpec>("motd", WatchOptions::default()).await.expect("a watch on the motd spec");
    machine.edit("machine.yaml", "  - { path: motd, mode: 0644, content: \"Welcome to the example OS\\n\" }\n", "");
    let mut torn_down_with_finalizer = false;
    let gone = async {
        while let Some(event) = watch.recv().await {
            match event {
                Event::Updated { resource, .. } if resource.metadata().phase() == Phase::TearingDown => {
                    torn_down_with_finalizer |= resource.metadata().finalizers().has("files.EtcFileController");
                }
                Event::Destroyed { .. } => return,
                _ => (),
            }
        }
        panic!("the watch ended");
    };
    tokio::time::timeout(WAIT, gone).await.expect("the motd spec is destroyed");
    assert!(torn_down_with_finalizer, "the spec tore down while files.EtcFileController held it");
    assert!(!machine.exists("etc/motd"));
    machine.until_gone::<EtcFileStatus>("motd", "the motd status").await;
}

/// Step 4: an unknown sysctl makes its controller fail and restart with
/// backoff while the other keys are applied; removing it, it recovers.
async fn step_4_bogus_sysctl(machine: &Machine) {
    machine.edit("machine.yaml", "vm.swappiness: \"10\" }", "vm.swappiness: \"10\", vm.bogus: \"1\" }");
    machine.until::<KernelParamStatus>("vm.bogus", "the unsupported key", |s| s.unsupported).await;
    let status =
        controller_status(machine, "runtime.KernelParamSpecController", |s| s.restarts >= 2 && !s.healthy).await;
    assert!(status.last_error.as_deref().is_some_and(|error| error.contains("vm.bogus")), "{status:?}");
    machine.logged(&["reconcile failed; restarting", "runtime.KernelParamSpecController", "delay"]).await;
    assert_eq!(machine.read("proc/sys/vm/swappiness"), "10\n", "the other keys are still applied");
    assert!(!machine.exists("proc/sys/vm/bogus"), "no key is created");
    let status = machine
        .until::<MachineStatus>("machine", "the unmet sysctl", |s| {
            s.unmet_conditions.iter().any(|c| c.name == "sysctls" && c.reason.contains("vm.bogus"))
        })
        .await;
    assert!(!status.ready, "{status:?}");

    machine.edit("machine.yaml", ", vm.bogus: \"1\"", "");
    machine.until_gone::<KernelParamStatus>("vm.bogus", "the removed key").await;
    controller_status(machine, "runtime.KernelParamSpecController", |s| s.healthy).await;
}

/// Step 5: `flaky` crashes and is restarted with backoff while `web` runs;
/// unanswered NTP servers leave the time unsynchronized, so `web` waits.
async fn step_5_flaky_service_and_unsynced_time(machine: &Machine) {
    let flaky = machine.until::<ServiceStatus>("flaky", "flaky restarted after a crash", |s| s.restarts >= 1).await;
    let web = machine.client.get::<ServiceStatus>("web").await.expect("web");
    assert_eq!(web.state, ServiceState::Running, "web runs while flaky crashes: {flaky:?}");
    assert!(machine.read("var/log/services/flaky.log").contains("simulated crash after 5s"));
    machine.logged_since(0, &["item failed; retrying", "runtime/flaky", "delay"]).await;

    machine.edit("machine.yaml", "servers: [time.example.org]", "servers: [ntp.invalid]");
    machine.until::<TimeStatus>("node", "unsynchronized time", |s| !s.synced && s.servers == ["ntp.invalid"]).await;
    let web = machine.until::<ServiceStatus>("web", "web waits", |s| s.state == ServiceState::Waiting).await;
    assert!(web.message.contains("time sync"), "{web:?}");
    assert!(!machine.exists("run/services/web.pid"));
    let status = machine
        .until::<MachineStatus>("machine", "the unmet time", |s| s.unmet_conditions.iter().any(|c| c.name == "time"))
        .await;
    assert_eq!(status.stage, MachineStage::Running, "the stage stays running: {status:?}");
    machine.logged(&["no NTP server answers", "ntp.invalid"]).await;

    machine.edit("machine.yaml", "servers: [ntp.invalid]", "servers: [time.example.org]");
    machine.until::<ServiceStatus>("web", "web runs again", |s| s.state == ServiceState::Running).await;
}

/// Step 6: every type is defined in `meta`, with its aliases.
async fn step_6_definitions(machine: &Machine) {
    let definitions = machine
        .client
        .list_in::<cosi::ResourceDefinition>(META_NAMESPACE, &ListOptions::default())
        .await
        .expect("the definitions");
    for definition in example_os::resources::definitions() {
        let served = definitions.iter().find(|d| d.r#type == definition.r#type);
        let served = served.unwrap_or_else(|| panic!("{} is not defined", definition.r#type));
        assert_eq!(served.aliases, definition.aliases);
        assert_eq!(served.sensitivity, definition.sensitivity);
    }
    for (alias, r#type) in [
        ("mc", MachineConfig::TYPE),
        ("svc", ServiceStatus::TYPE),
        ("ms", MachineStatus::TYPE),
        ("time", TimeStatus::TYPE),
        ("links", LinkStatus::TYPE),
    ] {
        let owners: Vec<&str> = definitions
            .iter()
            .filter(|d| d.all_aliases.iter().any(|a| a == alias))
            .map(|d| d.r#type.as_str())
            .collect();
        assert_eq!(owners, [r#type], "alias {alias}");
    }
}

/// A broken `machine.yaml` is reported with its line and column, and
/// nothing changes; fixing it is picked up.
async fn invalid_yaml_keeps_the_last_good_configuration(machine: &Machine) {
    let before = machine.client.get::<MachineConfig>(MachineConfig::ID).await.expect("the configuration");
    let good = machine.read("machine.yaml");
    machine.save("machine.yaml", &format!("{good}hostnmae: typo\n"));
    let line = machine.logs.until(&["machine.yaml is invalid", "keeping the last good configuration"]).await;
    assert!(line.contains("unknown field `hostnmae`") && line.contains("line") && line.contains("column"), "{line}");
    let after = machine.client.get::<MachineConfig>(MachineConfig::ID).await.expect("the configuration");
    assert_eq!(after.metadata().version(), before.metadata().version());

    // Undoing the typo is said too, though the configuration in force does not change.
    machine.save("machine.yaml", &good);
    machine.logs.until(&["machine.yaml is valid again", "unchanged"]).await;
    let after = machine.client.get::<MachineConfig>(MachineConfig::ID).await.expect("the configuration");
    assert_eq!(after.metadata().version(), before.metadata().version());

    machine.save("machine.yaml", &format!("hostname: fixed-node\n{good}"));
    machine.until::<HostnameStatus>("hostname", "the fixed file", |s| s.hostname == "fixed-node").await;
}

/// The configuration survives a restart, even when `machine.yaml` is broken
/// at boot: the stored one is kept.
async fn restart_keeps_the_configuration(machine: &mut Machine) {
    machine
        .restart(|sandbox| std::fs::write(sandbox.join("machine.yaml"), "hostname: [broken\n").expect("break it"))
        .await;
    machine.until::<MachineStatus>("machine", "the machine runs again", |s| s.stage == MachineStage::Running).await;
    let line = machine.logged(&["machine.yaml is invalid"]).await;
    assert!(line.contains("line 2") || line.contains("line 1"), "{line}");
    let hostname = machine.client.get::<HostnameStatus>("hostname").await.expect("hostname");
    assert_eq!(hostname.hostname, "fixed-node", "the configuration of the last boot");
    let config = machine.client.get::<MachineConfig>(MachineConfig::ID).await.expect("the configuration");
    assert!(config.raw.starts_with("hostname: fixed-node"), "{}", config.raw);

    // A missing machine.yaml is restored from the store.
    machine.restart(|sandbox| std::fs::remove_file(sandbox.join("machine.yaml")).expect("remove it")).await;
    machine.until::<HostnameStatus>("hostname", "the restored configuration", |s| s.hostname == "fixed-node").await;
    assert!(machine.read("machine.yaml").starts_with("hostname: fixed-node"));
}

/// The status the runtime publishes for `controller` once it meets `predicate`.
async fn controller_status(
    machine: &Machine,
    controller: &str,
    predicate: impl Fn(&Typed<ControllerStatus>) -> bool + Send + Sync + 'static,
) -> Typed<ControllerStatus> {
    let pointer = Pointer::new(RUNTIME_NAMESPACE, ControllerStatus::TYPE, controller);
    machine.until::<ControllerStatus>(pointer, controller, predicate).await
}

/// The sandbox is its owner's only (0700), and so is `machine.yaml` (0600):
/// the configuration is sensitive. A sandbox or a `machine.yaml` that group
/// or others could read, made before, is made private at boot, with a warning.
#[tokio::test(flavor = "current_thread")]
async fn the_sandbox_and_the_configuration_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let logs = Logs::default();
    let _capture = logs.capture();
    let mode = |path: &Path| std::fs::metadata(path).expect("stat").permissions().mode() & 0o777;

    let mut machine = Machine::boot(&logs).await;
    assert_eq!(mode(&machine.sandbox()), 0o700, "a new sandbox");
    assert_eq!(mode(&machine.sandbox().join("machine.yaml")), 0o600, "the starter machine.yaml");

    machine
        .restart(|sandbox| {
            std::fs::set_permissions(sandbox, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            let config = sandbox.join("machine.yaml");
            std::fs::set_permissions(config, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        })
        .await;
    assert_eq!(mode(&machine.sandbox()), 0o700, "an existing sandbox");
    assert_eq!(mode(&machine.sandbox().join("machine.yaml")), 0o600, "an existing machine.yaml");
    let line = logs.until(&["machine.yaml", "made it 600"]).await;
    assert!(line.contains("WARN") && line.contains("644"), "{line}");
    let line = logs.until(&["sandbox", "made it 700"]).await;
    assert!(line.contains("WARN") && line.contains("755"), "{line}");

    // A machine.yaml restored from the store is private too.
    machine.restart(|sandbox| std::fs::remove_file(sandbox.join("machine.yaml")).expect("rm")).await;
    assert_eq!(mode(&machine.sandbox().join("machine.yaml")), 0o600, "a restored machine.yaml");
    machine.os.take().expect("the OS runs").shutdown().await.expect("a clean shutdown");
}

/// A directory that is not a sandbox (`--sandbox ~`, say) is refused, and
/// nothing in it is touched: each boot deletes and rebuilds its sandbox's
/// `proc/`, `run/` and `etc/`.
#[tokio::test(flavor = "current_thread")]
async fn a_directory_that_is_not_a_sandbox_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(dir.path().join("etc")).expect("etc/");
    std::fs::write(dir.path().join("etc/keep"), "mine\n").expect("etc/keep");

    let error = Os::boot(Options::new(dir.path()).timings(Timings::instant())).await.expect_err("not a sandbox");
    assert!(error.to_string().contains("is not a sandbox"), "{error}");
    assert_eq!(std::fs::read_to_string(dir.path().join("etc/keep")).expect("etc/keep survives"), "mine\n");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["etc"], "nothing is written");
}

/// A `machine.yaml` that names a file outside `etc/` is refused with a clear
/// error, and so is a file behind a link that leads out; nothing is written
/// outside the sandbox.
#[tokio::test(flavor = "current_thread")]
async fn paths_that_escape_the_sandbox_are_refused() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let machine = Machine::boot(&logs).await;
    machine.until::<MachineStatus>("machine", "the machine runs", |s| s.stage == MachineStage::Running).await;
    let before = machine.client.get::<MachineConfig>(MachineConfig::ID).await.expect("the configuration");

    let good = machine.read("machine.yaml");
    machine.save("machine.yaml", &good.replace("path: motd", "path: ../../x"));
    let line = logs.until(&["machine.yaml is invalid"]).await;
    assert!(line.contains("../../x") && line.contains("`..`") && line.contains("line"), "{line}");
    let after = machine.client.get::<MachineConfig>(MachineConfig::ID).await.expect("the configuration");
    assert_eq!(after.metadata().version(), before.metadata().version(), "the last good configuration stays");

    // A link planted in etc/ that points out of the sandbox.
    let outside = machine.dir.path().join("outside");
    std::fs::create_dir(&outside).expect("a directory outside");
    std::os::unix::fs::symlink(&outside, machine.sandbox().join("etc/evil")).expect("plant the link");
    let mark = logs.mark();
    machine.save("machine.yaml", &good.replace("path: motd", "path: evil/motd"));
    let status = controller_status(&machine, "files.EtcFileController", |s| {
        s.last_error.as_deref().is_some_and(|error| error.contains("leads outside the sandbox"))
    })
    .await;
    assert!(status.last_error.as_deref().is_some_and(|error| error.contains("etc/evil")), "{status:?}");
    assert!(!logs.since(mark, "wrote etc/evil"));

    assert!(!machine.dir.path().join("x").exists(), "nothing is written outside");
    assert_eq!(std::fs::read_dir(&outside).expect("list").count(), 0, "nothing is written through the link");
}

/// A reader (mutual TLS with the reader role) sees the OS's resources but
/// not the sensitive ones, as Talos' access policy has it.
#[tokio::test(flavor = "current_thread")]
async fn sensitive_resources_are_hidden_from_readers() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let machine = Machine::boot(&logs).await;
    machine.until::<MachineConfig>(MachineConfig::ID, "the configuration", |_| true).await;

    let pki = Pki::new("example OS test CA");
    let listening = Server::new(Arc::clone(machine.os().state()))
        .bind(&"tcp://127.0.0.1:0".parse().expect("an endpoint"), Security::MutualTls(pki.server_tls()))
        .await
        .expect("the TLS server binds");
    let endpoint = listening.endpoint().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listening.serve_with_shutdown(async {
        let _ = stopped.await;
    }));
    let client = |role: &str| Client::connect(&endpoint, ClientSecurity::MutualTls(pki.client_tls(&[role])));
    let reader = client(READER_ROLE).await.expect("the reader connects");
    let admin = client(ADMIN_ROLE).await.expect("the admin connects");

    let denied = reader.get::<MachineConfig>(MachineConfig::ID).await.expect_err("a reader cannot read mc");
    assert!(denied.is_access_denied(), "the reader is denied: {denied:?}");
    admin.get::<MachineConfig>(MachineConfig::ID).await.expect("an admin reads mc");
    machine.until::<HostnameStatus>("hostname", "the hostname", |_| true).await;
    reader.get::<HostnameStatus>("hostname").await.expect("a reader reads the hostname");

    let _ = stop.send(());
    server.await.expect("the server task").expect("the server stops");
}

/// A memory state whose first write of a `MachineConfig` fails, as a full
/// disk would fail the configuration store's commit.
struct FirstConfigWriteFails {
    inner: Arc<dyn State>,
    failed: std::sync::atomic::AtomicBool,
}

impl FirstConfigWriteFails {
    fn check(&self, resource: &DynamicResource) -> cosi::Result<()> {
        let config = resource.metadata().r#type() == MachineConfig::TYPE;
        match config && !self.failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            true => Err(cosi::Error::backend(std::io::Error::other("injected: the disk is full"))),
            false => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl State for FirstConfigWriteFails {
    async fn get_dynamic(&self, pointer: &Pointer) -> cosi::Result<DynamicResource> {
        self.inner.get_dynamic(pointer).await
    }
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> cosi::Result<Vec<DynamicResource>> {
        self.inner.list_dynamic(kind, options).await
    }
    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> cosi::Result<DynamicResource> {
        self.check(&resource)?;
        self.inner.create_dynamic(resource, options).await
    }
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> cosi::Result<DynamicResource> {
        self.check(&resource)?;
        self.inner.update_dynamic(resource, options).await
    }
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> cosi::Result<()> {
        self.inner.destroy_dynamic(pointer, options).await
    }
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> cosi::Result<cosi::state::Watch> {
        self.inner.watch_dynamic(pointer, options).await
    }
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<cosi::state::Watch> {
        self.inner.watch_kind_dynamic(kind, options).await
    }
}

/// A configuration whose write fails is not lost: the controller restarts
/// with backoff, reads the same `machine.yaml` again, and stores it.
#[tokio::test(flavor = "current_thread")]
async fn a_failed_configuration_write_is_retried() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sandbox = example_os::sandbox::SandboxRoot::open(dir.path()).expect("the sandbox");
    sandbox.write_atomic(example_os::MACHINE_YAML, "hostname: kept\n", 0o644).expect("machine.yaml");
    let env = example_os::Env::new(
        sandbox,
        Timings::instant(),
        example_os::tasks::Tasks::default(),
        example_os::platform::Cmdline::default(),
    );
    let state: Arc<dyn State> =
        Arc::new(FirstConfigWriteFails { inner: cosi::state::memory(), failed: Default::default() });
    let mut options = cosi::runtime::RuntimeOptions::default();
    options.backoff = BackoffOptions { initial: Duration::from_millis(10), ..BackoffOptions::default() };
    let runtime = Runtime::with_options(Arc::clone(&state), options);
    runtime
        .register(example_os::controllers::config::MachineConfigController::new(env.clone()))
        .expect("the controller registers");
    runtime.start().expect("the runtime starts");

    let stored = WatchCondition::new().resource(|_: &Typed<MachineConfig>| true);
    let waited = tokio::time::timeout(WAIT, state.watch_for::<MachineConfig>(MachineConfig::ID, stored)).await;
    let status = state.get::<ControllerStatus>(Pointer::new(
        RUNTIME_NAMESPACE,
        ControllerStatus::TYPE,
        "config.MachineConfigController",
    ));
    let status = status.await.ok();
    runtime.shutdown().await;
    env.tasks.shutdown().await;
    let event = waited.unwrap_or_else(|_| panic!("the configuration is never stored; the controller: {status:?}"));
    let config = event.expect("a watch").resource().cloned().expect("the configuration");
    assert_eq!(config.raw, "hostname: kept\n");
    assert!(status.is_some_and(|status| status.restarts >= 1), "the first write failed");
}

/// A service that keeps crashing waits longer before each restart: its
/// crashes in a row are counted, so its backoff grows instead of starting
/// over at each restart.
#[tokio::test(flavor = "current_thread")]
async fn a_crashing_service_waits_longer_each_time() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sandbox = dir.path().join("sandbox");
    std::fs::create_dir(&sandbox).expect("the sandbox");
    let yaml = example_os::machine_config::STARTER.replace("crashAfter: 5s", "crashAfter: 50ms");
    std::fs::write(sandbox.join("machine.yaml"), yaml).expect("machine.yaml");
    let backoff = BackoffOptions {
        initial: Duration::from_millis(100),
        multiplier: 2.0,
        jitter: 0.0,
        max: Duration::from_secs(5),
    };
    let options = Options::new(&sandbox).timings(Timings::instant()).backoff(backoff);
    let os = Os::boot(options).await.expect("the OS boots");
    let client = Client::connect(os.endpoint(), ClientSecurity::Insecure).await.expect("the client connects");

    // When each process of `flaky` starts (a new pid, running).
    let mut watch = client.watch::<ServiceStatus>("flaky", WatchOptions::default()).await.expect("a watch");
    let mut starts = Vec::new();
    let mut pids = std::collections::BTreeSet::new();
    let started = async {
        while starts.len() < 6 {
            let Some(event) = watch.recv().await else { panic!("the watch ended") };
            if let Some(status) = event.resource()
                && status.state == ServiceState::Running
                && status.pid.is_some_and(|pid| pids.insert(pid))
            {
                starts.push(tokio::time::Instant::now());
            }
        }
    };
    tokio::time::timeout(WAIT, started).await.expect("flaky restarts five times");
    os.shutdown().await.expect("a clean shutdown");

    // Each crash in a row waits twice as long as the one before (no jitter
    // here), as the log says: read there, not off the wall clock, which a
    // loaded machine stretches.
    let delays: Vec<f64> = logs
        .lines
        .lock()
        .iter()
        .filter(|line| line.contains("service flaky crashed"))
        .filter_map(|line| line.rsplit(" in ").next().and_then(|delay| seconds(delay.trim())))
        .collect();
    assert!(delays.len() >= 5, "a logged delay per crash: {delays:?}");
    for pair in delays[..5].windows(2) {
        assert!((pair[1] / pair[0] - 2.0).abs() < 0.01, "each restart waits twice as long: {delays:?}");
    }
}

/// A wake-up while a crashed service waits for its restart (here, its spec
/// edited) starts nothing before the restart is due.
#[tokio::test(flavor = "current_thread")]
async fn a_crashed_service_restarts_no_sooner_than_due_whatever_wakes_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sandbox = dir.path().join("sandbox");
    std::fs::create_dir(&sandbox).expect("the sandbox");
    let yaml = example_os::machine_config::STARTER.replace("crashAfter: 5s", "crashAfter: 50ms");
    std::fs::write(sandbox.join("machine.yaml"), &yaml).expect("machine.yaml");
    let delay = Duration::from_secs(2);
    let backoff = BackoffOptions { initial: delay, multiplier: 2.0, jitter: 0.0, max: Duration::from_secs(10) };
    let options = Options::new(&sandbox).timings(Timings::instant()).backoff(backoff);
    let os = Os::boot(options).await.expect("the OS boots");
    let client = Client::connect(os.endpoint(), ClientSecurity::Insecure).await.expect("the client connects");

    let mut watch = client.watch::<ServiceStatus>("flaky", WatchOptions::default()).await.expect("a watch");
    let mut next = async |what: &str, matches: &dyn Fn(&ServiceStatus) -> bool| loop {
        let event = tokio::time::timeout(WAIT, watch.recv()).await.unwrap_or_else(|_| panic!("{what}: not in time"));
        let event = event.unwrap_or_else(|| panic!("{what}: the watch ended"));
        if let Some(status) = event.resource()
            && matches(status)
        {
            return (tokio::time::Instant::now(), status.pid);
        }
    };
    let (_, first) = next("the first start", &|status| status.state == ServiceState::Running).await;
    let (crashed, _) = next("the first crash", &|status| status.state == ServiceState::Crashed).await;
    // The edit changes its spec, which wakes the controller at once.
    std::fs::write(sandbox.join("machine.yaml"), yaml.replace("crashAfter: 50ms", "crashAfter: 60ms"))
        .expect("machine.yaml");
    let (restarted, second) = next("the restart", &|status| {
        status.state == ServiceState::Running && status.pid.is_some() && status.pid != first
    })
    .await;
    os.shutdown().await.expect("a clean shutdown");
    // Seen after the crash, so less than the whole wait: at least half of it.
    assert!(restarted - crashed >= delay / 2, "restarted {:?} after the crash", restarted - crashed);
    assert_ne!(second, first);
}

/// A service whose log or pid file cannot be written or removed says so in
/// the OS's log: its heartbeat once until it can write again, its stop each time.
#[tokio::test(flavor = "current_thread")]
async fn a_service_that_cannot_write_its_files_says_so() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sandbox = dir.path().join("sandbox");
    std::fs::create_dir(&sandbox).expect("the sandbox");
    let yaml = example_os::machine_config::STARTER.replace("crashAfter: 5s", "heartbeat: 20ms");
    std::fs::write(sandbox.join("machine.yaml"), &yaml).expect("machine.yaml");
    let options = Options::new(&sandbox).timings(Timings::instant());
    let os = Os::boot(options).await.expect("the OS boots");
    let client = Client::connect(os.endpoint(), ClientSecurity::Insecure).await.expect("the client connects");
    let running = WatchCondition::new().resource(|status: &Typed<ServiceStatus>| status.state == ServiceState::Running);
    tokio::time::timeout(WAIT, client.watch_for::<ServiceStatus>("flaky", running))
        .await
        .expect("flaky runs in time")
        .expect("a watch");

    // Its log is a directory now: the next heartbeat cannot be written.
    let log = sandbox.join("var/log/services/flaky.log");
    std::fs::remove_file(&log).expect("remove the log");
    std::fs::create_dir(&log).expect("a directory in its place");
    let line = logs.until_since(0, &["service flaky cannot write its heartbeat", "var/log/services/flaky.log"]).await;
    assert!(line.contains("WARN"), "{line}");

    // Its pid file cannot be removed when it stops.
    let pid = sandbox.join("run/services/flaky.pid");
    std::fs::remove_file(&pid).expect("remove the pid file");
    std::fs::create_dir_all(pid.join("held")).expect("a directory in its place");
    logs.act();
    std::fs::write(sandbox.join("machine.yaml"), yaml.replace("  - { name: flaky, heartbeat: 20ms }\n", ""))
        .expect("machine.yaml without flaky");
    logs.until(&["service flaky stopped, but its pid file stays", "run/services/flaky.pid"]).await;
    logs.until(&["service flaky cannot log its stop", "var/log/services/flaky.log"]).await;
    let heartbeats = logs.lines.lock().iter().filter(|line| line.contains("cannot write its heartbeat")).count();
    assert_eq!(heartbeats, 1, "once, however many heartbeats failed");
    os.shutdown().await.expect("a clean shutdown");
}

/// Seconds from a duration as `{:.1?}` writes it: `200.0ms`, `1.6s`.
fn seconds(text: &str) -> Option<f64> {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic() || c == 'µ')?);
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" => 1e-6,
        _ => return None,
    };
    number.parse::<f64>().ok().map(|number| number * scale)
}

/// A `net.json` the user broke makes no controller fail: the address that
/// cannot be applied meanwhile is reported, and applied once the file is fixed.
#[tokio::test(flavor = "current_thread")]
async fn a_broken_net_json_fails_no_controller() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let machine = Machine::boot(&logs).await;
    machine.until::<AddressStatus>("eth1/192.168.50.10/24", "the static address", |_| true).await;
    machine.settled().await;
    let good = machine.read("run/kernel/net.json");

    machine.overwrite("run/kernel/net.json", "{ not json");
    machine.logs.until(&["net.json is invalid", "the links and addresses stay as last seen"]).await;
    machine.edit("machine.yaml", "addresses: [192.168.50.10/24]", "addresses: [192.168.50.10/24, 192.168.60.10/24]");
    machine.until::<AddressSpec>("eth1/192.168.60.10/24", "the new address's spec", |_| true).await;
    let line = machine.logged(&["cannot apply the addresses", "when the file is fixed"]).await;
    assert!(line.contains("net.json is invalid"), "{line}");
    let status = controller_status(&machine, "network.AddressSpecController", |_| true).await;
    assert!(status.healthy && status.restarts == 0 && status.last_error.is_none(), "{status:?}");

    machine.save("run/kernel/net.json", &good);
    machine.until::<AddressStatus>("eth1/192.168.60.10/24", "the new address", |_| true).await;
    assert!(machine.read("run/kernel/net.json").contains("192.168.60.10/24"));
    let status = controller_status(&machine, "network.AddressSpecController", |_| true).await;
    assert_eq!(status.restarts, 0, "{status:?}");
}
