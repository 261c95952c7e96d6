//! `time.SyncController`: the fake NTP client.

use tokio::time::Instant;

use cosi::controller::{Input, InputKind};
use cosi::prelude::*;

use crate::env::Env;
use crate::error::Error;
use crate::resources::{AddressStatus, MachineConfig, TimeStatus};
use crate::tasks::Task;

/// Synchronizes the (fake) clock and reports it as `TimeStatus/node`.
///
/// Its inputs change as it goes, as Talos' does: it is registered watching
/// only `AddressStatus`, and waits until the machine has an address (NTP
/// needs the network); then it switches its inputs to `MachineConfig`, to
/// follow `time.servers`. A server answers after the NTP delay, unless its
/// name ends in `.invalid`: then the client retries on a timer, which wakes
/// the controller, until the servers change.
#[controller(
    name = "time.SyncController",
    inputs = [Weak<AddressStatus>, Weak<MachineConfig>(id = "active")],
    outputs = [Exclusive<TimeStatus>],
    inventory = false,
)]
#[derive(Default)]
pub struct SyncController {
    env: Env,
    network_up: bool,
    /// The servers being synchronized with.
    servers: Vec<String>,
    synced: bool,
    epoch: u64,
    /// When the servers are asked (again).
    deadline: Option<Instant>,
    /// Wakes the controller at the deadline.
    timer: Option<Task>,
}

impl SyncController {
    /// The controller, with the NTP delays of `env`.
    pub fn new(env: Env) -> Self {
        SyncController { env, ..SyncController::default() }
    }

    /// The inputs it is registered with: only `AddressStatus`, until the network is up.
    pub fn initial_inputs() -> Vec<Input> {
        vec![Input::of::<AddressStatus>(InputKind::Weak)]
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        if !self.network_up {
            let addresses = ctx.list::<AddressStatus>(&ListOptions::default()).await?;
            if !addresses.iter().any(|address| !address.is_loopback()) {
                return self.publish(ctx).await;
            }
            self.network_up = true;
            ctx.update_inputs([Input::of::<MachineConfig>(InputKind::Weak).with_id(MachineConfig::ID)])?;
        }
        let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;
        let servers = machine.map(|machine| machine.config.time_servers()).unwrap_or_default();
        if servers != self.servers {
            if !servers.is_empty() {
                tracing::info!("synchronizing time with {}", servers.join(", "));
            }
            self.servers = servers;
            self.synced = false;
            self.schedule(ctx, Instant::now() + self.env.timings.ntp_sync);
        }
        if !self.synced && !self.servers.is_empty() && self.deadline.is_some_and(|at| at <= Instant::now()) {
            match self.servers.iter().find(|server| !server.ends_with(".invalid")) {
                Some(server) => {
                    self.synced = true;
                    self.epoch += 1;
                    self.deadline = None;
                    self.timer = None;
                    tracing::info!("time is synchronized with {server}");
                }
                None => {
                    let retry = self.env.timings.ntp_retry;
                    tracing::warn!(
                        "no NTP server answers ({}); asking again in {}",
                        self.servers.join(", "),
                        humantime::format_duration(retry)
                    );
                    self.schedule(ctx, Instant::now() + retry);
                }
            }
        }
        self.publish(ctx).await
    }

    /// Asks the servers at `at`: a timer wakes the controller then.
    fn schedule(&mut self, ctx: &Ctx<Self>, at: Instant) {
        self.deadline = Some(at);
        let waker = ctx.waker();
        self.timer = Some(self.env.tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            waker.wake();
        }));
    }

    async fn publish(&self, ctx: &Ctx<Self>) -> Result<(), Error> {
        ctx.modify::<TimeStatus>("node", |status| {
            status.synced = self.synced;
            status.epoch = self.epoch;
            status.servers.clone_from(&self.servers);
        })
        .await?;
        Ok(())
    }
}
