use cosi::Resource;
use cosi::resource::{PrintColumn, Sensitivity};
use serde::{Deserialize, Serialize};

// Keys may be spread over several attributes, with trailing commas.
#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "WireguardKeys.net.example.org",
    namespace = "secrets",
    aliases = ["wgkey", "wk"],
)]
#[resource(
    print_columns(name = "Public Key", json_path = "{.publicKey}"),
    print_columns(json_path = "{.listenPort}", name = "Port"),
    sensitive,
    skip_automatic_aliases,
    crate = ::cosi,
)]
#[serde(rename_all = "camelCase")]
pub struct WireguardKey {
    pub public_key: String,
    pub private_key: String,
    pub listen_port: u16,
}

fn main() {
    assert_eq!(WireguardKey::TYPE, "WireguardKeys.net.example.org");
    assert_eq!(WireguardKey::NAMESPACE, "secrets");
    assert!(WireguardKey::SENSITIVE);

    let definition = WireguardKey::definition();
    assert_eq!(definition.r#type, WireguardKey::TYPE);
    assert_eq!(definition.display_type, "WireguardKey");
    assert_eq!(definition.default_namespace, "secrets");
    assert_eq!(definition.aliases, ["wgkey", "wk"]);
    assert_eq!(definition.all_aliases, ["wgkey", "wk"]);
    assert_eq!(
        definition.print_columns,
        [
            PrintColumn { name: "Public Key".into(), json_path: "{.publicKey}".into() },
            PrintColumn { name: "Port".into(), json_path: "{.listenPort}".into() },
        ]
    );
    assert_eq!(definition.sensitivity, Sensitivity::Sensitive);
}
