// The runtime owns the controller statuses under the name `runtime`.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[controller(inputs = [Weak<Spec>])]
async fn runtime(ctx: &mut Ctx) -> cosi::Result<()> {
    let _ = ctx;
    Ok(())
}

fn main() {}
