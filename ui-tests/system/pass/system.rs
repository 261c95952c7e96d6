use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

#[controller(inputs = [Weak<Spec>], outputs = [Exclusive<Status>])]
async fn first(_ctx: &mut Ctx) {}

/// Shares nothing with `first`.
#[controller(inputs = [Weak<Status>])]
#[derive(Default)]
pub struct Second;

impl Second {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        Ok(())
    }
}

cosi::system!(
    /// The whole system.
    pub MyOs = [first, Second]
);

mod nested {
    cosi::system!(pub(crate) Empty = []);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), cosi::RuntimeError> {
    let names: Vec<&str> = MyOs::DECLARATIONS.iter().map(|declaration| declaration.name).collect();
    assert_eq!(names, ["first", "Second"]);
    let runtime = MyOs::runtime(cosi::state::memory())?;
    assert_eq!(runtime.controllers(), ["first", "Second"]);
    assert!(nested::Empty::DECLARATIONS.is_empty());
    Ok(())
}
