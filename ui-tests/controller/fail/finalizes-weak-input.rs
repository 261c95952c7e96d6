use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

#[controller(inputs = [Weak<Spec>])]
async fn reconcile_status(ctx: &mut Ctx) -> cosi::Result<()> {
    let _ = ctx;
    ctx.add_finalizers::<Spec>("one", &["mine"]).await?;
    Ok(())
}

fn main() {}
