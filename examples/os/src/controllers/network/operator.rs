//! `network.OperatorSpecController`: the network operators (a fake DHCP client).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cosi::controller::Waker;
use cosi::prelude::*;
use parking_lot::Mutex;

use crate::controllers::network::{layered, write_address};
use crate::env::Env;
use crate::error::Error;
use crate::resources::{AddressSpec, ConfigLayer, LinkStatus, NETWORK_CONFIG, OperatorSpec, ResolverSpec};

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
