// Naming the namespace an output lives in does not make it another one:
// the controller would still be woken by its own writes.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

#[controller(inputs = [Weak<Status>(namespace = "default")], outputs = [Exclusive<Status>])]
async fn reconcile_status(ctx: &mut Ctx) -> cosi::Result<()> {
    let _ = ctx;
    Ok(())
}

fn main() {}
