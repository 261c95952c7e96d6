//! `network.AddressSpecController`: applies merged addresses to the fake kernel.

use cosi::prelude::*;

use crate::env::Env;
use crate::error::Error;
use crate::kernel::{KernelError, NET_FILE};
use crate::resources::AddressSpec;
use crate::watch::FileWatch;

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
