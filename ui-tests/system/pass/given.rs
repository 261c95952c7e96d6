// Controllers built with arguments are given to `runtime()`, which checks
// that each registers under the name the system lists it with.
use cosi::controller::Merge;
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {
    pub name: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

#[controller(inputs = [Weak<Spec>])]
async fn reader(_ctx: &mut Ctx) {}

/// Needs its directory: no `Default`.
#[controller(inventory = false, inputs = [Weak<Spec>], outputs = [Exclusive<Status>])]
struct Renderer {
    directory: String,
}

impl Renderer {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        let _ = &self.directory;
        Ok(())
    }
}

const SPEC_MERGE: &str = "SpecMerge";

cosi::system!(pub MyOs = [reader, Renderer { .. }, Merge<Spec> as SPEC_MERGE]);

fn merge(name: &'static str) -> Merge<Spec> {
    Merge::new(name, "layers", "default", |spec: &Typed<Spec>| (spec.name.clone(), 0))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), cosi::RuntimeError> {
    let renderer = Renderer { directory: "/run/status".into() };
    let runtime = MyOs::runtime(cosi::state::memory(), renderer, merge(SPEC_MERGE))?;
    assert_eq!(runtime.controllers(), ["reader", "Renderer", "SpecMerge"]);

    // An instance under another name than the listed one is refused.
    let renderer = Renderer { directory: "/run/status".into() };
    let Err(error) = MyOs::runtime(cosi::state::memory(), renderer, merge("OtherMerge")) else {
        panic!("a merge registered as `OtherMerge` is not the one listed");
    };
    assert!(
        matches!(&error, cosi::RuntimeError::NotAsListed { listed, registered } if listed == "SpecMerge" && registered == "OtherMerge"),
        "{error}"
    );
    Ok(())
}
