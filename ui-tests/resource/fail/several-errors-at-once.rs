use cosi::Resource;
use serde::{Deserialize, Serialize};

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "Link.net.example.org",
    namespace = "",
    alias = ["lk"],
    print_columns(name = "Up", json_path = "{.up}"),
    sensitive = true,
)]
pub struct LinkSpec {
    pub up: bool,
}

// The stub impl keeps uses of the type free of errors of their own.
fn main() {
    let _ = LinkSpec::TYPE;
    let _ = <LinkSpec as Resource>::definition;
}
