use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.example.org", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.example.org", namespace = "default")]
pub struct Status {}

#[controller(outputs = [Shared<Status>])]
async fn first(_ctx: &mut Ctx) {}

#[controller(outputs = [Exclusive<Status>])]
async fn second(_ctx: &mut Ctx) {}

cosi::system!(MyOs = [first, second]);

fn main() {}
