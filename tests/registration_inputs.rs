//! Inputs given at registration (`.with_inputs(...)`): each instance of a
//! controller reads, and is woken by, its own inputs from its first
//! reconcile, the runtime checks them as it checks `update_inputs`, and the
//! graph shows them.

use cosi::controller::{MERGE_SOURCE, Merge};
use cosi::prelude::*;
use cosi::runtime::{Conflict, ControllerStatus, GraphInput, RUNTIME_NAMESPACE, RuntimeError};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "LinkStatuses.inputs-test.cosi.dev", namespace = "network")]
pub struct LinkStatus {
    pub up: bool,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "LinkReports.inputs-test.cosi.dev", namespace = "network")]
pub struct LinkReport {
    /// What the instance that wrote it could see, as `id=up` pairs.
    pub seen: Vec<String>,
}

/// Reports every link it may read, into a report named after itself.
#[controller(inputs = [Weak<LinkStatus>], outputs = [Shared<LinkReport>], inventory = false)]
async fn reporter(ctx: &mut Ctx) -> cosi::Result<()> {
    let mut seen = Vec::new();
    let inputs = ctx.dynamic().inputs();
    for input in inputs.iter() {
        match &input.id {
            Some(id) => match ctx.get::<LinkStatus>(input.kind.pointer(&**id)).await {
                Ok(link) => seen.push(format!("{id}={}", link.up)),
                Err(error) if error.is_not_found() => (),
                Err(error) => return Err(error),
            },
            None => {
                let links = ctx.list_in::<LinkStatus>(input.kind.namespace(), &ListOptions::default()).await?;
                seen.extend(links.iter().map(|link| format!("{}={}", link.id(), link.up)));
            }
        }
    }
    let name = ctx.name().to_owned();
    ctx.modify::<LinkReport>(&*name, |report| report.seen = seen.clone()).await?;
    Ok(())
}

/// Reads a type it also writes: destroy-ready in its default namespace.
#[controller(inputs = [DestroyReady<LinkReport>, Weak<LinkStatus>], outputs = [Exclusive<LinkReport>], inventory = false)]
async fn exclusive_reporter(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<LinkStatus>(&ListOptions::default()).await.map(drop)
}

async fn set_link(state: &std::sync::Arc<dyn State>, namespace: &str, id: &str, up: bool) {
    let pointer = Pointer::new(namespace, LinkStatus::TYPE, id);
    state.modify::<LinkStatus>(pointer, UpdateOptions::default(), |link| link.up = up).await.expect("write a link");
}

async fn seen(state: &std::sync::Arc<dyn State>, name: &str) -> Vec<String> {
    state.get::<LinkReport>(name).await.map(|report| report.seen.clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_reads_and_is_woken_by_its_own_inputs_from_the_first_reconcile() {
    let state = cosi::state::memory();
    for id in ["eth0", "eth1"] {
        set_link(&state, "network", id, true).await;
    }
    set_link(&state, "other", "eth9", true).await;
    let runtime = Runtime::new(state.clone());
    for id in ["eth0", "eth1"] {
        let inputs = [Input::of::<LinkStatus>(InputKind::Weak).with_id(id)];
        runtime.register(reporter {}.named(format!("link-{id}")).with_inputs(inputs)).expect("register");
    }
    runtime
        .register(
            reporter {}.named("other").with_inputs([Input::of::<LinkStatus>(InputKind::Weak).in_namespace("other")]),
        )
        .expect("register");
    runtime.start().expect("start");
    runtime.settled().await;
    assert_eq!(seen(&state, "link-eth0").await, ["eth0=true"]);
    assert_eq!(seen(&state, "link-eth1").await, ["eth1=true"]);
    assert_eq!(seen(&state, "other").await, ["eth9=true"]);

    // A change of eth1 wakes its instance only.
    let before = runtime.stats("link-eth0").expect("stats").reconciles;
    set_link(&state, "network", "eth1", false).await;
    runtime.settled().await;
    assert_eq!(seen(&state, "link-eth1").await, ["eth1=false"]);
    assert_eq!(runtime.stats("link-eth0").expect("stats").reconciles, before, "eth0's instance woke for eth1");

    // The graph and the published statuses show the registrations' inputs.
    let graph = runtime.graph();
    let inputs: Vec<(&str, &[GraphInput])> =
        graph.controllers.iter().map(|controller| (controller.name.as_str(), controller.inputs.as_slice())).collect();
    let expected = |namespace: &str, id: Option<&str>| {
        vec![GraphInput {
            namespace: namespace.to_owned(),
            r#type: LinkStatus::TYPE.to_owned(),
            id: id.map(str::to_owned),
            kind: InputKind::Weak,
        }]
    };
    assert_eq!(inputs[0], ("link-eth0", expected("network", Some("eth0")).as_slice()));
    assert_eq!(inputs[1], ("link-eth1", expected("network", Some("eth1")).as_slice()));
    assert_eq!(inputs[2], ("other", expected("other", None).as_slice()));
    runtime.shutdown().await;
    let status = state
        .get::<ControllerStatus>(Pointer::new(RUNTIME_NAMESPACE, ControllerStatus::TYPE, "link-eth1"))
        .await
        .expect("the published status");
    assert_eq!(status.inputs, expected("network", Some("eth1")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_cannot_read_beyond_its_inputs() {
    // Narrowed to one ID, the instance may not list the kind: its list fails.
    #[controller(inputs = [Weak<LinkStatus>], outputs = [], inventory = false)]
    async fn lister(ctx: &mut Ctx) -> cosi::Result<()> {
        ctx.list::<LinkStatus>(&ListOptions::default()).await.map(drop)
    }

    let runtime = Runtime::new(cosi::state::memory());
    runtime
        .register(lister {}.with_inputs([Input::of::<LinkStatus>(InputKind::Weak).with_id("eth0")]))
        .expect("register");
    runtime.start().expect("start");
    runtime.settled().await;
    let stats = runtime.stats("lister").expect("stats");
    assert!(stats.last_error.as_deref().is_some_and(|error| error.contains("cannot list")), "{stats:?}");
    runtime.shutdown().await;
}

#[test]
fn registration_checks_the_inputs_as_update_inputs_does_and_registers_nothing_on_error() {
    let runtime = Runtime::new(cosi::state::memory());
    let refused = |registration: cosi::controller::Registration| match runtime.register(registration) {
        Err(RuntimeError::InvalidController(conflict)) => conflict,
        other => panic!("expected a refusal, got {other:?}"),
    };

    let conflict = refused(reporter {}.with_inputs([Input::of::<LinkReport>(InputKind::Weak).in_namespace("x")]));
    assert!(matches!(&conflict, Conflict::UndeclaredInput { namespace, .. } if namespace == "x"), "{conflict:?}");
    assert!(conflict.to_string().contains("not among its declared inputs"), "{conflict}");
    let conflict = refused(reporter {}.with_inputs([Input::of::<LinkStatus>(InputKind::Primary)]));
    assert!(matches!(conflict, Conflict::MixedInputKinds { kind: InputKind::Primary, .. }), "{conflict:?}");
    assert!(conflict.to_string().contains("primary and mapped inputs belong to queue controllers"), "{conflict}");
    let conflict = refused(
        exclusive_reporter {}
            .with_inputs([Input::of::<LinkStatus>(InputKind::Weak), Input::of::<LinkStatus>(InputKind::Strong)]),
    );
    assert!(matches!(&conflict, Conflict::DuplicateInput { r#type, .. } if r#type == LinkStatus::TYPE), "{conflict:?}");
    let conflict = refused(reporter {}.with_inputs([Input::of::<LinkStatus>(InputKind::Weak).with_id("")]));
    assert!(
        matches!(&conflict, Conflict::InvalidInput { reason, .. } if reason.contains("id is empty")),
        "{conflict:?}"
    );
    assert!(runtime.controllers().is_empty(), "a refused registration left {:?}", runtime.controllers());

    // Output conflicts are the declaration's: other inputs change nothing.
    runtime.register(exclusive_reporter {}.named("first")).expect("register");
    let other_inputs = [Input::of::<LinkStatus>(InputKind::Weak).in_namespace("elsewhere")];
    let error =
        runtime.register(exclusive_reporter {}.named("second").with_inputs(other_inputs)).expect_err("conflict");
    assert!(matches!(error, RuntimeError::Conflict(Conflict::OutputConflict { .. })), "{error:?}");
    assert_eq!(runtime.controllers(), ["first"]);
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "HostnameSpecs.inputs-test.cosi.dev", namespace = "network")]
pub struct HostnameSpec {
    pub hostname: String,
}

#[test]
fn merge_sets_its_source_at_registration() {
    let runtime = Runtime::new(cosi::state::memory());
    let merge = Merge::<HostnameSpec>::new("hostname-merge", "network-config", "network", |spec| {
        (spec.id().rsplit('/').next().unwrap_or_default().to_owned(), 0)
    });
    let registration = merge.registration();
    let inputs = registration.inputs();
    assert!(inputs.iter().all(|input| input.kind.namespace() != MERGE_SOURCE), "{inputs:?}");
    runtime.register(registration).expect("register");
    let graph = runtime.graph();
    let inputs: Vec<(&str, InputKind)> =
        graph.controllers[0].inputs.iter().map(|input| (input.namespace.as_str(), input.kind)).collect();
    assert_eq!(inputs, [("network", InputKind::DestroyReady), ("network-config", InputKind::Weak)]);
}
