use cosi::Resource;

#[derive(Resource)]
#[resource(type = "Links.net.example.org", namespace = "network")]
pub union LinkSpec {
    pub up: u8,
}

fn main() {}
