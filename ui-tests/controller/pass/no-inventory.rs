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

/// Not `Default`: registered by hand, so not collected.
#[controller(inputs = [Weak<Spec>], inventory = false)]
pub struct Templated {
    template: String,
}

impl Templated {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let _ = &self.template;
        Ok(())
    }
}

fn main() {
    use cosi::controller::Register;

    let _ = Templated { template: String::new() }.registration();
    assert!(cosi::__private::Collected::sorted().is_empty());
}
