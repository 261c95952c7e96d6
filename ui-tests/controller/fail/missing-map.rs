use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

// A mapped input needs an inherent `map`.
#[controller(inputs = [Primary<Spec>, Mapped<Status>])]
#[derive(Default)]
struct PerSpec;

impl PerSpec {
    async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) {}
}

fn main() {}
