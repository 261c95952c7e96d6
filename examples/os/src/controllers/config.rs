//! `config.MachineConfigController`: `machine.yaml` becomes the
//! `MachineConfig` resource.

use cosi::prelude::*;

use crate::env::{Env, MACHINE_YAML};
use crate::error::Error;
use crate::machine_config::Config;
use crate::resources::MachineConfig;
use crate::watch::FileWatch;

/// Reads `machine.yaml` at start and whenever it changes (a file watch wakes
/// it), and publishes it as `MachineConfig/active`.
///
/// It never fails on a bad file: an invalid one is reported with its line and
/// column and the last good configuration stays, as does a missing one. So
/// the rest of the machine only ever sees configurations that parsed.
#[controller(name = "config.MachineConfigController", outputs = [Exclusive<MachineConfig>], inventory = false)]
#[derive(Default)]
pub struct MachineConfigController {
    env: Env,
    watch: Option<FileWatch>,
    /// The text last read and done with (stored, or reported invalid), so
    /// that a wake-up with the file unchanged does nothing again. Set only
    /// once the configuration is stored: a failed write is retried.
    last_read: Option<String>,
    /// Whether the text last read was invalid, so that fixing it says so
    /// even when the fixed file is the configuration already in force.
    invalid: bool,
}

impl MachineConfigController {
    /// The controller for the sandbox of `env`.
    pub fn new(env: Env) -> Self {
        MachineConfigController { env, watch: None, last_read: None, invalid: false }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        if self.watch.is_none() {
            let waker = ctx.waker();
            let root = self.env.sandbox.root();
            let watch =
                FileWatch::start(&self.env.tasks, root, MACHINE_YAML, self.env.timings.file_debounce, move || {
                    waker.wake()
                })
                .map_err(|source| Error::Watch { path: root.display().to_string(), source })?;
            self.watch = Some(watch);
        }
        let Some(text) = self.env.sandbox.read(MACHINE_YAML)? else {
            if self.last_read.take().is_some() {
                tracing::warn!("{MACHINE_YAML} is gone: keeping the last good configuration");
            }
            return Ok(());
        };
        if self.last_read.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        let config = match Config::parse(&text) {
            Ok(config) => config,
            Err(error) => {
                tracing::error!("{MACHINE_YAML} is invalid, keeping the last good configuration: {error}");
                self.last_read = Some(text);
                self.invalid = true;
                return Ok(());
            }
        };
        let before = ctx
            .get::<MachineConfig>(MachineConfig::ID)
            .await
            .ignore_not_found()?
            .map(|current| current.metadata().version());
        let stored = ctx
            .modify::<MachineConfig>(MachineConfig::ID, |machine| {
                machine.raw.clone_from(&text);
                machine.config = config.clone();
            })
            .await?;
        // Only now is the text done with: had the write failed, the restart
        // after it would read the same text and must not skip it.
        self.last_read = Some(text);
        let was_invalid = std::mem::take(&mut self.invalid);
        if before != Some(stored.metadata().version()) {
            tracing::info!("accepted {MACHINE_YAML} (configuration version {})", stored.metadata().version());
        } else if was_invalid {
            tracing::info!("{MACHINE_YAML} is valid again: the configuration in force is unchanged");
        }
        Ok(())
    }
}
