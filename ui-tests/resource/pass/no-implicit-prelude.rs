// The expansion names everything through `::cosi::__private`, so it compiles
// in a module without the standard prelude.
#![no_implicit_prelude]

#[derive(
    ::cosi::Resource,
    ::std::clone::Clone,
    ::std::fmt::Debug,
    ::std::cmp::PartialEq,
    ::serde::Serialize,
    ::serde::Deserialize,
)]
#[resource(type = "Links.net.example.org", namespace = "network", aliases = ["lk"])]
pub struct LinkSpec {
    pub up: bool,
}

fn main() {
    ::std::assert_eq!(<LinkSpec as ::cosi::Resource>::definition().aliases, ["lk", "link"]);
}
