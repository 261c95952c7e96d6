// `crate = ...` points the expansion at `cosi` when it is not `::cosi`:
// renamed, or re-exported by another crate.
extern crate cosi as renamed;

mod facade {
    pub use ::cosi as core_types;
}

use serde::{Deserialize, Serialize};

#[derive(renamed::Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "Links.net.example.org", namespace = "network", crate = renamed)]
pub struct LinkSpec {
    pub up: bool,
}

#[derive(facade::core_types::Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "Routes.net.example.org", namespace = "network", crate = crate::facade::core_types)]
pub struct RouteSpec {
    pub gateway: String,
}

fn main() {
    use renamed::Resource;

    assert_eq!(LinkSpec::TYPE, "Links.net.example.org");
    assert_eq!(LinkSpec::definition().display_type, "Link");
    assert_eq!(RouteSpec::TYPE, "Routes.net.example.org");
    assert_eq!(RouteSpec::definition().display_type, "Route");
}
