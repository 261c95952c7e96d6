// The inventory builds controllers with `Default`.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

#[controller(inputs = [Weak<Spec>])]
struct Renderer {
    template: String,
}

impl Renderer {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let _ = &self.template;
        Ok(())
    }
}

fn main() {}
