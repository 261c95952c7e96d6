//! The 30-second taste of COSI: typed resources in a state broker, and a watch
//! that sees every change.
//!
//! Run it with `cargo run --example quickstart`.

use cosi::prelude::*;
use cosi::state::{Registry, WatchCondition};

/// The hostname the machine should have.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "HostnameSpecs.net.example.org",
    namespace = "network",
    print_columns(name = "Hostname", json_path = "{.hostname}")
)]
pub struct HostnameSpec {
    pub hostname: String,
}

#[tokio::main]
async fn main() -> cosi::Result<()> {
    let state = cosi::state::memory();

    // The `meta` namespace tells clients which types exist and how to name them.
    let registry = Registry::new(&*state);
    registry.register_defaults().await?;
    registry.register_namespace("network", "Network configuration").await?;
    registry.register::<HostnameSpec>().await?;
    let definition = state.get_typed::<cosi::ResourceDefinition>(&HostnameSpec::TYPE.to_lowercase()).await?;
    println!("registered {} (aliases {:?})", definition.r#type, definition.aliases);

    // Watch the kind before writing: the watch sees every change, in order.
    let mut watch = state.watch_kind(&HostnameSpec::kind(), WatchKindOptions::bootstrap()).await?;
    let watcher = tokio::spawn(async move {
        while let Some(event) = watch.recv().await {
            match &event {
                Event::Bootstrapped { .. } => println!("watch: bootstrapped"),
                Event::Created { resource, .. } | Event::Updated { resource, .. } => {
                    let spec: Typed<HostnameSpec> = Typed::try_from(&**resource).expect("a HostnameSpec");
                    let metadata = resource.metadata();
                    println!(
                        "watch: {:?} {metadata} hostname={:?} phase={} finalizers={}",
                        event.event_type(),
                        spec.hostname,
                        metadata.phase(),
                        metadata.finalizers()
                    );
                }
                Event::Destroyed { resource, .. } => {
                    println!("watch: destroyed {}", resource.metadata());
                    break;
                }
                other => println!("watch: {other:?}"),
            }
        }
    });

    // Create-or-update, with retries on conflicts; the controller name is the owner.
    let pointer = HostnameSpec::pointer("default");
    let owner = UpdateOptions::owner("hostname-controller");
    state.modify(&pointer, owner.clone(), |spec: &mut Typed<HostnameSpec>| spec.hostname = "talos-1".into()).await?;
    state.modify(&pointer, owner.clone(), |spec: &mut Typed<HostnameSpec>| spec.hostname = "talos-2".into()).await?;

    // Nothing changed: no write, no event, no new version.
    let same = state.modify(&pointer, owner, |spec: &mut Typed<HostnameSpec>| spec.hostname = "talos-2".into()).await?;
    println!("after a no-op modify the version is still {}", same.metadata().version());

    // Somebody else cannot write it.
    let mut theirs = same.clone();
    theirs.hostname = "hijacked".into();
    let err = state.update_typed(theirs, UpdateOptions::owner("someone-else")).await.unwrap_err();
    println!("a foreign write fails: {err}");

    // Teardown, then destroy once the finalizers are gone.
    state.add_finalizers(&pointer, &["consumer"]).await?;
    let ready = state.teardown(&pointer, TeardownOptions::owner("hostname-controller")).await?;
    println!("teardown: ready to destroy = {ready}");
    state.remove_finalizers(&pointer, &["consumer"]).await?;
    let released = state.watch_for(&pointer, WatchCondition::new().finalizers_empty()).await?;
    println!("finalizers released at version {}", released.resource().expect("a resource").metadata().version());
    state.destroy(&pointer, DestroyOptions::owner("hostname-controller")).await?;

    watcher.await.expect("the watcher task");
    Ok(())
}
