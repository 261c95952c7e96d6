// Instances of one generic controller, listed under the names they are registered with.
use cosi::controller::Merge;
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Hostnames.example.org", namespace = "default")]
pub struct Hostname {
    pub name: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Resolvers.example.org", namespace = "default")]
pub struct Resolver {
    pub servers: Vec<String>,
}

#[controller(inputs = [Weak<Hostname>, Weak<Resolver>])]
async fn reader(_ctx: &mut Ctx) {}

const RESOLVER_MERGE: &str = "ResolverMerge";

cosi::system!(
    pub MyOs = [
        reader,
        Merge<Hostname> as "HostnameMerge",
        Merge<Resolver> as RESOLVER_MERGE,
    ]
);

fn main() {
    let names: Vec<&str> = MyOs::DECLARATIONS.iter().map(|declaration| declaration.name).collect();
    assert_eq!(names, ["reader", "HostnameMerge", "ResolverMerge"]);
    let outputs = MyOs::DECLARATIONS[1].outputs;
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].r#type, Hostname::TYPE);
}
