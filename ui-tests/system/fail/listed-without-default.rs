// A controller listed plainly is built with `Default` by `runtime()`.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[controller(inventory = false, inputs = [Weak<Spec>])]
struct Renderer {
    directory: String,
}

impl Renderer {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let _ = &self.directory;
        Ok(())
    }
}

cosi::system!(MyOs = [Renderer]);

fn main() {}
