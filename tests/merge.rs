//! The generic merge controller (`cosi::controller::Merge`): layers merge into
//! one output, and an output whose layers are gone is torn down and destroyed
//! the moment its consumer lets it go, through the merge's destroy-ready
//! input on its own outputs.

use std::sync::Arc;

use cosi::controller::Merge;
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "AddressSpecs.merge-test.cosi.dev", namespace = "merged")]
pub struct AddressSpec {
    pub address: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "AddressStatuses.merge-test.cosi.dev", namespace = "merged")]
pub struct AddressStatus {
    pub address: String,
}

/// The consumer of merged specs (Talos' address actuator): holds each with a
/// finalizer while it runs, and lets it go once its status is gone.
#[controller(inputs = [Strong<AddressSpec>], outputs = [Exclusive<AddressStatus>], inventory = false)]
async fn actuator(ctx: &mut Ctx) -> cosi::Result<()> {
    for spec in ctx.list::<AddressSpec>(&ListOptions::default()).await? {
        match spec.metadata().phase() {
            Phase::Running => {
                if !spec.metadata().finalizers().has(ctx.name()) {
                    ctx.add_finalizers(&spec, &[ctx.name()]).await?;
                }
                ctx.modify::<AddressStatus>(spec.id(), |status| status.address.clone_from(&spec.address)).await?;
            }
            Phase::TearingDown => {
                match ctx.destroy::<AddressStatus>(spec.id()).await {
                    Ok(()) => (),
                    Err(error) if error.is_not_found() => (),
                    Err(error) => return Err(error),
                }
                ctx.remove_finalizers(&spec, &[ctx.name()]).await?;
            }
        }
    }
    Ok(())
}

/// Layers are `<layer>/<id>` in `layers`; the highest layer wins.
fn merge() -> Merge<AddressSpec> {
    Merge::new("address-merge", "layers", "merged", |spec: &Typed<AddressSpec>| {
        let (layer, id) = spec.id().split_once('/').unwrap_or(("0", spec.id()));
        (id.to_owned(), layer.parse().unwrap_or(0))
    })
}

async fn put_layer(state: &Arc<dyn State>, id: &str, address: &str) {
    let spec = Typed::new_in("layers", id, AddressSpec { address: address.to_owned() });
    state.create(spec, CreateOptions::default()).await.expect("create a layer");
}

async fn remove_layer(state: &Arc<dyn State>, id: &str) {
    let pointer = Pointer::new("layers", AddressSpec::TYPE, id);
    state.destroy_dynamic(&pointer, DestroyOptions::default()).await.expect("destroy a layer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_output_is_destroyed_as_soon_as_its_consumer_releases_it() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(merge()).expect("register");
    runtime.start().expect("start");
    put_layer(&state, "0/eth0", "10.0.0.1/24").await;
    put_layer(&state, "20/eth0", "10.0.0.2/24").await;
    runtime.settled().await;
    assert_eq!(state.get::<AddressSpec>("eth0").await.expect("merged").address, "10.0.0.2/24");

    // A consumer holds the merged output.
    state.add_finalizers::<AddressSpec>("eth0", &["consumer"]).await.expect("hold");
    remove_layer(&state, "0/eth0").await;
    remove_layer(&state, "20/eth0").await;
    runtime.settled().await;
    let held = state.get::<AddressSpec>("eth0").await.expect("held by its consumer");
    assert_eq!(held.metadata().phase(), Phase::TearingDown);

    // The release is the only write: the merge's destroy-ready input wakes it.
    state.remove_finalizers::<AddressSpec>("eth0", &["consumer"]).await.expect("release");
    runtime.settled().await;
    let gone = state.get::<AddressSpec>("eth0").await;
    assert!(gone.as_ref().is_err_and(|error| error.is_not_found()), "{gone:?}");
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_controller_and_the_merge_tear_an_output_down_together() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(merge()).expect("register");
    runtime.register(actuator {}).expect("register");
    runtime.start().expect("start");
    put_layer(&state, "10/eth1", "192.168.50.10/24").await;
    runtime.settled().await;
    assert_eq!(state.get::<AddressStatus>("eth1").await.expect("actuated").address, "192.168.50.10/24");
    let spec = state.get::<AddressSpec>("eth1").await.expect("merged");
    assert!(spec.metadata().finalizers().has("actuator"), "{:?}", spec.metadata().finalizers());

    remove_layer(&state, "10/eth1").await;
    runtime.settled().await;
    assert!(state.get::<AddressStatus>("eth1").await.is_err_and(|error| error.is_not_found()));
    assert!(state.get::<AddressSpec>("eth1").await.is_err_and(|error| error.is_not_found()));
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_that_comes_back_while_the_old_output_is_held_gets_a_new_output() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(merge()).expect("register");
    runtime.start().expect("start");
    put_layer(&state, "0/lo", "127.0.0.1/8").await;
    runtime.settled().await;
    state.add_finalizers::<AddressSpec>("lo", &["consumer"]).await.expect("hold");
    remove_layer(&state, "0/lo").await;
    runtime.settled().await;

    // Back while the old output is held: nothing to write yet, and no failure.
    put_layer(&state, "0/lo", "127.0.0.2/8").await;
    runtime.settled().await;
    let old = state.get::<AddressSpec>("lo").await.expect("the old output");
    assert_eq!((old.metadata().phase(), old.address.as_str()), (Phase::TearingDown, "127.0.0.1/8"));
    assert_eq!(runtime.stats("address-merge").expect("stats").errors, 0);

    state.remove_finalizers::<AddressSpec>("lo", &["consumer"]).await.expect("release");
    runtime.settled().await;
    let new = state.get::<AddressSpec>("lo").await.expect("the new output");
    assert_eq!((new.metadata().phase(), new.address.as_str()), (Phase::Running, "127.0.0.2/8"));
    runtime.shutdown().await;
}

#[test]
fn a_merge_into_its_own_source_is_refused() {
    let runtime = Runtime::new(cosi::state::memory());
    let same = Merge::<AddressSpec>::new("loop", "merged", "merged", |spec| (spec.id().to_owned(), 0));
    let error = runtime.register(same).expect_err("source and target are one namespace");
    assert!(error.to_string().contains("twice"), "{error}");
    // The type's default namespace may be either side.
    let from_default =
        Merge::<AddressSpec>::new("from-default", "merged", "elsewhere", |spec| (spec.id().to_owned(), 0));
    runtime.register(from_default).expect("layers in the type's default namespace");
    let into_default = Merge::<AddressSpec>::new("into-default", "layers", "merged", |spec| (spec.id().to_owned(), 0));
    runtime.register(into_default).expect("merged into the type's default namespace");
}
