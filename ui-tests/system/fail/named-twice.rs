// Two instances under one name: the graph check refuses it, as the runtime would.
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

cosi::system!(MyOs = [Merge<Hostname> as "Merge", Merge<Resolver> as "Merge"]);

fn main() {}
