use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

// `requeue` repeats a reconcile controller's one reconcile; a queue
// controller has no such reconcile, only items.
#[controller(inputs = [Primary<Spec>])]
#[derive(Default)]
struct PerSpec;

impl PerSpec {
    async fn reconcile(&self, ctx: &Ctx<Self>, _item: &Pointer) {
        ctx.requeue();
    }
}

fn main() {}
