// A controller's name (its status's ID, its outputs' owner) has no whitespace.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[controller(inputs = [Weak<Spec>], name = " hostname")]
async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
    let _ = ctx;
    Ok(())
}

fn main() {}
