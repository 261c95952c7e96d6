// `crate = ...` points the expansion at `cosi` when it is not `::cosi`.
extern crate cosi as renamed;

use renamed::Resource;
use serde::{Deserialize, Serialize};

#[derive(renamed::Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default", crate = renamed)]
pub struct Spec {}

#[renamed::controller(inputs = [Weak<Spec>], crate = renamed)]
async fn renamed_crate(ctx: &mut renamed::Ctx) -> renamed::Result<()> {
    ctx.list::<Spec>(&renamed::state::ListOptions::default()).await?;
    Ok(())
}

fn main() {
    use renamed::controller::Declared;

    assert_eq!(renamed_crate::DECLARATION.inputs[0].r#type, Spec::TYPE);
}
