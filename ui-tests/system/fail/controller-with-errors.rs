// A controller whose attribute has an error is listed in a system: the
// error is the only one, the system adds none of its own.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[controller(inputs = [Weak<Spec>])]
async fn first(_ctx: &mut Ctx) {}

#[controller(inputs = [Wek<Spec>])]
#[derive(Default)]
pub struct Second;

impl Second {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) {}
}

cosi::system!(MyOs = [first, Second]);

fn main() {}
