//! The chain of controllers that `runtime.rs` times and `ops.rs` counts:
//! controller `i` copies the `Num`s of namespace `c{i}` into `c{i+1}` (one
//! controller type, registered once per link under its own name, its input
//! set at its first reconcile).

use cosi::prelude::*;
use cosi::state::Watch;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
// The chain names every namespace it reads and writes; the default is
// none of them, so that a link's declared input (`c0`) is not where its
// declared output is.
#[resource(type = "Nums.bench.cosi.dev", namespace = "chain")]
pub struct Num {
    pub value: i64,
}

/// One link of the chain: copies every `Num` of `from` into `to`.
#[controller(inputs = [Weak<Num>(namespace = "c0")], outputs = [Shared<Num>], inventory = false)]
pub struct Link {
    from: String,
    to: String,
    inputs_set: bool,
}

impl Link {
    pub fn new(index: usize) -> Self {
        Link { from: format!("c{index}"), to: format!("c{}", index + 1), inputs_set: false }
    }

    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        if !self.inputs_set {
            ctx.update_inputs([Input::of::<Num>(InputKind::Weak).in_namespace(&self.from)])?;
            self.inputs_set = true;
        }
        for num in ctx.list_in::<Num>(&self.from, &ListOptions::default()).await? {
            let value = num.value;
            ctx.modify::<Num>(&Pointer::new(&self.to, Num::TYPE, num.id()), |out| out.value = value).await?;
        }
        Ok(())
    }
}

/// A running chain of `links` controllers on `state`, its head resource
/// created, and a watch of its tail.
pub struct Chain {
    pub state: std::sync::Arc<dyn State>,
    pub runtime: Runtime,
    head: Pointer,
    tail: Watch,
}

impl Chain {
    pub async fn start(links: usize) -> Chain {
        let state = crate::bench_state::memory();
        let runtime = Runtime::new(state.clone());
        for index in 0..links {
            runtime.register(Link::new(index).named(format!("link{index}"))).expect("register");
        }
        let head = Pointer::new("c0", Num::TYPE, "x");
        let tail = Pointer::new(format!("c{links}"), Num::TYPE, "x");
        state.create(Typed::new_in("c0", "x", Num { value: 0 }), CreateOptions::default()).await.expect("create");
        runtime.start().expect("start");
        let tail = state.watch_dynamic(&tail, WatchOptions::default()).await.expect("watch");
        let mut chain = Chain { state, runtime, head, tail };
        chain.wait_for(0).await;
        chain
    }

    /// One trip down the chain: sets the head to `value` and waits until the tail has it.
    pub async fn send(&mut self, value: i64) {
        self.state.modify::<Num>(&self.head, UpdateOptions::default(), |num| num.value = value).await.expect("update");
        self.wait_for(value).await;
    }

    async fn wait_for(&mut self, value: i64) {
        while let Some(event) = self.tail.recv().await {
            match event {
                Event::Created { resource, .. } | Event::Updated { resource, .. }
                    if Typed::<Num>::try_from(&resource).expect("a Num").value == value =>
                {
                    return;
                }
                Event::Errored { error } => panic!("the tail watch failed: {error}"),
                _ => (),
            }
        }
        panic!("the tail watch ended");
    }

    pub async fn stop(self) {
        drop(self.tail);
        self.runtime.shutdown().await;
    }
}
