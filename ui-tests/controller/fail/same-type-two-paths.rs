// Tokens cannot tell that two paths name one type: the compile-time
// check of the declaration does.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

mod types {
    pub use super::Spec;
}

#[controller(inputs = [Weak<Spec>, Weak<types::Spec>])]
async fn reconcile_status(ctx: &mut Ctx) -> cosi::Result<()> {
    let _ = ctx;
    Ok(())
}

fn main() {}
