// Names that come from a `macro_rules!` metavariable carry that macro's
// hygiene; the locals the expansion declares and uses must still agree.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

macro_rules! function {
    ($name:ident) => {
        #[controller(inputs = [Weak<Spec>])]
        async fn $name(_ctx: &mut Ctx) {}
    };
}

macro_rules! structure {
    ($name:ident) => {
        #[controller(inputs = [Weak<Status>])]
        #[derive(Default)]
        pub struct $name;

        impl $name {
            async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) {}
        }
    };
}

macro_rules! queue {
    ($name:ident) => {
        #[controller(inputs = [Primary<Spec>, Mapped<Status>])]
        #[derive(Default)]
        pub struct $name;

        impl $name {
            async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) {}

            async fn map(&self, _ctx: &Ctx<Self>, input: &ReducedMetadata) -> cosi::Result<Vec<Pointer>> {
                Ok(vec![Spec::pointer(input.pointer.id())])
            }
        }
    };
}

macro_rules! system {
    ($name:ident = [$($controller:path),*]) => {
        cosi::system!(pub $name = [$($controller),*]);
    };
}

function!(from_function);
structure!(FromStruct);
queue!(FromQueue);
system!(FromMacro = [from_function, FromStruct, FromQueue]);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), cosi::RuntimeError> {
    let names: Vec<&str> = FromMacro::DECLARATIONS.iter().map(|declaration| declaration.name).collect();
    assert_eq!(names, ["from_function", "FromStruct", "FromQueue"]);
    let runtime = FromMacro::runtime(cosi::state::memory())?;
    assert_eq!(runtime.controllers(), ["from_function", "FromStruct", "FromQueue"]);
    Ok(())
}
