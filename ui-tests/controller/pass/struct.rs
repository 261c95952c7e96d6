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

/// Keeps a count across reconciles.
#[controller(inputs = [Weak<Spec>], outputs = [Shared<Status>])]
#[derive(Default)]
pub struct Counter {
    reconciles: usize,
}

impl Counter {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        self.reconciles += 1;
        let count = self.reconciles.to_string();
        ctx.modify::<Status>("count", |status| status.value = count.clone()).await?;
        Ok(())
    }
}

fn main() {
    use cosi::controller::{Declared, Register};

    assert_eq!(Counter::DECLARATION.concurrency, None);
    let _ = Counter::default().registration();
}
