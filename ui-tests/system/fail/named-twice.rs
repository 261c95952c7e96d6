// Two controllers under one name: the graph check refuses it, as the runtime would.
use cosi::controller::Merge;
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Hostnames.example.org", namespace = "default")]
pub struct Hostname {}

#[controller(inputs = [Weak<Hostname>])]
async fn reader(_ctx: &mut Ctx) {}

cosi::system!(MyOs = [Merge<Hostname> as "HostnameMerge", reader as "HostnameMerge"]);

fn main() {}
