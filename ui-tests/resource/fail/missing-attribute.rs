use cosi::Resource;
use serde::{Deserialize, Serialize};

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    pub up: bool,
}

fn main() {}
