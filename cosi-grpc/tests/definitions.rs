//! A runtime whose state is remote publishes its resource definitions
//! through the client, so that any other client (`cosictl get rd`, `cosictl
//! get <alias>`) lists the program's types and resolves their aliases.

mod support;

use cosi::ResourceDefinition;
use cosi::prelude::*;
use cosi::state::META_NAMESPACE;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "HostnameSpecs.grpc-test.cosi.dev", namespace = "network")]
pub struct HostnameSpec {
    pub hostname: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "HostnameStatuses.grpc-test.cosi.dev", namespace = "network", aliases = ["hostname"])]
pub struct HostnameStatus {
    pub hostname: String,
}

#[controller(inputs = [Weak<HostnameSpec>], outputs = [Exclusive<HostnameStatus>], inventory = false)]
async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
    for spec in ctx.list::<HostnameSpec>(&ListOptions::default()).await? {
        ctx.modify::<HostnameStatus>(spec.id(), |status| status.hostname.clone_from(&spec.hostname)).await?;
    }
    Ok(())
}

/// The types whose definition answers to `name`, as `cosictl get` resolves it.
fn resolve(definitions: &[ResourceDefinition], name: &str) -> Vec<String> {
    let mut types: Vec<String> = definitions
        .iter()
        .filter(|definition| {
            definition.r#type.eq_ignore_ascii_case(name) || definition.all_aliases.iter().any(|alias| alias == name)
        })
        .map(|definition| definition.r#type.clone())
        .collect();
    types.sort();
    types
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_on_a_remote_state_publishes_its_types_for_every_client() {
    let client = support::loopback_memory().await;
    let runtime = Runtime::new(client.clone());
    runtime.register(hostname {}).expect("register");
    runtime.start().expect("start");
    // Over the wire `settled` cannot see events in flight, but the
    // publication is the runtime's own work: it is done when `settled` returns.
    tokio::time::timeout(std::time::Duration::from_secs(30), runtime.settled()).await.expect("settles");

    // Another client, as `cosictl` is: the definitions decode from the wire.
    let kind = Kind::new(META_NAMESPACE, <ResourceDefinition as Resource>::TYPE);
    let definitions: Vec<ResourceDefinition> = client
        .list_dynamic(&kind, &ListOptions::default())
        .await
        .expect("list the definitions")
        .iter()
        .filter_map(|resource| cosi_grpc::definition_from_spec(resource.spec()))
        .collect();
    assert_eq!(resolve(&definitions, "rd"), [<ResourceDefinition as Resource>::TYPE]);
    assert_eq!(resolve(&definitions, "hostname"), [HostnameStatus::TYPE]);
    assert_eq!(resolve(&definitions, "hostnamespecs"), [HostnameSpec::TYPE]);
    // Both derive `hs`: the name is ambiguous, and a client says so.
    assert_eq!(resolve(&definitions, "hs"), [HostnameSpec::TYPE, HostnameStatus::TYPE]);
    runtime.shutdown().await;
}
