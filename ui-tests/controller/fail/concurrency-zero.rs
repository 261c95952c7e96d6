use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

#[controller(inputs = [Primary<Spec>], concurrency = 0)]
#[derive(Default)]
struct Stalled;

impl Stalled {
    async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) -> cosi::Result<()> {
        Ok(())
    }
}

fn main() {}
