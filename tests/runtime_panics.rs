//! A panic inside one of the runtime's own tasks (here: a kind's watch, from
//! a state that panics) is logged and handled: the watch restarts and its
//! readers see what they missed, instead of the controller going deaf without a word.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use cosi::prelude::*;
use cosi::state::{DestroyOptions, MemoryState, State, Watch, WatchOptions};
use cosi::testing::runtime::eventually;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Inputs.panic-test.cosi.dev", namespace = "default")]
pub struct Input {
    pub value: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Outputs.panic-test.cosi.dev", namespace = "default")]
pub struct Output {
    pub value: String,
}

#[controller(inputs = [Weak<Input>], outputs = [Exclusive<Output>], inventory = false)]
async fn copy(ctx: &mut Ctx) -> cosi::Result<()> {
    for input in ctx.list::<Input>(&ListOptions::default()).await? {
        ctx.modify::<Output>(input.id(), |output| output.value.clone_from(&input.value)).await?;
    }
    Ok(())
}

/// A memory state whose first watch of `Input` panics, as a buggy backend might.
struct PanicsOnce {
    inner: MemoryState,
    watches: AtomicUsize,
}

#[async_trait]
impl State for PanicsOnce {
    async fn get_dynamic(&self, pointer: &Pointer) -> cosi::Result<DynamicResource> {
        self.inner.get_dynamic(pointer).await
    }
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> cosi::Result<Vec<DynamicResource>> {
        self.inner.list_dynamic(kind, options).await
    }
    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> cosi::Result<DynamicResource> {
        self.inner.create_dynamic(resource, options).await
    }
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> cosi::Result<DynamicResource> {
        self.inner.update_dynamic(resource, options).await
    }
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> cosi::Result<()> {
        self.inner.destroy_dynamic(pointer, options).await
    }
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> cosi::Result<Watch> {
        self.inner.watch_dynamic(pointer, options).await
    }
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<Watch> {
        if kind.r#type() == Input::TYPE && self.watches.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("injected panic in the state's watch");
        }
        self.inner.watch_kind_dynamic(kind, options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_watch_task_is_restarted_and_its_readers_catch_up() {
    let state = Arc::new(PanicsOnce { inner: MemoryState::default(), watches: AtomicUsize::new(0) });
    let runtime = Runtime::new(Arc::clone(&state));
    runtime.register(copy {}).expect("register");
    runtime.start().expect("start");
    // The input arrives after the controller's first reconcile, so only the
    // watch can tell the controller about it.
    eventually("the first reconcile", || async {
        match runtime.stats("copy").map_or(0, |stats| stats.reconciles) {
            0 => Err("not yet"),
            _ => Ok(()),
        }
    })
    .await;

    state
        .create(Typed::new("a", Input { value: "seen".into() }), CreateOptions::default())
        .await
        .expect("create an input");
    let output = eventually("the input copied despite the panic", || async {
        state.get::<Output>("a").await.map(|output| output.value.clone())
    })
    .await;
    assert_eq!(output, "seen");
    assert!(state.watches.load(Ordering::SeqCst) >= 2, "the watch was opened again after its panic");
    // The restarted watch counts as caught up again: the runtime settles.
    tokio::time::timeout(std::time::Duration::from_secs(30), runtime.settled())
        .await
        .expect("the runtime settles once the restarted watch has caught up");
    runtime.shutdown().await;
}
