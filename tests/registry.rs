//! The `meta` namespace: namespaces and resource definitions published through `Registry`.

use cosi::prelude::*;
use cosi::state::{META_NAMESPACE, META_OWNER, Namespace, Registry};
use cosi::{ResourceDefinition, resource::Sensitivity};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "MachineConfigs.config.example.org",
    namespace = "config",
    aliases = ["mc"],
    print_columns(name = "Version", json_path = "{.version}"),
    sensitive
)]
struct MachineConfig {
    version: String,
}

#[tokio::test]
async fn defaults_publish_the_meta_namespace_and_its_types() {
    let state = cosi::state::memory();
    Registry::new(&*state).register_defaults().await.unwrap();

    let meta = state.get_typed::<Namespace>(META_NAMESPACE).await.unwrap();
    assert_eq!(meta.metadata().owner(), Some(META_OWNER));
    assert!(!meta.description.is_empty());

    let definitions = state.list_typed::<ResourceDefinition>(&ListOptions::default()).await.unwrap();
    let ids: Vec<&str> = definitions.iter().map(|definition| definition.id()).collect();
    assert_eq!(ids, ["namespaces.meta.cosi.dev", "resourcedefinitions.meta.cosi.dev"]);

    let rd = &definitions[1];
    assert_eq!(rd.r#type, "ResourceDefinitions.meta.cosi.dev");
    assert_eq!(rd.aliases, ["api-resources", "resourcedefinition", "rd", "rds"]);
    assert_eq!(
        rd.all_aliases,
        [
            "resourcedefinitions",
            "resourcedefinitions.meta",
            "resourcedefinitions.meta.cosi",
            "api-resources",
            "resourcedefinition",
            "rd",
            "rds"
        ]
    );
    assert_eq!(rd.print_columns[0].json_path, "{.aliases[:]}");

    let ns = &definitions[0];
    assert_eq!(ns.aliases, ["ns", "namespace"]);
    assert_eq!(ns.all_aliases, ["namespaces", "namespaces.meta", "namespaces.meta.cosi", "ns", "namespace"]);
}

#[tokio::test]
async fn registering_a_type_publishes_its_derived_definition() {
    let state = cosi::state::memory();
    let registry = Registry::new(&*state);
    registry.register::<MachineConfig>().await.unwrap();

    let stored = state.get_typed::<ResourceDefinition>("machineconfigs.config.example.org").await.unwrap();
    assert_eq!(*stored.spec(), MachineConfig::definition());
    assert_eq!(stored.display_type, "MachineConfig");
    assert_eq!(stored.default_namespace, "config");
    assert_eq!(stored.sensitivity, Sensitivity::Sensitive);
    assert_eq!(stored.metadata().owner(), Some(META_OWNER));
}

#[tokio::test]
async fn registering_again_writes_nothing_and_a_changed_definition_is_updated() {
    let state = cosi::state::memory();
    let registry = Registry::new(&*state);
    registry.register::<MachineConfig>().await.unwrap();
    registry.register::<MachineConfig>().await.unwrap();
    let id = "machineconfigs.config.example.org";
    assert_eq!(state.get_typed::<ResourceDefinition>(id).await.unwrap().metadata().version(), Version::new(1));

    let mut changed = MachineConfig::definition();
    changed.print_columns.clear();
    registry.register_definition(changed.clone()).await.unwrap();
    let stored = state.get_typed::<ResourceDefinition>(id).await.unwrap();
    assert_eq!(stored.metadata().version(), Version::new(2));
    assert_eq!(*stored.spec(), changed);
}

#[tokio::test]
async fn namespaces_are_published_and_bad_names_are_rejected() {
    let state = cosi::state::memory();
    let registry = Registry::new(&*state);
    registry.register_namespace("network", "Network configuration").await.unwrap();
    let network = state.get_typed::<Namespace>("network").await.unwrap();
    assert_eq!(network.description, "Network configuration");

    for bad in ["", "two words", "tab\there"] {
        let err = registry.register_namespace(bad, "bad").await.unwrap_err();
        assert!(err.is_invalid_argument(), "{bad:?}: {err}");
    }
}

#[test]
fn run_time_definitions_follow_the_naming_rules() {
    let definition = ResourceDefinition::new(
        "HostnameStatuses.net.talos.dev",
        "network",
        &["hostname"],
        vec![],
        Sensitivity::NonSensitive,
    )
    .unwrap();
    assert_eq!(definition.display_type, "HostnameStatus");
    assert_eq!(definition.aliases, ["hostname", "hostnamestatus", "hs"]);
    assert_eq!(definition.id(), "hostnamestatuses.net.talos.dev");

    for (bad, reason) in [
        ("hostnames", "missing suffix"),
        ("hostnames.net", "name should be in CamelCase"),
        ("Hostname.net", "name should be plural"),
        ("Hostnames.Net", "suffix doesn't match"),
    ] {
        let err = ResourceDefinition::new(bad, "network", &[], vec![], Sensitivity::NonSensitive).unwrap_err();
        assert!(err.is_invalid_argument() && err.to_string().contains(reason), "{bad}: {err}");
    }
}
