use cosi::Resource;
use serde::{Deserialize, Serialize};

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "Links.net.example.org", namespace = "network")]
pub struct LinkSpec {
    pub up: bool,
}

fn main() {
    assert_eq!(LinkSpec::TYPE, "Links.net.example.org");
    assert_eq!(LinkSpec::NAMESPACE, "network");
    assert!(!LinkSpec::SENSITIVE);

    let definition = LinkSpec::definition();
    assert_eq!(definition.display_type, "Link");
    assert_eq!(definition.aliases, ["link"]);
    assert_eq!(definition.all_aliases, ["links", "links.net", "links.net.example", "link"]);
}
