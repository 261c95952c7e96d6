use cosi::Resource;
use serde::{Deserialize, Serialize};

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "Links.net.example.org", namespace = "net work")]
pub struct LinkSpec {
    pub up: bool,
}

fn main() {}
