//! The file controllers: `machine.yaml`'s `files:` become `EtcFileSpec`s
//! (beside the network's), and every `EtcFileSpec` becomes a file under
//! `etc/`, written atomically.

use std::collections::BTreeSet;

use cosi::prelude::*;

use crate::controllers::network::NETWORK_FILES;
use crate::env::Env;
use crate::error::Error;
use crate::resources::{EtcFileSpec, EtcFileStatus, MachineConfig};
use crate::sandbox::RelativePath;

/// The second writer of `EtcFileSpec`: one per entry of `files:` in
/// `machine.yaml`. An entry removed from the file is torn down; once
/// `files.EtcFileController` has removed the file and its finalizer, the
/// destroy-ready input wakes this controller, which destroys the spec.
#[controller(
    name = "files.EtcFileConfigController",
    inputs = [Weak<MachineConfig>(id = "active"), DestroyReady<EtcFileSpec>],
    outputs = [Shared<EtcFileSpec>],
    inventory = false,
)]
#[derive(Default)]
pub struct EtcFileConfigController {
    /// Entries refused so far, so that each is reported once.
    refused: BTreeSet<String>,
}

impl EtcFileConfigController {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let machine = ctx.get::<MachineConfig>(MachineConfig::ID).await.ignore_not_found()?;
        let mut wanted = BTreeSet::new();
        let mut refused = BTreeSet::new();
        for file in machine.iter().flat_map(|machine| &machine.config.files.0) {
            let path = file.path.as_str();
            if NETWORK_FILES.contains(&path) {
                if !self.refused.contains(path) {
                    tracing::error!("machine.yaml: files: etc/{path} is written by the network; remove it from files");
                }
                refused.insert(path.to_owned());
                continue;
            }
            wanted.insert(path.to_owned());
            ctx.modify::<EtcFileSpec>(path, |spec| {
                spec.contents.clone_from(&file.content);
                spec.mode = file.mode;
            })
            .await?;
        }
        self.refused = refused;
        for spec in ctx.list::<EtcFileSpec>(&ListOptions::default()).await? {
            let owned = spec.metadata().owner() == Some(ctx.name());
            if owned && spec.metadata().phase() == Phase::Running && !wanted.contains(spec.id()) {
                tracing::info!("etc/{} is no longer configured: removing it", spec.id());
            }
        }
        ctx.cleanup_outputs::<EtcFileSpec>().await?;
        Ok(())
    }
}

/// Writes each `EtcFileSpec` to `etc/<id>` atomically (a temporary file
/// renamed into place), through the sandbox, and reports the spec version
/// written as `EtcFileStatus`. Holds a finalizer on each spec; when one
/// tears down, removes the file, then the status, then the finalizer.
#[controller(
    name = "files.EtcFileController",
    inputs = [Strong<EtcFileSpec>],
    outputs = [Exclusive<EtcFileStatus>],
    inventory = false,
)]
#[derive(Default)]
pub struct EtcFileController {
    env: Env,
}

impl EtcFileController {
    /// The controller for the sandbox of `env`.
    pub fn new(env: Env) -> Self {
        EtcFileController { env }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Error> {
        let finalizer = ctx.name().to_owned();
        let etc = RelativePath::new("etc")?;
        let mut errors = Vec::new();
        for spec in ctx.list::<EtcFileSpec>(&ListOptions::default()).await? {
            let id = spec.id();
            // The sandbox refuses what would leave etc/: `..`, absolute
            // paths, links that lead out. Such a spec is reported and skipped.
            let path = match RelativePath::new(id) {
                Ok(path) => etc.join(&path),
                Err(error) => {
                    errors.push(format!("etc/{id}: {error}"));
                    continue;
                }
            };
            match spec.metadata().phase() {
                Phase::Running => {
                    if !spec.metadata().finalizers().has(&finalizer) {
                        ctx.add_finalizers(&spec, &[&finalizer]).await?;
                    }
                    match self.env.sandbox.write_atomic(&path, &spec.contents, spec.mode.0) {
                        Ok(true) => tracing::info!("wrote {path}"),
                        Ok(false) => (),
                        Err(error) => {
                            errors.push(error.to_string());
                            continue;
                        }
                    }
                    let version = spec.metadata().version().get().unwrap_or_default();
                    ctx.modify::<EtcFileStatus>(id, |status| status.spec_version = version).await?;
                }
                Phase::TearingDown if spec.metadata().finalizers().has(&finalizer) => {
                    match self.env.sandbox.remove(&path) {
                        Ok(true) => tracing::info!("removed {path}"),
                        Ok(false) => (),
                        Err(error) => {
                            errors.push(error.to_string());
                            continue;
                        }
                    }
                    ctx.destroy::<EtcFileStatus>(id).await.ignore_not_found()?;
                    ctx.remove_finalizers(&spec, &[&finalizer]).await?;
                }
                Phase::TearingDown => (),
            }
        }
        Error::from_list(errors)
    }
}
