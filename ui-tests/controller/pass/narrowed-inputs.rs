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

/// The one `hostname` spec of the `network` namespace, and the statuses of the
/// `archive` namespace (readable, though it writes statuses: not where it writes).
#[controller(
    inputs = [
        Weak<Spec>(namespace = "network", id = "hostname"),
        Weak<Spec>(id = "hostname"),
        Weak<Status>(namespace = "archive"),
        DestroyReady<Status>,
    ],
    outputs = [Exclusive<Status>],
)]
async fn narrowed(ctx: &mut Ctx) -> cosi::Result<()> {
    let spec = ctx.get::<Spec>("hostname").await?;
    ctx.modify::<Status>("hostname", |status| status.value = spec.value.clone()).await?;
    Ok(())
}

fn main() {
    use cosi::controller::Declared;

    let inputs = narrowed::DECLARATION.inputs;
    assert_eq!((inputs[0].namespace, inputs[0].id), ("network", Some("hostname")));
    assert_eq!((inputs[1].namespace, inputs[1].id), ("default", Some("hostname")));
}
