//! `network.HostnameSpecController`: applies the merged hostname.

use cosi::prelude::*;

use crate::controllers::optional;
use crate::env::Env;
use crate::error::Error;
use crate::resources::{HostnameSpec, HostnameStatus};

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
        for spec in ctx.list::<HostnameSpec>().await? {
            match spec.metadata().phase() {
                Phase::Running => {
                    if !spec.metadata().finalizers().has(&finalizer) {
                        ctx.add_finalizer(&spec, &finalizer).await?;
                    }
                    let domainname = if spec.domainname.is_empty() { "(none)" } else { &spec.domainname };
                    self.env.sandbox.write_existing("proc/sys/kernel/hostname", &format!("{}\n", spec.hostname))?;
                    self.env.sandbox.write_existing("proc/sys/kernel/domainname", &format!("{domainname}\n"))?;
                    let before = optional(ctx.get::<HostnameStatus>(spec.id()).await)?;
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
                    match ctx.destroy::<HostnameStatus>(spec.id()).await {
                        Ok(()) => (),
                        Err(error) if error.is_not_found() => (),
                        Err(error) => return Err(error.into()),
                    }
                    ctx.remove_finalizer(&spec, &finalizer).await?;
                }
                Phase::TearingDown => (),
            }
        }
        Ok(())
    }
}
