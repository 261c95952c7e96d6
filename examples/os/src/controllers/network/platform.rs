//! `network.PlatformConfigController`: the platform layer.

use cosi::prelude::*;

use crate::controllers::network::{PLATFORM_NAME, write_address, write_hostname, write_resolvers};
use crate::env::{Env, PLATFORM_JSON};
use crate::error::Error;
use crate::platform::PlatformConfig;
use crate::resources::{AddressSpec, ConfigLayer, HostnameSpec, NETWORK_CONFIG, PlatformMetadata, ResolverSpec};
use crate::watch::FileWatch;

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
