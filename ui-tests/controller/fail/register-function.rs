use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[controller(inputs = [Weak<Spec>], inventory = false)]
async fn watcher(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<Spec>(&ListOptions::default()).await.map(drop)
}

fn main() {
    let runtime = Runtime::new(cosi::state::memory());
    // The controller is the struct `watcher {}`, not the function.
    let _ = runtime.register(watcher);
}
