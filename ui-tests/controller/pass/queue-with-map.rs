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

use std::time::Duration;

/// One spec at a time, up to four at once; statuses map back to their spec.
#[controller(
    inputs = [Primary<Spec>, Mapped<Status>(namespace = "archive"), MappedDestroyReady<Status>],
    outputs = [Shared<Status>],
    concurrency = 4,
)]
#[derive(Default)]
pub struct PerSpec;

impl PerSpec {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<Requeue, cosi::Error> {
        let spec = ctx.get::<Spec>(item).await?;
        ctx.add_finalizers::<Status>(spec.id(), &["per-spec"]).await?;
        Ok(Requeue::After(Duration::from_secs(60)))
    }

    async fn map(&self, _ctx: &Ctx<Self>, input: &ReducedMetadata) -> cosi::Result<Vec<Pointer>> {
        Ok(vec![Spec::pointer(input.pointer.id())])
    }
}

/// Without mapped inputs, no `map`.
#[controller(inputs = [Primary<Status>])]
#[derive(Default)]
pub struct PerStatus;

impl PerStatus {
    async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) {}
}

fn main() {
    use cosi::controller::{Declared, Register};

    assert_eq!(PerSpec::DECLARATION.concurrency, Some(4));
    assert_eq!(PerStatus::DECLARATION.concurrency, Some(1));
    let _ = PerSpec.registration();
    let _ = PerStatus.registration();
}
