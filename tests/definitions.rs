//! The runtime publishes the definitions of every type its program uses in
//! the `meta` namespace, so clients can list types and resolve aliases; and
//! it refuses names that would make an alias mean two types, except the
//! automatically derived ones that COSI lets collide.

use cosi::ResourceDefinition;
use cosi::prelude::*;
use cosi::runtime::{ControllerStatus, RuntimeError, RuntimeOptions};
use cosi::state::{META_NAMESPACE, META_OWNER, Namespace};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "HostnameSpecs.definitions-test.cosi.dev", namespace = "network")]
pub struct HostnameSpec {
    pub hostname: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "HostnameStatuses.definitions-test.cosi.dev",
    namespace = "network",
    aliases = ["hostname"],
    print_columns(name = "Hostname", json_path = "{.hostname}")
)]
pub struct HostnameStatus {
    pub hostname: String,
}

/// Derives the alias `hostname`, which `HostnameStatus` names explicitly.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Hostnames.definitions-test.cosi.dev", namespace = "other")]
pub struct Hostname {
    pub hostname: String,
}

/// Only clients write these; the program registers the type by hand.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "MachineConfigs.definitions-test.cosi.dev", namespace = "config", aliases = ["mc"], sensitive)]
pub struct MachineConfig {
    pub raw: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "LinkStatuses.definitions-test.cosi.dev", namespace = "network", aliases = ["link"])]
pub struct LinkStatus {
    pub up: bool,
}

#[controller(inputs = [Weak<HostnameSpec>], outputs = [Exclusive<HostnameStatus>], inventory = false)]
async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<HostnameSpec>(&ListOptions::default()).await.map(drop)
}

#[controller(inputs = [Weak<Hostname>], outputs = [], inventory = false)]
async fn clashing(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<Hostname>(&ListOptions::default()).await.map(drop)
}

#[controller(inputs = [Weak<LinkStatus>], outputs = [], inventory = false)]
async fn links(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<LinkStatus>(&ListOptions::default()).await.map(drop)
}

async fn published(state: &std::sync::Arc<dyn State>) -> Vec<String> {
    let definitions = state.list::<ResourceDefinition>(&ListOptions::default()).await.expect("list");
    assert!(definitions.iter().all(|definition| definition.metadata().owner() == Some(META_OWNER)));
    definitions.iter().map(|definition| definition.r#type.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_a_program_uses_is_published_when_it_starts_and_when_it_grows() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    runtime.register(hostname {}).expect("register");
    runtime.register_type::<MachineConfig>().expect("register a type");
    // Nothing is written before the start.
    assert!(published(&state).await.is_empty());

    runtime.start().expect("start");
    runtime.settled().await;
    let mut expected = vec![
        ControllerStatus::TYPE,
        HostnameSpec::TYPE,
        HostnameStatus::TYPE,
        MachineConfig::TYPE,
        Namespace::TYPE,
        <ResourceDefinition as Resource>::TYPE,
    ];
    assert_eq!(published(&state).await, expected);
    let meta = state.get::<Namespace>(META_NAMESPACE).await.expect("the meta namespace");
    assert_eq!(meta.metadata().owner(), Some(META_OWNER));
    // The stored definitions are the derived ones, columns and sensitivity included.
    let status = state.get::<ResourceDefinition>(&*HostnameStatus::TYPE.to_lowercase()).await.expect("get");
    assert_eq!(*status.spec(), HostnameStatus::definition());
    let config = state.get::<ResourceDefinition>(&*MachineConfig::TYPE.to_lowercase()).await.expect("get");
    assert_eq!(*config.spec(), MachineConfig::definition());

    // A controller registered later brings its types at once.
    runtime.register(links {}).expect("register");
    runtime.settled().await;
    expected.insert(3, LinkStatus::TYPE);
    assert_eq!(published(&state).await, expected);
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_statuses_the_status_type_is_not_published() {
    let state = cosi::state::memory();
    let mut options = RuntimeOptions::default();
    options.status_namespace = None;
    let runtime = Runtime::with_options(state.clone(), options);
    runtime.register(links {}).expect("register");
    runtime.start().expect("start");
    runtime.settled().await;
    assert_eq!(published(&state).await, [LinkStatus::TYPE, Namespace::TYPE, <ResourceDefinition as Resource>::TYPE]);
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_two_types_would_share_is_refused_unless_both_derive_it() {
    let state = cosi::state::memory();
    let runtime = Runtime::new(state.clone());
    // `HostnameSpecs` and `HostnameStatuses` both derive `hs`: fine.
    runtime.register(hostname {}).expect("types that share a derived alias");
    let specs = HostnameSpec::definition();
    let statuses = HostnameStatus::definition();
    assert!(specs.aliases.contains(&"hs".to_owned()) && statuses.aliases.contains(&"hs".to_owned()));

    // `Hostnames` derives `hostname`, an explicit alias of `HostnameStatuses`.
    let error = runtime.register(clashing {}).expect_err("an alias for two types");
    assert_eq!(
        error,
        RuntimeError::AliasConflict {
            alias: "hostname".to_owned(),
            first: HostnameStatus::TYPE.to_owned(),
            second: Hostname::TYPE.to_owned(),
        }
    );
    let message = error.to_string();
    assert!(message.contains(HostnameStatus::TYPE) && message.contains(Hostname::TYPE), "{message}");
    assert!(message.contains("`hostname`"), "{message}");
    let error = runtime.register_type::<Hostname>().expect_err("the same by hand");
    assert!(matches!(error, RuntimeError::AliasConflict { .. }), "{error:?}");

    // The refused controller is not registered, and its type is not published.
    assert_eq!(runtime.controllers(), ["hostname"]);
    runtime.start().expect("start");
    runtime.settled().await;
    assert!(!published(&state).await.contains(&Hostname::TYPE.to_owned()));
    runtime.shutdown().await;
}

#[test]
fn a_type_with_two_definitions_is_refused() {
    mod elsewhere {
        use cosi::prelude::*;

        /// The same type as the outer `LinkStatus`, with another alias.
        #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[resource(type = "LinkStatuses.definitions-test.cosi.dev", namespace = "network", aliases = ["links"])]
        pub struct LinkStatus {
            pub up: bool,
        }
    }

    let runtime = Runtime::new(cosi::state::memory());
    runtime.register_type::<LinkStatus>().expect("register");
    runtime.register_type::<LinkStatus>().expect("the same definition again");
    let error = runtime.register_type::<elsewhere::LinkStatus>().expect_err("another definition");
    assert_eq!(error, RuntimeError::DefinitionConflict(LinkStatus::TYPE.to_owned()));
}
