//! The generic cleanup and destroy controllers (`cosi::controller::Cleanup`,
//! `cosi::controller::Destroy`), case by case as Go COSI's own tests of them
//! (`pkg/controller/generic/cleanup/cleanup_test.go`,
//! `pkg/controller/generic/destroy/destroy_test.go`).

use std::sync::Arc;

use cosi::controller::{Cleanup, Destroy};
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "As.cleanup-test.cosi.dev", namespace = "default")]
pub struct A {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Bs.cleanup-test.cosi.dev", namespace = "default")]
pub struct B {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Children.cleanup-test.cosi.dev", namespace = "default")]
pub struct Child {}

/// Selects the dependents labelled with the input's ID as their parent.
fn children<T: Resource>(a: &Typed<T>) -> ListOptions {
    ListOptions::default().label(LabelQuery::new().equal("parent", a.id()))
}

async fn start(cleanup: Cleanup<A>) -> (Arc<dyn State>, Runtime) {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(cleanup).expect("register");
    runtime.start().expect("start");
    for id in ["1", "2", "3"] {
        state.create(Typed::new(id, A {}), CreateOptions::default()).await.expect("create");
    }
    runtime.settled().await;
    for id in ["1", "2", "3"] {
        assert!(held(&state, id).await, "{id} is held");
    }
    (state, runtime)
}

/// Creates a dependent of type `T` of the input `parent`, owned by `owner`.
async fn child<T: Resource + Default>(state: &Arc<dyn State>, id: &str, parent: &str, owner: Option<&str>) {
    let mut child = Typed::new(id, T::default());
    child.metadata_mut().labels_mut().set("parent", parent);
    let options = CreateOptions { owner: owner.map(Into::into) };
    state.create(child, options).await.expect("create a dependent");
}

/// Whether the input `id` has the cleanup's finalizer.
async fn held(state: &Arc<dyn State>, id: &str) -> bool {
    state.get::<A>(id).await.expect("the input").metadata().finalizers().has("cleanup")
}

async fn exists<T: Resource>(state: &Arc<dyn State>, id: &str) -> bool {
    match state.get::<T>(id).await {
        Ok(_) => true,
        Err(error) if error.is_not_found() => false,
        Err(error) => panic!("{error}"),
    }
}

/// `TestNoRemovalUntilNoOutputs` and `TestNoRemovalUntilNoOutputsMultiple`:
/// a tearing-down input stays held while a dependent of any waited-for type
/// is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_removal_until_no_outputs() {
    let cleanup = Cleanup::<A>::new("cleanup").wait_for::<B>(children).wait_for::<Child>(children);
    let (state, runtime) = start(cleanup).await;
    child::<B>(&state, "b1", "1", None).await;
    child::<Child>(&state, "c1", "1", None).await;

    for id in ["1", "2"] {
        state.teardown::<A>(id, TeardownOptions::default()).await.expect("teardown");
    }
    runtime.settled().await;
    assert!(held(&state, "1").await, "two dependents left");
    assert!(!held(&state, "2").await, "no dependents: released");

    state.destroy::<B>("b1", DestroyOptions::default()).await.expect("destroy");
    runtime.settled().await;
    assert!(held(&state, "1").await, "one dependent left");

    state.destroy::<Child>("c1", DestroyOptions::default()).await.expect("destroy");
    runtime.settled().await;
    assert!(!held(&state, "1").await, "released");
    runtime.shutdown().await;
}

/// `TestRemoveWithOutputs` and `TestRemoveWithExtraOwners`: the dependents
/// nobody owns, or an extra owner owns, are removed, then the input is
/// released; another owner's are left, and do not hold the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_with_extra_owners() {
    let cleanup = Cleanup::<A>::new("cleanup").remove::<B>(children).extra_owners(["some-controller"]);
    let (state, runtime) = start(cleanup).await;
    child::<B>(&state, "1", "1", None).await;
    child::<B>(&state, "2", "2", Some("some-controller")).await;
    child::<B>(&state, "3", "3", Some("user-owner")).await;
    state.add_finalizers::<B>("1", &["holder"]).await.expect("hold a dependent");

    for id in ["1", "2", "3"] {
        state.teardown::<A>(id, TeardownOptions::default()).await.expect("teardown");
    }
    runtime.settled().await;
    assert!(held(&state, "1").await, "its dependent is held");
    assert_eq!(state.get::<B>("1").await.expect("the dependent").metadata().phase(), Phase::TearingDown);
    assert!(!exists::<B>(&state, "2").await, "an extra owner's dependent is removed");
    assert!(exists::<B>(&state, "3").await, "another owner's dependent is left");
    assert!(!held(&state, "2").await && !held(&state, "3").await);

    state.remove_finalizers::<B>("1", &["holder"]).await.expect("release the dependent");
    runtime.settled().await;
    assert!(!exists::<B>(&state, "1").await);
    assert!(!held(&state, "1").await);
    runtime.shutdown().await;
}

/// The steps are declared: the graph shows what a cleanup reads and writes.
#[test]
fn declaration_follows_the_steps() {
    let runtime = Runtime::new(cosi::state::memory());
    let cleanup = Cleanup::<A>::new("cleanup").wait_for::<Child>(children).remove::<B>(children);
    runtime.register(cleanup).expect("register");
    let graph = runtime.graph();
    let inputs: Vec<_> = graph.controllers[0].inputs.iter().map(|input| (input.r#type.as_str(), input.kind)).collect();
    assert_eq!(
        inputs,
        [(A::TYPE, InputKind::Strong), (B::TYPE, InputKind::DestroyReady), (Child::TYPE, InputKind::Weak)]
    );
    let outputs: Vec<_> = graph.controllers[0].outputs.iter().map(|output| output.r#type.as_str()).collect();
    assert_eq!(outputs, [B::TYPE]);
}

/// `TestFlow`: a torn-down resource nobody owns is destroyed once its
/// finalizers are gone; an owned one is left to its owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_flow() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(Destroy::<A>::default()).expect("register");
    assert_eq!(runtime.graph().controllers[0].name, "Destroy[As.cleanup-test.cosi.dev]");
    runtime.start().expect("start");

    state.create(Typed::new("1", A {}), CreateOptions::default()).await.expect("create");
    state.teardown::<A>("1", TeardownOptions::default()).await.expect("teardown");
    runtime.settled().await;
    assert!(!exists::<A>(&state, "1").await);

    // It stays until its finalizers are gone.
    let mut held = Typed::new("1", A {});
    held.metadata_mut().finalizers_mut().add("something");
    state.create(held, CreateOptions::default()).await.expect("create");
    state.teardown::<A>("1", TeardownOptions::default()).await.expect("teardown");
    runtime.settled().await;
    assert!(exists::<A>(&state, "1").await);
    state.remove_finalizers::<A>("1", &["something"]).await.expect("remove");
    runtime.settled().await;
    assert!(!exists::<A>(&state, "1").await);

    // Owned resources are not touched.
    state.create(Typed::new("2", A {}), CreateOptions::owner("pwned")).await.expect("create");
    state.teardown::<A>("2", TeardownOptions::owner("pwned")).await.expect("teardown");
    runtime.settled().await;
    assert!(exists::<A>(&state, "2").await);
    runtime.shutdown().await;
}
