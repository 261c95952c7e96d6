//! `#[derive(Resource)]` through the `cosi` facade: the constants, the
//! definition computed at compile time, and its agreement with the definition
//! `ResourceDefinition::new` computes at run time from the same input.

use cosi::resource::{DefinitionOptions, PrintColumn, Sensitivity};
use cosi::state::Namespace;
use cosi::{Kind, Pointer, Resource, ResourceDefinition};
use serde::{Deserialize, Serialize};

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "HostnameStatuses.net.example.org",
    namespace = "network",
    aliases = ["hostname", "hn"],
    print_columns(name = "Hostname", json_path = "{.hostname}"),
    print_columns(name = "Domain", json_path = "{.domainname}"),
)]
pub struct HostnameStatus {
    pub hostname: String,
    pub domainname: String,
}

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "Links.net.example.org", namespace = "network")]
pub struct LinkSpec {
    pub up: bool,
}

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "CertificateKeys.secrets.example.org", namespace = "secrets", sensitive)]
pub struct CertificateKey {
    pub pem: String,
}

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "Machines.example.org", namespace = "default", aliases = ["m"], skip_automatic_aliases)]
pub struct MachineSpec {
    pub arch: String,
}

#[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[resource(type = "MachineStages.runtime.example.org", namespace = "runtime")]
pub enum MachineStage {
    Booting,
    Running,
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// What `ResourceDefinition::new` computes for the same input as `T`'s attribute.
fn at_run_time<T: Resource>(aliases: &[&str]) -> ResourceDefinition {
    at_run_time_with::<T>(aliases, false)
}

fn at_run_time_with<T: Resource>(aliases: &[&str], skip_automatic_aliases: bool) -> ResourceDefinition {
    let definition = T::definition();
    let options = DefinitionOptions {
        aliases: strings(aliases),
        skip_automatic_aliases,
        print_columns: definition.print_columns,
        sensitivity: definition.sensitivity,
    };
    ResourceDefinition::new(T::TYPE, T::NAMESPACE, options)
        .expect("the derive accepted this type, so must the run-time path")
}

#[test]
fn constants() {
    assert_eq!(HostnameStatus::TYPE, "HostnameStatuses.net.example.org");
    assert_eq!(HostnameStatus::NAMESPACE, "network");
    assert_eq!([HostnameStatus::SENSITIVE, CertificateKey::SENSITIVE], [false, true]);
    assert_eq!(MachineStage::TYPE, "MachineStages.runtime.example.org");
}

#[test]
fn kind_and_pointer_use_the_default_namespace() {
    assert_eq!(LinkSpec::kind(), Kind::new("network", "Links.net.example.org"));
    assert_eq!(LinkSpec::pointer("eth0"), Pointer::new("network", "Links.net.example.org", "eth0"));
}

#[test]
fn definition() {
    let definition = HostnameStatus::definition();
    assert_eq!(definition.r#type, "HostnameStatuses.net.example.org");
    assert_eq!(definition.display_type, "HostnameStatus");
    assert_eq!(definition.default_namespace, "network");
    assert_eq!(definition.aliases, strings(&["hostname", "hn", "hostnamestatus", "hs"]));
    assert_eq!(
        definition.all_aliases,
        strings(&[
            "hostnamestatuses",
            "hostnamestatuses.net",
            "hostnamestatuses.net.example",
            "hostname",
            "hn",
            "hostnamestatus",
            "hs",
        ])
    );
    assert_eq!(
        definition.print_columns,
        [
            PrintColumn { name: "Hostname".to_owned(), json_path: "{.hostname}".to_owned() },
            PrintColumn { name: "Domain".to_owned(), json_path: "{.domainname}".to_owned() },
        ]
    );
    assert_eq!(definition.sensitivity, Sensitivity::NonSensitive);
    assert_eq!(definition.id(), "hostnamestatuses.net.example.org");
}

#[test]
fn sensitive() {
    let definition = CertificateKey::definition();
    assert_eq!(definition.sensitivity, Sensitivity::Sensitive);
    assert_eq!(definition.default_namespace, "secrets");
    // `CK` does not end in `S`, so `cks` is an alias too.
    assert_eq!(definition.aliases, strings(&["certificatekey", "ck", "cks"]));
}

#[test]
fn skip_automatic_aliases() {
    let definition = MachineSpec::definition();
    assert_eq!(definition.display_type, "Machine");
    assert_eq!(definition.aliases, strings(&["m"]));
    assert_eq!(definition.all_aliases, strings(&["m"]));
}

#[test]
fn enum_spec() {
    let definition = MachineStage::definition();
    assert_eq!(definition.display_type, "MachineStage");
    assert_eq!(definition.aliases, strings(&["machinestage", "ms"]));
}

/// The meta types of `cosi` derive `Resource` too: the Go runtime's worked examples.
#[test]
fn meta_types() {
    let definition = ResourceDefinition::definition();
    assert_eq!(definition.r#type, "ResourceDefinitions.meta.cosi.dev");
    assert_eq!(definition.default_namespace, "meta");
    assert_eq!(definition.aliases, strings(&["api-resources", "resourcedefinition", "rd", "rds"]));
    assert_eq!(
        definition.all_aliases,
        strings(&[
            "resourcedefinitions",
            "resourcedefinitions.meta",
            "resourcedefinitions.meta.cosi",
            "api-resources",
            "resourcedefinition",
            "rd",
            "rds",
        ])
    );
    assert_eq!(
        definition.print_columns,
        [PrintColumn { name: "Aliases".to_owned(), json_path: "{.aliases[:]}".to_owned() }]
    );

    let definition = Namespace::definition();
    assert_eq!(definition.r#type, "Namespaces.meta.cosi.dev");
    assert_eq!(definition.aliases, strings(&["ns", "namespace"]));
    assert_eq!(
        definition.all_aliases,
        strings(&["namespaces", "namespaces.meta", "namespaces.meta.cosi", "ns", "namespace"])
    );
}

/// Compile time and run time share one implementation of the naming rules.
#[test]
fn same_definition_at_run_time() {
    assert_eq!(HostnameStatus::definition(), at_run_time::<HostnameStatus>(&["hostname", "hn"]));
    assert_eq!(LinkSpec::definition(), at_run_time::<LinkSpec>(&[]));
    assert_eq!(CertificateKey::definition(), at_run_time::<CertificateKey>(&[]));
    assert_eq!(MachineStage::definition(), at_run_time::<MachineStage>(&[]));
    assert_eq!(MachineSpec::definition(), at_run_time_with::<MachineSpec>(&["m"], true));
    assert_eq!(ResourceDefinition::definition(), at_run_time::<ResourceDefinition>(&["api-resources"]));
    assert_eq!(Namespace::definition(), at_run_time::<Namespace>(&["ns"]));
}

/// The run-time path rejects what the derive rejects, with the same reason.
#[test]
fn same_rules_at_run_time() {
    let cases = [
        ("Links", "missing suffix"),
        ("links.net.example.org", "name should be in CamelCase"),
        ("Link.net.example.org", "name should be plural"),
        ("Links.Net.example.org", "suffix doesn't match"),
    ];
    for (r#type, reason) in cases {
        let error = ResourceDefinition::new(r#type, "network", DefinitionOptions::default()).expect_err(r#type);
        assert!(error.is_invalid_argument(), "{type}: {error}");
        assert!(error.to_string().contains(reason), "{type}: {error}");
    }
}
