//! The network controllers: sources become layered specs in
//! `network-config`, the layers are merged into `network`, and the merged
//! specs are applied to the fake kernel, whose state is observed back.
//!
//! ```text
//! machine.yaml, cmdline ─▶ NetworkConfig ─┐
//! platform.json ────────▶ PlatformConfig ─┼─▶ network-config ─▶ merges ─▶ network ─▶ HostnameSpec / AddressSpec
//! links ─▶ OperatorSpec (fake DHCP) ──────┘                                            (proc/sys, run/kernel/net.json)
//! run/kernel/net.json ─▶ LinkStatus ─▶ LinkStatus, AddressStatus ─▶ back to the sources, EtcFile, time
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cosi::controller::{Merge, Waker};
use cosi::prelude::*;
use parking_lot::Mutex;

use crate::controllers::MERGES;
use crate::env::{Env, PLATFORM_JSON};
use crate::error::Error;
use crate::kernel::{KernelError, NET_FILE};
use crate::machine_config::FileMode;
use crate::platform::PlatformConfig;
use crate::resources::{
    AddressSpec, AddressStatus, ConfigLayer, EtcFileSpec, HostnameSpec, HostnameStatus, LinkStatus, MachineConfig,
    NETWORK, NETWORK_CONFIG, OperatorSpec, PlatformMetadata, ResolverSpec,
};
use crate::watch::FileWatch;

/// The fallback DNS server of the default layer.
const DEFAULT_NAMESERVER: &str = "8.8.8.8";

/// The name the platform layer is published under.
const PLATFORM_NAME: &str = "sandbox";

/// A resource of type `T` in `network-config`.
fn layered<T: Resource>(id: &str) -> Pointer {
    Pointer::new(NETWORK_CONFIG, T::TYPE, id)
}

/// `demo-node.lab.local` as (`demo-node`, `lab.local`).
fn split_hostname(name: &str) -> (String, String) {
    match name.split_once('.') {
        Some((host, domain)) => (host.to_owned(), domain.to_owned()),
        None => (name.to_owned(), String::new()),
    }
}

/// The sources of the default, cmdline and configuration layers: an
/// automatic hostname from the first address, fallback DNS, the kernel
/// command line, and `machine.yaml` (hostname, DNS, static addresses, and a
/// DHCP operator per interface that asks for one).
#[controller(
    name = "network.NetworkConfigController",
    inputs = [Weak<MachineConfig>(id = "active"), Weak<AddressStatus>, Weak<LinkStatus>],
    outputs = [Shared<HostnameSpec>, Shared<ResolverSpec>, Shared<AddressSpec>, Exclusive<OperatorSpec>],
    inventory = false,
)]
#[derive(Default)]
pub struct NetworkConfigController {
    env: Env,
}

impl NetworkConfigController {
    /// The controller, with the command line of `env`.
    pub fn new(env: Env) -> Self {
        NetworkConfigController { env }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;
        let addresses = ctx.list::<AddressStatus>(&ListOptions::default()).await?;
        let links = ctx.list::<LinkStatus>(&ListOptions::default()).await?;

        // Default layer: a name from the first address, and fallback DNS.
        if let Some(address) = addresses.iter().find(|address| !address.is_loopback()) {
            let name = format!("node-{}", address.ip().replace(['.', ':'], "-"));
            write_hostname(ctx, ConfigLayer::Default, &name).await?;
        }
        write_resolvers(ctx, ConfigLayer::Default, &[DEFAULT_NAMESERVER.to_owned()], &[]).await?;

        // Cmdline layer.
        let cmdline = &self.env.cmdline;
        if let Some(hostname) = &cmdline.hostname {
            write_hostname(ctx, ConfigLayer::Cmdline, hostname).await?;
        }
        if !cmdline.nameservers.is_empty() {
            write_resolvers(ctx, ConfigLayer::Cmdline, &cmdline.nameservers, &[]).await?;
        }

        // Configuration layer.
        if let Some(machine) = &machine {
            let config = &machine.config;
            if let Some(hostname) = &config.hostname {
                write_hostname(ctx, ConfigLayer::Configuration, hostname.as_str()).await?;
            }
            let network = &config.network;
            if !network.nameservers.is_empty() || !network.search_domains.is_empty() {
                let nameservers: Vec<String> = network.nameservers.iter().map(ToString::to_string).collect();
                write_resolvers(ctx, ConfigLayer::Configuration, &nameservers, &network.search_domains).await?;
            }
            for interface in &network.interfaces {
                let link = interface.name.as_str();
                for address in &interface.addresses {
                    write_address(
                        ctx,
                        ConfigLayer::Configuration.id(&format!("{link}/{address}")),
                        link,
                        address.as_str(),
                        ConfigLayer::Configuration,
                    )
                    .await?;
                }
                // An operator runs on a link the kernel has; when the link
                // appears, its status wakes this controller.
                if interface.dhcp && links.iter().any(|status| status.id() == link) {
                    ctx.modify::<OperatorSpec>(format!("dhcp4/{link}").as_str(), |operator| {
                        operator.link = link.to_owned();
                        operator.require_up = true;
                    })
                    .await?;
                }
            }
        }

        ctx.cleanup_outputs_in::<HostnameSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs_in::<ResolverSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs_in::<AddressSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs::<OperatorSpec>().await?;
        Ok(())
    }
}

/// The platform layer: `platform.json` (a file watch wakes it), as layered
/// specs and `PlatformMetadata/platform`. A file that does not parse is
/// reported and changes nothing; a missing one removes the layer.
#[controller(
    name = "network.PlatformConfigController",
    outputs = [Shared<HostnameSpec>, Shared<ResolverSpec>, Shared<AddressSpec>, Exclusive<PlatformMetadata>],
    inventory = false,
)]
#[derive(Default)]
pub struct PlatformConfigController {
    env: Env,
    watch: Option<FileWatch>,
    /// The text last read (`Some(None)`: the file was missing).
    last_read: Option<Option<String>>,
    /// The last platform that parsed, kept while the file is invalid.
    platform: Option<PlatformConfig>,
}

impl PlatformConfigController {
    /// The controller for the sandbox of `env`.
    pub fn new(env: Env) -> Self {
        PlatformConfigController { env, watch: None, last_read: None, platform: None }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        if self.watch.is_none() {
            let waker = ctx.waker();
            let root = self.env.sandbox.root();
            let watch =
                FileWatch::start(&self.env.tasks, root, PLATFORM_JSON, self.env.timings.file_debounce, move || {
                    waker.wake()
                })
                .map_err(|source| Error::Watch { path: root.display().to_string(), source })?;
            self.watch = Some(watch);
        }
        let text = self.env.sandbox.read(PLATFORM_JSON)?;
        if self.last_read.as_ref() != Some(&text) {
            self.platform = match &text {
                None => {
                    tracing::info!("{PLATFORM_JSON} is missing: no platform layer");
                    None
                }
                Some(text) => match PlatformConfig::parse(text) {
                    Ok(platform) => {
                        tracing::info!("read {PLATFORM_JSON}");
                        Some(platform)
                    }
                    Err(error) => {
                        tracing::error!("{PLATFORM_JSON} is invalid, keeping the last good platform metadata: {error}");
                        self.last_read = Some(Some(text.clone()));
                        // Writing nothing and cleaning nothing up keeps every output as it is.
                        return Ok(());
                    }
                },
            };
            self.last_read = Some(text);
        }
        if let Some(platform) = &self.platform {
            if let Some(hostname) = &platform.hostname {
                write_hostname(ctx, ConfigLayer::Platform, hostname.as_str()).await?;
            }
            if !platform.dns.is_empty() {
                let dns: Vec<String> = platform.dns.iter().map(ToString::to_string).collect();
                write_resolvers(ctx, ConfigLayer::Platform, &dns, &[]).await?;
            }
            for address in &platform.addresses {
                let (link, cidr) = (address.link.as_str(), address.address.as_str());
                write_address(
                    ctx,
                    ConfigLayer::Platform.id(&format!("{link}/{cidr}")),
                    link,
                    cidr,
                    ConfigLayer::Platform,
                )
                .await?;
            }
            let instance_id = platform.instance_id.clone().unwrap_or_default();
            ctx.modify::<PlatformMetadata>("platform", |metadata| {
                metadata.platform = PLATFORM_NAME.to_owned();
                metadata.instance_id.clone_from(&instance_id);
            })
            .await?;
        }
        ctx.cleanup_outputs_in::<HostnameSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs_in::<ResolverSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs_in::<AddressSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs::<PlatformMetadata>().await?;
        Ok(())
    }
}

/// What the fake DHCP server leased on a link.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Lease {
    /// The operator run that got it: a lease of a stopped run is ignored.
    run: u64,
    address: String,
    dns: Vec<String>,
}

/// One running operator.
struct Operator {
    spec: OperatorSpec,
    index: u32,
    run: u64,
    _task: crate::tasks::Task,
}

/// Runs the network operators: for each `OperatorSpec` whose link is up, a
/// fake DHCP client task that leases `10.0.<index>.15/24` (DNS
/// `10.0.<index>.3`) after the DHCP delay. When the lease arrives, the task
/// wakes the controller, which publishes its address and DNS server in the
/// operator layer; when the link goes down or the spec goes away, the task
/// stops and its specs are removed. The fake server sends no hostname, so
/// the operator layer has none. The lease never expires: the task only logs
/// a renewal (at debug level) every `dhcp_renew`, which changes nothing.
#[controller(
    name = "network.OperatorSpecController",
    inputs = [Weak<OperatorSpec>, Weak<LinkStatus>],
    outputs = [Shared<ResolverSpec>, Shared<AddressSpec>],
    inventory = false,
)]
#[derive(Default)]
pub struct OperatorSpecController {
    env: Env,
    operators: BTreeMap<String, Operator>,
    leases: Arc<Mutex<BTreeMap<String, Lease>>>,
}

/// Numbers operator runs, so that a lease is tied to the run that got it.
static RUNS: AtomicU64 = AtomicU64::new(1);

impl OperatorSpecController {
    /// The controller, with the DHCP delays of `env`.
    pub fn new(env: Env) -> Self {
        OperatorSpecController { env, operators: BTreeMap::new(), leases: Arc::default() }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let links: BTreeMap<String, Typed<LinkStatus>> = ctx
            .list::<LinkStatus>(&ListOptions::default())
            .await?
            .into_iter()
            .map(|link| (link.id().to_owned(), link))
            .collect();
        let mut wanted = BTreeMap::new();
        for spec in ctx.list::<OperatorSpec>(&ListOptions::default()).await? {
            if spec.metadata().phase() != Phase::Running {
                continue;
            }
            let Some(link) = links.get(&spec.link) else { continue };
            if link.up || !spec.require_up {
                wanted.insert(spec.id().to_owned(), (spec.spec().clone(), link.index));
            }
        }

        // Stop what is no longer wanted (or wanted differently).
        let stale: Vec<String> = self
            .operators
            .iter()
            .filter(|(id, operator)| wanted.get(*id) != Some(&(operator.spec.clone(), operator.index)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            if let Some(operator) = self.operators.remove(&id) {
                let reason = match links.get(&operator.spec.link) {
                    Some(link) if !link.up => "the link is down",
                    None => "the link is gone",
                    Some(_) => "its spec changed or was removed",
                };
                tracing::info!("DHCP on {} stopped: {reason}", operator.spec.link);
            }
            self.leases.lock().remove(&id);
        }
        // Start what is wanted and not running.
        for (id, (spec, index)) in wanted {
            if self.operators.contains_key(&id) {
                continue;
            }
            let run = RUNS.fetch_add(1, Ordering::Relaxed);
            tracing::info!("DHCP on {} started", spec.link);
            let task = self.env.tasks.spawn(dhcp_client(
                id.clone(),
                spec.link.clone(),
                index,
                run,
                self.env.timings,
                Arc::clone(&self.leases),
                ctx.waker(),
            ));
            self.operators.insert(id, Operator { spec, index, run, _task: task });
        }

        // Publish the leases of the runs that are current.
        let leases: Vec<(String, Lease)> =
            self.leases.lock().iter().map(|(id, lease)| (id.clone(), lease.clone())).collect();
        for (id, lease) in leases {
            let Some(operator) = self.operators.get(&id).filter(|operator| operator.run == lease.run) else { continue };
            let link = &operator.spec.link;
            let prefix = ConfigLayer::Operator.id(&id);
            write_address(ctx, format!("{prefix}/{}", lease.address), link, &lease.address, ConfigLayer::Operator)
                .await?;
            ctx.modify::<ResolverSpec>(layered::<ResolverSpec>(&format!("{prefix}/resolvers")), |spec| {
                spec.nameservers.clone_from(&lease.dns);
                spec.search_domains.clear();
                spec.layer = ConfigLayer::Operator;
            })
            .await?;
        }
        ctx.cleanup_outputs_in::<ResolverSpec>(NETWORK_CONFIG).await?;
        ctx.cleanup_outputs_in::<AddressSpec>(NETWORK_CONFIG).await?;
        Ok(())
    }
}

/// The fake DHCP client of one link: a lease after the DHCP delay, then a
/// renewal logged every `dhcp_renew` (the lease never expires or changes).
async fn dhcp_client(
    id: String,
    link: String,
    index: u32,
    run: u64,
    timings: crate::env::Timings,
    leases: Arc<Mutex<BTreeMap<String, Lease>>>,
    waker: Waker,
) {
    let lease = Lease { run, address: format!("10.0.{index}.15/24"), dns: vec![format!("10.0.{index}.3")] };
    tokio::time::sleep(timings.dhcp_lease).await;
    tracing::info!("DHCP on {link}: leased {}, DNS {}", lease.address, lease.dns.join(", "));
    leases.lock().insert(id, lease.clone());
    waker.wake();
    loop {
        tokio::time::sleep(timings.dhcp_renew).await;
        tracing::debug!("DHCP on {link}: renewed {}", lease.address);
    }
}

/// `network.HostnameMergeController`: the highest layer's hostname wins.
pub fn hostname_merge() -> Merge<HostnameSpec> {
    Merge::new(MERGES[0], NETWORK_CONFIG, NETWORK, |spec: &Typed<HostnameSpec>| {
        ("hostname".to_owned(), spec.layer.rank())
    })
}

/// `network.ResolverMergeController`: the highest layer with nameservers
/// gives them; search domains add up, lowest layer first.
pub fn resolver_merge() -> Merge<ResolverSpec> {
    Merge::new(MERGES[1], NETWORK_CONFIG, NETWORK, |spec: &Typed<ResolverSpec>| {
        ("resolvers".to_owned(), spec.layer.rank())
    })
    .with_merge(|merged: &mut ResolverSpec, layer: &ResolverSpec| {
        if !layer.nameservers.is_empty() {
            merged.nameservers.clone_from(&layer.nameservers);
            merged.layer = layer.layer;
        }
        for domain in &layer.search_domains {
            if !merged.search_domains.contains(domain) {
                merged.search_domains.push(domain.clone());
            }
        }
    })
}

/// `network.AddressMergeController`: one address per link and CIDR, from the highest layer.
pub fn address_merge() -> Merge<AddressSpec> {
    Merge::new(MERGES[2], NETWORK_CONFIG, NETWORK, |spec: &Typed<AddressSpec>| (spec.merged_id(), spec.layer.rank()))
}

/// Applies the merged hostname: writes `proc/sys/kernel/hostname` (and
/// `domainname`) and reports it as `HostnameStatus/hostname`. Holds a
/// finalizer on the spec while it is applied.
#[controller(
    name = "network.HostnameSpecController",
    inputs = [Strong<HostnameSpec>],
    outputs = [Exclusive<HostnameStatus>],
    inventory = false,
)]
#[derive(Default)]
pub struct HostnameSpecController {
    env: Env,
}

impl HostnameSpecController {
    /// The controller for the sandbox of `env`.
    pub fn new(env: Env) -> Self {
        HostnameSpecController { env }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let finalizer = ctx.name().to_owned();
        for spec in ctx.list::<HostnameSpec>(&ListOptions::default()).await? {
            match spec.metadata().phase() {
                Phase::Running => {
                    if !spec.metadata().finalizers().has(&finalizer) {
                        ctx.add_finalizers(&spec, &[&finalizer]).await?;
                    }
                    let domainname = if spec.domainname.is_empty() { "(none)" } else { &spec.domainname };
                    self.env.sandbox.write_existing("proc/sys/kernel/hostname", &format!("{}\n", spec.hostname))?;
                    self.env.sandbox.write_existing("proc/sys/kernel/domainname", &format!("{domainname}\n"))?;
                    let before = ctx.get::<HostnameStatus>(spec.id()).await.ignore_not_found()?;
                    let status = ctx
                        .modify::<HostnameStatus>(spec.id(), |status| {
                            status.hostname.clone_from(&spec.hostname);
                            status.domainname.clone_from(&spec.domainname);
                        })
                        .await?;
                    if before.as_ref().map(|before| before.fqdn()) != Some(status.fqdn()) {
                        tracing::info!("hostname is now {} (from the {} layer)", status.fqdn(), spec.layer.as_str());
                    }
                }
                Phase::TearingDown if spec.metadata().finalizers().has(&finalizer) => {
                    ctx.destroy::<HostnameStatus>(spec.id()).await.ignore_not_found()?;
                    ctx.remove_finalizers(&spec, &[&finalizer]).await?;
                }
                Phase::TearingDown => (),
            }
        }
        Ok(())
    }
}

/// Applies merged addresses to the fake kernel: adds each to
/// `run/kernel/net.json`, holding a finalizer on its spec, and removes it
/// when the spec tears down. It has no outputs: what the kernel has is
/// observed by `network.LinkStatusController`.
///
/// A `net.json` the user broke (or removed) does not make it fail: it says
/// so once, and a watch on the file wakes it when the file changes, to apply
/// what it could not.
#[controller(name = "network.AddressSpecController", inputs = [Strong<AddressSpec>], inventory = false)]
#[derive(Default)]
pub struct AddressSpecController {
    env: Env,
    /// Started the first time the file cannot be read.
    watch: Option<FileWatch>,
    /// The file's error last reported, so a wake-up with the same one says nothing again.
    last_error: Option<String>,
}

impl AddressSpecController {
    /// The controller for the kernel of `env`.
    pub fn new(env: Env) -> Self {
        AddressSpecController { env, watch: None, last_error: None }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let finalizer = ctx.name().to_owned();
        let mut errors = Vec::new();
        // Why `net.json` cannot be edited now, if it cannot.
        let mut unreadable = None;
        for spec in ctx.list::<AddressSpec>(&ListOptions::default()).await? {
            match spec.metadata().phase() {
                Phase::Running => {
                    if !spec.metadata().finalizers().has(&finalizer) {
                        ctx.add_finalizers(&spec, &[&finalizer]).await?;
                    }
                    if unreadable.is_some() {
                        continue;
                    }
                    match self.env.kernel.add_address(&spec.link, &spec.address) {
                        Ok(true) => tracing::info!("added {} to {}", spec.address, spec.link),
                        Ok(false) => (),
                        Err(error @ KernelError::NoSuchLink { .. }) => errors.push(error.to_string()),
                        Err(error @ (KernelError::Invalid { .. } | KernelError::Missing)) => {
                            unreadable = Some(error.to_string());
                        }
                        Err(error) => return Err(error.into()),
                    }
                }
                Phase::TearingDown if spec.metadata().finalizers().has(&finalizer) => {
                    if unreadable.is_some() {
                        continue;
                    }
                    match self.env.kernel.remove_address(&spec.link, &spec.address) {
                        Ok(removed) => {
                            if removed {
                                tracing::info!("removed {} from {}", spec.address, spec.link);
                            }
                            ctx.remove_finalizers(&spec, &[&finalizer]).await?;
                        }
                        Err(error @ (KernelError::Invalid { .. } | KernelError::Missing)) => {
                            unreadable = Some(error.to_string());
                        }
                        Err(error) => return Err(error.into()),
                    }
                }
                Phase::TearingDown => (),
            }
        }
        match unreadable {
            Some(message) => {
                self.watch_net_file(ctx)?;
                if self.last_error.as_ref() != Some(&message) {
                    tracing::error!("cannot apply the addresses: {message}; they are applied when the file is fixed");
                    self.last_error = Some(message);
                }
            }
            None => self.last_error = None,
        }
        Error::from_list(errors)
    }

    /// Makes every change of `net.json` wake the controller, from now on.
    /// A new watch wakes it once too: the file may have been fixed between
    /// the read that failed and the watch's start, which no event reports.
    fn watch_net_file(&mut self, ctx: &Ctx<Self>) -> Result<(), Error> {
        if self.watch.is_none() {
            let waker = ctx.waker();
            let dir = self.env.sandbox.resolve("run/kernel")?;
            let name = NET_FILE.rsplit('/').next().unwrap_or(NET_FILE);
            let on_change = waker.clone();
            let watch =
                FileWatch::start(&self.env.tasks, &dir, name, self.env.timings.file_debounce, move || on_change.wake())
                    .map_err(|source| Error::Watch { path: dir.display().to_string(), source })?;
            self.watch = Some(watch);
            waker.wake();
        }
        Ok(())
    }
}

/// Observes the fake kernel: reads `run/kernel/net.json` at start and
/// whenever it changes (a file watch wakes it) and publishes every link and
/// address. A file that does not parse is reported and changes nothing.
#[controller(
    name = "network.LinkStatusController",
    outputs = [Exclusive<LinkStatus>, Exclusive<AddressStatus>],
    inventory = false,
)]
#[derive(Default)]
pub struct LinkStatusController {
    env: Env,
    watch: Option<FileWatch>,
    /// Whether each link was up when last seen, to report changes.
    up: BTreeMap<String, bool>,
    /// The last error reported, so a wake-up with the same one says nothing again.
    last_error: Option<String>,
}

impl LinkStatusController {
    /// The controller for the kernel of `env`.
    pub fn new(env: Env) -> Self {
        LinkStatusController { env, watch: None, up: BTreeMap::new(), last_error: None }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        if self.watch.is_none() {
            let waker = ctx.waker();
            let dir = self.env.sandbox.resolve("run/kernel")?;
            let name = NET_FILE.rsplit('/').next().unwrap_or(NET_FILE);
            let watch =
                FileWatch::start(&self.env.tasks, &dir, name, self.env.timings.file_debounce, move || waker.wake())
                    .map_err(|source| Error::Watch { path: dir.display().to_string(), source })?;
            self.watch = Some(watch);
        }
        let net = match self.env.kernel.read() {
            Ok(net) => net,
            Err(error @ (KernelError::Invalid { .. } | KernelError::Missing)) => {
                let message = error.to_string();
                if self.last_error.as_ref() != Some(&message) {
                    tracing::error!("{message}; the links and addresses stay as last seen");
                    self.last_error = Some(message);
                }
                return Ok(());
            }
            Err(error) => return Err(error.into()),
        };
        self.last_error = None;
        for link in &net.links {
            match self.up.insert(link.name.clone(), link.up) {
                Some(before) if before != link.up => {
                    tracing::info!("link {} is {}", link.name, if link.up { "up" } else { "down" });
                }
                _ => (),
            }
            ctx.modify::<LinkStatus>(link.name.as_str(), |status| {
                status.index = link.index;
                status.up = link.up;
                status.mac.clone_from(&link.mac);
                status.mtu = link.mtu;
            })
            .await?;
        }
        self.up.retain(|name, _| net.link(name).is_some());
        for address in &net.addresses {
            ctx.modify::<AddressStatus>(format!("{}/{}", address.link, address.address).as_str(), |status| {
                status.link.clone_from(&address.link);
                status.address.clone_from(&address.address);
            })
            .await?;
        }
        ctx.cleanup_outputs::<LinkStatus>().await?;
        ctx.cleanup_outputs::<AddressStatus>().await?;
        Ok(())
    }
}

/// Renders the network's files under `etc/`: `hostname`, `hosts` and
/// `resolv.conf`, as `EtcFileSpec`s for `files.EtcFileController` to write.
#[controller(
    name = "network.EtcFileController",
    inputs = [
        Weak<HostnameStatus>(id = "hostname"),
        Weak<ResolverSpec>(id = "resolvers"),
        Weak<AddressStatus>,
        Weak<MachineConfig>(id = "active"),
    ],
    outputs = [Shared<EtcFileSpec>],
    inventory = false,
)]
#[derive(Default)]
pub struct EtcFileController;

/// The files `network.EtcFileController` writes; `machine.yaml` cannot name them.
pub const NETWORK_FILES: &[&str] = &["hostname", "hosts", "resolv.conf"];

impl EtcFileController {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let hostname = ctx.get::<HostnameStatus>("hostname").await.ignore_not_found()?;
        let resolvers = ctx.get::<ResolverSpec>("resolvers").await.ignore_not_found()?;
        let addresses = ctx.list::<AddressStatus>(&ListOptions::default()).await?;
        let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;

        if let Some(hostname) = &hostname {
            write_file(ctx, "hostname", format!("{}\n", hostname.hostname)).await?;
            let mut hosts = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
            let names = match hostname.domainname.is_empty() {
                true => hostname.hostname.clone(),
                false => format!("{} {}", hostname.fqdn(), hostname.hostname),
            };
            if let Some(address) = addresses.iter().find(|address| !address.is_loopback()) {
                hosts.push_str(&format!("{}\t{names}\n", address.ip()));
            }
            for entry in machine.iter().flat_map(|machine| &machine.config.network.extra_host_entries) {
                hosts.push_str(&format!("{}\t{}\n", entry.ip, entry.aliases.join(" ")));
            }
            write_file(ctx, "hosts", hosts).await?;
        }
        if let Some(resolvers) = &resolvers {
            let mut conf = String::new();
            for nameserver in &resolvers.nameservers {
                conf.push_str(&format!("nameserver {nameserver}\n"));
            }
            if !resolvers.search_domains.is_empty() {
                conf.push_str(&format!("search {}\n", resolvers.search_domains.join(" ")));
            }
            write_file(ctx, "resolv.conf", conf).await?;
        }
        Ok(())
    }
}

async fn write_file<C>(ctx: &Ctx<C>, id: &str, contents: String) -> cosi::Result<()>
where
    EtcFileSpec: cosi::controller::Writes<C>,
{
    ctx.modify::<EtcFileSpec>(id, move |file| {
        file.contents.clone_from(&contents);
        file.mode = FileMode(0o644);
    })
    .await
    .map(drop)
}

async fn write_hostname<C>(ctx: &Ctx<C>, layer: ConfigLayer, name: &str) -> cosi::Result<()>
where
    HostnameSpec: cosi::controller::Writes<C>,
{
    let (hostname, domainname) = split_hostname(name);
    ctx.modify::<HostnameSpec>(layered::<HostnameSpec>(&layer.id("hostname")), move |spec| {
        spec.hostname.clone_from(&hostname);
        spec.domainname.clone_from(&domainname);
        spec.layer = layer;
    })
    .await
    .map(drop)
}

async fn write_resolvers<C>(
    ctx: &Ctx<C>,
    layer: ConfigLayer,
    nameservers: &[String],
    search_domains: &[String],
) -> cosi::Result<()>
where
    ResolverSpec: cosi::controller::Writes<C>,
{
    ctx.modify::<ResolverSpec>(layered::<ResolverSpec>(&layer.id("resolvers")), |spec| {
        spec.nameservers = nameservers.to_vec();
        spec.search_domains = search_domains.to_vec();
        spec.layer = layer;
    })
    .await
    .map(drop)
}

async fn write_address<C>(ctx: &Ctx<C>, id: String, link: &str, address: &str, layer: ConfigLayer) -> cosi::Result<()>
where
    AddressSpec: cosi::controller::Writes<C>,
{
    ctx.modify::<AddressSpec>(layered::<AddressSpec>(&id), |spec| {
        spec.link = link.to_owned();
        spec.address = address.to_owned();
        spec.layer = layer;
    })
    .await
    .map(drop)
}
