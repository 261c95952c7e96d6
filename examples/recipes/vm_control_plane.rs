//! Recipe: a VM control plane. Users write `VirtualMachine` specs; one queue
//! controller per VM item (four at once) boots, resizes and stops machines on
//! a hypervisor, holds each spec with a finalizer until its machine is
//! stopped, and reports a `VirtualMachineStatus`.
//!
//! Run it with `cargo run --example vm_control_plane`; the book's recipes
//! chapter draws its graph, and `cargo test -p cosi-book` runs it.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use cosi::prelude::*;
use cosi::runtime::Graph;
use parking_lot::Mutex;

/// A machine someone wants: the desired state.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "VirtualMachines.vm.example.org", namespace = "vms", aliases = ["vm"])]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachine {
    pub cpus: u32,
    pub memory_mib: u64,
}

/// What the hypervisor runs for it: the observed state.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "VirtualMachineStatuses.vm.example.org", namespace = "vms", aliases = ["vmstatus"])]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    pub running: bool,
    pub cpus: u32,
    pub memory_mib: u64,
}

/// The hypervisor: which machines run, with their size. A real control plane
/// would call libvirt, Firecracker or a cloud API here.
#[derive(Clone, Debug, Default)]
pub struct Hypervisor {
    machines: Arc<Mutex<BTreeMap<String, (u32, u64)>>>,
}

impl Hypervisor {
    fn ensure(&self, id: &str, cpus: u32, memory_mib: u64) {
        self.machines.lock().insert(id.to_owned(), (cpus, memory_mib));
    }

    fn stop(&self, id: &str) {
        self.machines.lock().remove(id);
    }

    /// The machines running, by ID.
    pub fn running(&self) -> Vec<String> {
        self.machines.lock().keys().cloned().collect()
    }
}

/// Reconciles one machine at a time, four at once: the shape for many
/// independent items, each of which is slow work.
#[controller(
    name = "vm.VirtualMachineController",
    inputs = [Primary<VirtualMachine>],
    outputs = [Exclusive<VirtualMachineStatus>],
    concurrency = 4,
)]
#[derive(Default)]
pub struct VirtualMachineController {
    hypervisor: Hypervisor,
}

impl VirtualMachineController {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<()> {
        let vm = match ctx.get::<VirtualMachine>(item).await {
            Ok(vm) => vm,
            // Gone without us (nobody held it yet): make sure nothing runs.
            Err(error) if error.is_not_found() => {
                self.hypervisor.stop(item.id());
                return remove_status(ctx, item.id()).await;
            }
            Err(error) => return Err(error),
        };
        let holding = vm.metadata().finalizers().has(ctx.name());
        match vm.metadata().phase() {
            Phase::Running => {
                // Hold the spec first, so it cannot go while its machine runs.
                if !holding {
                    ctx.add_finalizers(&vm, &[ctx.name()]).await?;
                }
                self.hypervisor.ensure(vm.id(), vm.cpus, vm.memory_mib);
                ctx.modify::<VirtualMachineStatus>(vm.id(), |status| {
                    status.running = true;
                    status.cpus = vm.cpus;
                    status.memory_mib = vm.memory_mib;
                })
                .await?;
            }
            Phase::TearingDown => {
                self.hypervisor.stop(vm.id());
                remove_status(ctx, vm.id()).await?;
                if holding {
                    ctx.remove_finalizers(&vm, &[ctx.name()]).await?;
                }
            }
        }
        Ok(())
    }
}

async fn remove_status(ctx: &Ctx<VirtualMachineController>, id: &str) -> cosi::Result<()> {
    if ctx.teardown::<VirtualMachineStatus>(id).await.ignore_not_found()?.is_some() {
        ctx.destroy::<VirtualMachineStatus>(id).await?;
    }
    Ok(())
}

/// Registers the control plane's controllers on `runtime`.
pub fn register(runtime: &Runtime, hypervisor: &Hypervisor) -> Result<(), cosi::RuntimeError> {
    runtime.register(VirtualMachineController { hypervisor: hypervisor.clone() })
}

/// The recipe's controller graph.
pub fn graph() -> Graph {
    let runtime = Runtime::new(cosi::state::memory());
    register(&runtime, &Hypervisor::default()).expect("the recipe's controllers register");
    runtime.graph()
}

/// Creates three machines, resizes one, deletes one, and checks the hypervisor after each step.
pub async fn run() -> cosi::Result<()> {
    let state = cosi::state::memory();
    let hypervisor = Hypervisor::default();
    let runtime = Runtime::new(state.clone());
    register(&runtime, &hypervisor)?;
    runtime.start()?;

    for (id, cpus, memory_mib) in [("web-1", 2, 2048), ("web-2", 2, 2048), ("db-1", 8, 16384)] {
        state.create(Typed::new(id, VirtualMachine { cpus, memory_mib }), CreateOptions::default()).await?;
    }
    runtime.settled().await;
    println!("running: {:?}", hypervisor.running());
    assert_eq!(hypervisor.running(), ["db-1", "web-1", "web-2"]);

    state.modify::<VirtualMachine>("db-1", UpdateOptions::default(), |vm| vm.cpus = 16).await?;
    runtime.settled().await;
    let status = state.get::<VirtualMachineStatus>("db-1").await?;
    println!("db-1 resized: {} CPUs", status.cpus);
    assert_eq!(status.cpus, 16);

    // Returns once the controller has stopped the machine and let the spec go.
    state.teardown_and_destroy::<VirtualMachine>("web-2", TeardownOptions::default()).await?;
    runtime.settled().await;
    println!("after deleting web-2: {:?}", hypervisor.running());
    assert_eq!(hypervisor.running(), ["db-1", "web-1"]);
    assert!(state.get::<VirtualMachineStatus>("web-2").await.is_err_and(|error| error.is_not_found()));

    runtime.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> cosi::Result<()> {
    println!("{}", graph().to_mermaid());
    run().await
}
