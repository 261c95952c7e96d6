//! Recipe: a fleet reconciler. Machines report their version; rollouts say
//! which version a group of machines (a label) should run. A queue
//! controller reconciles one machine at a time, eight at once, and keeps an
//! `Upgrade` for each machine that is behind its group's rollout; a change of
//! a rollout is mapped to the machines of its group only.
//!
//! Run it with `cargo run --example fleet_reconciler`; the book's recipes
//! chapter draws its graph, and `cargo test -p cosi-book` runs it.

#![forbid(unsafe_code)]

use std::sync::Arc;

use cosi::prelude::*;
use cosi::runtime::Graph;

/// The label that puts machines and rollouts in a group.
pub const GROUP: &str = "fleet.example.org/group";

/// A machine of the fleet, as its agent reports it.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Machines.fleet.example.org", namespace = "fleet")]
pub struct Machine {
    pub version: String,
}

/// The version the machines of a group (the rollout's `GROUP` label) should run.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Rollouts.fleet.example.org", namespace = "fleet")]
pub struct Rollout {
    pub version: String,
}

/// An upgrade a machine's agent should carry out.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Upgrades.fleet.example.org", namespace = "fleet")]
pub struct Upgrade {
    pub from: String,
    pub to: String,
}

fn group(labels: &Labels) -> Option<&str> {
    labels.get(GROUP)
}

/// One machine at a time, eight at once; rollouts map to the machines they concern.
#[controller(
    name = "fleet.UpgradeController",
    inputs = [Primary<Machine>, Mapped<Rollout>],
    outputs = [Exclusive<Upgrade>],
    concurrency = 8,
)]
#[derive(Default)]
pub struct UpgradeController;

impl UpgradeController {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<()> {
        let target = match ctx.get::<Machine>(item).await {
            Ok(machine) => {
                let machine_group = group(machine.metadata().labels());
                let rollouts = ctx.list::<Rollout>(&ListOptions::default()).await?;
                let rollout = rollouts
                    .iter()
                    .find(|rollout| machine_group.is_some() && group(rollout.metadata().labels()) == machine_group);
                rollout
                    .filter(|rollout| rollout.version != machine.version)
                    .map(|rollout| (machine.version.clone(), rollout.version.clone()))
            }
            Err(error) if error.is_not_found() => None,
            Err(error) => return Err(error),
        };
        match target {
            Some((from, to)) => {
                ctx.modify::<Upgrade>(item.id(), |upgrade| {
                    upgrade.from.clone_from(&from);
                    upgrade.to.clone_from(&to);
                })
                .await?;
            }
            // Up to date, no rollout, or gone: no upgrade.
            None => {
                if ctx.teardown::<Upgrade>(item.id()).await.ignore_not_found()?.is_some() {
                    ctx.destroy::<Upgrade>(item.id()).await?;
                }
            }
        }
        Ok(())
    }

    /// A rollout concerns the machines of its group.
    async fn map(&self, ctx: &Ctx<Self>, rollout: &ReducedMetadata) -> cosi::Result<Vec<Pointer>> {
        let Some(wanted) = group(&rollout.labels) else { return Ok(Vec::new()) };
        let machines = ctx.list::<Machine>(&ListOptions::default()).await?;
        Ok(machines
            .iter()
            .filter(|machine| group(machine.metadata().labels()) == Some(wanted))
            .map(|machine| machine.metadata().pointer().clone())
            .collect())
    }
}

/// Registers the fleet reconciler's controllers on `runtime`.
pub fn register(runtime: &Runtime) -> Result<(), cosi::RuntimeError> {
    runtime.register(UpgradeController)
}

/// The recipe's controller graph.
pub fn graph() -> Graph {
    let runtime = Runtime::new(cosi::state::memory());
    register(&runtime).expect("the recipe's controllers register");
    runtime.graph()
}

async fn upgrades(state: &Arc<dyn State>) -> cosi::Result<Vec<String>> {
    let upgrades = state.list::<Upgrade>(&ListOptions::default()).await?;
    Ok(upgrades.iter().map(|upgrade| format!("{}:{}->{}", upgrade.id(), upgrade.from, upgrade.to)).collect())
}

async fn labelled<T: Resource>(state: &Arc<dyn State>, id: &str, group: &str, spec: T) -> cosi::Result<()> {
    let mut resource = Typed::new(id, spec);
    resource.metadata_mut().labels_mut().set(GROUP, group);
    state.create(resource, CreateOptions::default()).await?;
    Ok(())
}

/// Rolls a version out to a canary group, then to production, as agents report their upgrades.
pub async fn run() -> cosi::Result<()> {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    register(&runtime)?;
    runtime.start()?;

    labelled(&state, "m1", "canary", Machine { version: "1.0".into() }).await?;
    for id in ["m2", "m3", "m4", "m5"] {
        labelled(&state, id, "prod", Machine { version: "1.0".into() }).await?;
    }
    labelled(&state, "canary", "canary", Rollout { version: "1.1".into() }).await?;
    runtime.settled().await;
    println!("canary rollout: {:?}", upgrades(&state).await?);
    assert_eq!(upgrades(&state).await?, ["m1:1.0->1.1"]);

    // The canary's agent upgrades it and reports the new version: its upgrade goes.
    state.modify::<Machine>("m1", UpdateOptions::default(), |machine| machine.version = "1.1".into()).await?;
    runtime.settled().await;
    assert!(upgrades(&state).await?.is_empty());

    labelled(&state, "prod", "prod", Rollout { version: "1.1".into() }).await?;
    runtime.settled().await;
    println!("production rollout: {:?}", upgrades(&state).await?);
    assert_eq!(upgrades(&state).await?, ["m2:1.0->1.1", "m3:1.0->1.1", "m4:1.0->1.1", "m5:1.0->1.1"]);

    // Rolling back production is one write: every pending upgrade goes.
    state.teardown_and_destroy::<Rollout>("prod", TeardownOptions::default()).await?;
    runtime.settled().await;
    assert!(upgrades(&state).await?.is_empty());

    runtime.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> cosi::Result<()> {
    println!("{}", graph().to_mermaid());
    run().await
}
