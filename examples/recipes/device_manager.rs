//! Recipe: a device manager. A device bus (here a fake one; udev or a
//! hardware poller in real life) reports what is plugged in; an observer
//! controller mirrors it as `Device` resources, woken from outside the State
//! by a `Waker`; a policy decides which disks are mounted, and a second
//! controller keeps one `Mount` per eligible disk.
//!
//! Run it with `cargo run --example device_manager`; the book's recipes
//! chapter draws its graph, and `cargo test -p cosi-book` runs it.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use cosi::controller::Waker;
use cosi::prelude::*;
use cosi::runtime::Graph;
use parking_lot::Mutex;

/// A device that is plugged in, as the bus reports it.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Devices.hw.example.org", namespace = "hardware", aliases = ["dev"])]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub kind: String,
    pub size_gib: u64,
}

/// Which disks to mount, and where.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "MountPolicies.hw.example.org", namespace = "hardware")]
#[serde(rename_all = "camelCase")]
pub struct MountPolicy {
    pub min_size_gib: u64,
    pub root: String,
}

/// A disk mounted at a path.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Mounts.hw.example.org", namespace = "hardware")]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub path: String,
}

/// The device bus: what is plugged in, and who to wake when that changes.
#[derive(Clone, Debug, Default)]
pub struct Bus {
    devices: Arc<Mutex<BTreeMap<String, Device>>>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl Bus {
    /// A device appears (a hot-plug event).
    pub fn plug(&self, id: &str, kind: &str, size_gib: u64) {
        self.devices.lock().insert(id.to_owned(), Device { kind: kind.to_owned(), size_gib });
        self.notify();
    }

    /// A device goes away.
    pub fn unplug(&self, id: &str) {
        self.devices.lock().remove(id);
        self.notify();
    }

    fn notify(&self) {
        if let Some(waker) = &*self.waker.lock() {
            waker.wake();
        }
    }
}

/// Mirrors the bus: no inputs (nothing in the State wakes it), one output.
#[controller(name = "hw.DeviceController", outputs = [Exclusive<Device>])]
#[derive(Default)]
pub struct DeviceController {
    bus: Bus,
}

impl DeviceController {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        // The first reconcile runs at start: from then on, the bus wakes us.
        self.bus.waker.lock().get_or_insert_with(|| ctx.waker());
        let devices = self.bus.devices.lock().clone();
        for (id, device) in devices {
            ctx.modify::<Device>(&id, |stored| *stored.spec_mut() = device.clone()).await?;
        }
        // Devices no longer on the bus go.
        ctx.cleanup_outputs::<Device>().await
    }
}

/// Keeps one mount per disk that the policy accepts.
#[controller(name = "hw.MountController", inputs = [Weak<Device>, Weak<MountPolicy>(id = "default")], outputs = [Exclusive<Mount>])]
async fn mounts(ctx: &mut Ctx) -> cosi::Result<()> {
    if let Some(policy) = ctx.get::<MountPolicy>("default").await.ignore_not_found()? {
        for device in ctx.list::<Device>(&ListOptions::default()).await? {
            if device.kind == "disk" && device.size_gib >= policy.min_size_gib {
                let path = format!("{}/{}", policy.root, device.id());
                ctx.modify::<Mount>(device.id(), |mount| mount.path.clone_from(&path)).await?;
            }
        }
    }
    // Without a policy, or for a disk it no longer accepts, nothing stays mounted.
    ctx.cleanup_outputs::<Mount>().await
}

/// Registers the device manager's controllers on `runtime`.
pub fn register(runtime: &Runtime, bus: &Bus) -> Result<(), cosi::RuntimeError> {
    runtime.register(DeviceController { bus: bus.clone() })?;
    runtime.register(mounts {})
}

/// The recipe's controller graph.
pub fn graph() -> Graph {
    let runtime = Runtime::new(cosi::state::memory());
    register(&runtime, &Bus::default()).expect("the recipe's controllers register");
    runtime.graph()
}

async fn mounted(state: &std::sync::Arc<dyn State>) -> cosi::Result<Vec<String>> {
    let mounts = state.list::<Mount>(&ListOptions::default()).await?;
    Ok(mounts.iter().map(|mount| mount.path.clone()).collect())
}

/// Plugs and unplugs devices and changes the policy, checking the mounts after each step.
pub async fn run() -> cosi::Result<()> {
    let state = cosi::state::memory();
    let bus = Bus::default();
    let runtime = Runtime::new(state.clone());
    register(&runtime, &bus)?;
    runtime.start()?;

    let policy = MountPolicy { min_size_gib: 100, root: "/srv".into() };
    state.create(Typed::new("default", policy), CreateOptions::default()).await?;
    bus.plug("sda", "disk", 500);
    bus.plug("sdb", "disk", 50);
    bus.plug("eth0", "nic", 0);
    runtime.settled().await;
    println!("mounted: {:?}", mounted(&state).await?);
    assert_eq!(mounted(&state).await?, ["/srv/sda"]);

    bus.unplug("sda");
    runtime.settled().await;
    println!("after unplugging sda: {:?}", mounted(&state).await?);
    assert!(mounted(&state).await?.is_empty());
    assert!(state.get::<Device>("sda").await.is_err_and(|error| error.is_not_found()));

    state.modify::<MountPolicy>("default", UpdateOptions::default(), |policy| policy.min_size_gib = 10).await?;
    runtime.settled().await;
    println!("with a 10 GiB minimum: {:?}", mounted(&state).await?);
    assert_eq!(mounted(&state).await?, ["/srv/sdb"]);

    runtime.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> cosi::Result<()> {
    println!("{}", graph().to_mermaid());
    run().await
}
