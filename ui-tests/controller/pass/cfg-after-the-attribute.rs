// A `#[cfg]` written after `#[controller]` applies to everything the
// attribute adds: a controller compiled out leaves nothing behind.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[controller(inputs = [Weak<Spec>])]
#[cfg(any())]
async fn never_compiled(_ctx: &mut Ctx) {}

#[controller(inputs = [Weak<Spec>])]
#[cfg(any())]
#[derive(Default)]
pub struct NeverCompiled;

#[controller(inputs = [Weak<Spec>])]
#[cfg(all())]
async fn always_compiled(_ctx: &mut Ctx) {}

fn main() {
    use cosi::controller::Declared;
    assert_eq!(always_compiled::DECLARATION.name, "always_compiled");
}
