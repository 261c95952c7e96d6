//! The `meta` namespace: namespaces and resource definitions published through `Registry`.

use cosi::ResourceDefinition;
use cosi::prelude::*;
use cosi::resource::{DefinitionOptions, Sensitivity};
use cosi::state::{META_NAMESPACE, META_OWNER, Namespace, Registry};

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

    let meta = state.get::<Namespace>(META_NAMESPACE).await.unwrap();
    assert_eq!(meta.metadata().owner(), Some(META_OWNER));
    assert!(!meta.description.is_empty());

    let definitions = state.list::<ResourceDefinition>(&ListOptions::default()).await.unwrap();
    let ids: Vec<&str> = definitions.iter().map(|definition| definition.id()).collect();
    assert_eq!(ids, ["namespaces.meta.cosi.dev", "resourcedefinitions.meta.cosi.dev"]);

    // The stored definitions are the derived ones (whose aliases `naming.rs` pins down).
    assert_eq!(*definitions[0].spec(), Namespace::definition());
    assert_eq!(*definitions[1].spec(), ResourceDefinition::definition());
    assert!(definitions[1].aliases.iter().any(|alias| alias == "api-resources"));
    assert!(definitions[0].aliases.iter().any(|alias| alias == "ns"));
    assert!(definitions.iter().all(|definition| definition.metadata().owner() == Some(META_OWNER)));
}

#[tokio::test]
async fn registering_a_type_publishes_its_derived_definition() {
    let state = cosi::state::memory();
    let registry = Registry::new(&*state);
    registry.register::<MachineConfig>().await.unwrap();

    let stored = state.get::<ResourceDefinition>("machineconfigs.config.example.org").await.unwrap();
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
    assert_eq!(state.get::<ResourceDefinition>(id).await.unwrap().metadata().version(), Version::new(1));

    let mut changed = MachineConfig::definition();
    changed.print_columns.clear();
    registry.register_definition(changed.clone()).await.unwrap();
    let stored = state.get::<ResourceDefinition>(id).await.unwrap();
    assert_eq!(stored.metadata().version(), Version::new(2));
    assert_eq!(*stored.spec(), changed);
}

#[tokio::test]
async fn namespaces_are_published_and_bad_names_are_rejected() {
    let state = cosi::state::memory();
    let registry = Registry::new(&*state);
    registry.register_namespace("network", "Network configuration").await.unwrap();
    let network = state.get::<Namespace>("network").await.unwrap();
    assert_eq!(network.description, "Network configuration");

    for bad in ["", "two words", "tab\there"] {
        let err = registry.register_namespace(bad, "bad").await.unwrap_err();
        assert!(err.is_invalid_argument(), "{bad:?}: {err}");
    }
}

#[test]
fn run_time_definitions_follow_the_naming_rules() {
    let options = DefinitionOptions { aliases: vec!["hostname".into()], ..DefinitionOptions::default() };
    let definition = ResourceDefinition::new("HostnameStatuses.net.talos.dev", "network", options).unwrap();
    assert_eq!(definition.display_type, "HostnameStatus");
    assert_eq!(definition.aliases, ["hostname", "hostnamestatus", "hs"]);
    assert_eq!(definition.id(), "hostnamestatuses.net.talos.dev");

    let skipped = DefinitionOptions { aliases: vec!["hn".into()], skip_automatic_aliases: true, ..Default::default() };
    let definition = ResourceDefinition::new("HostnameStatuses.net.talos.dev", "network", skipped).unwrap();
    assert_eq!((definition.aliases, definition.all_aliases), (vec!["hn".to_owned()], vec!["hn".to_owned()]));

    for (bad, aliases, reason) in [
        ("hostnames", vec![], "missing suffix"),
        ("hostnames.net", vec![], "name should be in CamelCase"),
        ("Hostname.net", vec![], "name should be plural"),
        ("Hostnames.Net", vec![], "suffix doesn't match"),
        ("Hostnames.net", vec!["HN"], "should be lowercase"),
        ("Hostnames.net", vec!["h n"], "contains the character"),
        ("Hostnames.net", vec!["hn", "hn"], "duplicate alias"),
    ] {
        let options =
            DefinitionOptions { aliases: aliases.into_iter().map(Into::into).collect(), ..Default::default() };
        let err = ResourceDefinition::new(bad, "network", options).unwrap_err();
        assert!(err.is_invalid_argument() && err.to_string().contains(reason), "{bad}: {err}");
    }
    let err = ResourceDefinition::new("Hostnames.net", "two words", DefinitionOptions::default()).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
}
