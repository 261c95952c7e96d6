use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {
    pub value: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {
    pub value: String,
}

/// Copies each spec into a status.
#[controller(inputs = [Strong<Spec>], outputs = [Exclusive<Status>])]
pub async fn copy_status(ctx: &mut Ctx) -> cosi::Result<()> {
    for spec in ctx.list::<Spec>(&ListOptions::default()).await? {
        ctx.add_finalizers::<Spec>(&spec, &["copy"]).await?;
        ctx.modify::<Status>(spec.id(), |status| status.value = spec.value.clone()).await?;
    }
    ctx.cleanup_outputs::<Status>().await
}

/// A function may return nothing at all.
#[controller(inputs = [Weak<Status>])]
async fn watch_status(_ctx: &mut Ctx) {}

fn main() {
    use cosi::controller::{Declared, Register};

    assert_eq!(copy_status::DECLARATION.name, "copy_status");
    let _ = copy_status {}.registration();
    let _ = <watch_status as Default>::default().registration();
}
