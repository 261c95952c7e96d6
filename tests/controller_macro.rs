//! What `#[controller]` and `cosi::system!` generate: the declarations, the
//! registrations, the inventory entries and the access the context allows.

use cosi::__private::{Collected, Declared, InputDecl, OutputDecl};
use cosi::controller::{InputKind, OutputKind, Register};
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
pub struct HostnameSpec {
    pub hostname: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
pub struct HostnameStatus {
    pub hostname: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "ServiceSpecs.svc.example.org", namespace = "services")]
pub struct ServiceSpec {
    pub name: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "EtcFileSpecs.files.example.org", namespace = "files")]
pub struct EtcFileSpec {
    pub contents: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Links.net.example.org", namespace = "network")]
pub struct Link {
    pub up: bool,
}

/// Writes a status per spec.
#[controller(inputs = [Strong<HostnameSpec>], outputs = [Exclusive<HostnameStatus>])]
pub async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
    for spec in ctx.list::<HostnameSpec>(&ListOptions::default()).await? {
        ctx.modify::<HostnameStatus>(spec.id(), |status| status.hostname = spec.hostname.clone()).await?;
    }
    ctx.cleanup_outputs::<HostnameStatus>().await
}

#[controller(
    inputs = [
        Weak<ServiceSpec>,
        Weak<ServiceSpec>(namespace = "extra"),
        DestroyReady<EtcFileSpec>(id = "hosts"),
        Weak<Link>(namespace = "other", id = "eth0"),
    ],
    outputs = [Shared<EtcFileSpec>],
    name = "service-files",
)]
#[derive(Default)]
struct ServiceFiles {
    rendered: usize,
}

impl ServiceFiles {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
        for service in ctx.list::<ServiceSpec>(&ListOptions::default()).await? {
            ctx.modify::<EtcFileSpec>(service.id(), |file| file.contents = service.name.clone()).await?;
            self.rendered += 1;
        }
        Ok(())
    }
}

#[controller(inputs = [Primary<Link>, Mapped<HostnameStatus>], outputs = [Shared<EtcFileSpec>], concurrency = 4)]
#[derive(Default)]
struct LinkFiles;

impl LinkFiles {
    async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> Result<Requeue, cosi::Error> {
        let link = ctx.get::<Link>(item).await?;
        ctx.add_finalizers::<Link>(&link, &["link-files"]).await?;
        Ok(Requeue::Never)
    }

    async fn map(&self, _ctx: &Ctx<Self>, input: &ReducedMetadata) -> Vec<Pointer> {
        vec![Link::pointer(input.pointer.id())]
    }
}

#[controller(inputs = [Primary<HostnameSpec>], inventory = false)]
struct Uncollected {
    prefix: String,
}

impl Uncollected {
    async fn reconcile(&self, _ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<()> {
        let _ = (&self.prefix, item);
        Ok(())
    }
}

cosi::system!(
    /// The controllers of this test that the inventory builds.
    pub TestOs = [hostname, ServiceFiles, LinkFiles]
);

#[test]
fn function_declaration() {
    let declaration = hostname::DECLARATION;
    assert_eq!(declaration.name, "hostname");
    assert_eq!(declaration.concurrency, None);
    let [input] = declaration.inputs else { panic!("one input expected: {:?}", declaration.inputs) };
    assert_eq!(
        (input.namespace, input.r#type, input.id, input.kind, input.explicit_namespace),
        ("network", "HostnameSpecs.net.example.org", None, InputKind::Strong, false)
    );
    let [output] = declaration.outputs else { panic!("one output expected: {:?}", declaration.outputs) };
    assert_eq!(
        (output.r#type, output.namespace, output.kind),
        ("HostnameStatuses.net.example.org", "network", OutputKind::Exclusive)
    );
    assert_eq!((output.definition)().display_type, "HostnameStatus");
}

#[test]
fn struct_declaration_with_narrowed_inputs() {
    let declaration = ServiceFiles::DECLARATION;
    assert_eq!(declaration.name, "service-files");
    assert_eq!(declaration.concurrency, None);
    let inputs: Vec<_> = declaration
        .inputs
        .iter()
        .map(|input| (input.namespace, input.r#type, input.id, input.kind, input.explicit_namespace))
        .collect();
    assert_eq!(
        inputs,
        [
            ("services", ServiceSpec::TYPE, None, InputKind::Weak, false),
            ("extra", ServiceSpec::TYPE, None, InputKind::Weak, true),
            ("files", EtcFileSpec::TYPE, Some("hosts"), InputKind::DestroyReady, false),
            ("other", Link::TYPE, Some("eth0"), InputKind::Weak, true),
        ]
    );
    assert_eq!(declaration.outputs, [OutputDecl::of::<EtcFileSpec>(OutputKind::Shared)]);
}

#[test]
fn queue_declaration() {
    let declaration = LinkFiles::DECLARATION;
    assert_eq!(declaration.name, "LinkFiles");
    assert_eq!(declaration.concurrency, Some(4));
    assert_eq!(
        declaration.inputs,
        [InputDecl::of::<Link>(InputKind::Primary), InputDecl::of::<HostnameStatus>(InputKind::Mapped)]
    );
    assert_eq!(Uncollected::DECLARATION.concurrency, Some(1), "one item at a time by default");
}

#[test]
fn registrations_build() {
    let registrations = [
        hostname {}.registration(),
        ServiceFiles::default().registration(),
        LinkFiles.registration(),
        Uncollected { prefix: "x".into() }.registration(),
    ];
    let names: Vec<&str> = registrations.iter().map(|registration| registration.name()).collect();
    assert_eq!(names, ["hostname", "service-files", "LinkFiles", "Uncollected"]);
    for registration in &registrations {
        assert_eq!(registration.name(), registration.declaration().name);
    }
}

#[test]
fn inventory_collects_annotated_controllers_only() {
    let collected: Vec<(&str, &str)> =
        Collected::sorted().iter().map(|collected| (collected.declaration.name, collected.module)).collect();
    assert_eq!(
        collected,
        [("LinkFiles", "controller_macro"), ("hostname", "controller_macro"), ("service-files", "controller_macro")]
    );
    for collected in Collected::sorted() {
        assert_eq!((collected.build)().declaration(), collected.declaration);
    }
}

#[test]
fn system_lists_its_declarations() {
    let names: Vec<&str> = TestOs::DECLARATIONS.iter().map(|declaration| declaration.name).collect();
    assert_eq!(names, ["hostname", "service-files", "LinkFiles"]);
}

#[tokio::test]
async fn system_runtime_registers_every_controller() -> Result<(), cosi::RuntimeError> {
    let runtime = TestOs::runtime(cosi::state::memory())?;
    assert_eq!(runtime.controllers(), ["hostname", "service-files", "LinkFiles"]);
    runtime.register(Uncollected { prefix: "y".into() })?;
    assert_eq!(runtime.controllers(), ["hostname", "service-files", "LinkFiles", "Uncollected"]);
    Ok(())
}

#[tokio::test]
async fn the_function_runs_as_a_controller() -> Result<(), Box<dyn std::error::Error>> {
    let state = cosi::state::memory();
    state.create(Typed::new("host", HostnameSpec { hostname: "talos".into() }), CreateOptions::default()).await?;
    let runtime = Runtime::new(state.clone());
    // `hostname` alone is the function; the controller is the struct of the same name.
    runtime.register(hostname {})?;
    runtime.start()?;
    let status = wait_for::<HostnameStatus>(&state, "host").await?;
    runtime.shutdown().await;
    assert_eq!(status.hostname, "talos");
    assert_eq!(status.metadata().owner(), Some("hostname"));
    Ok(())
}

/// Waits (without a deadline: the test harness has one) until the resource exists.
async fn wait_for<T: Resource>(state: &impl State, id: &str) -> cosi::Result<Typed<T>> {
    loop {
        match state.get::<T>(id).await {
            Ok(resource) => return Ok(resource),
            Err(error) if error.is_not_found() => tokio::task::yield_now().await,
            Err(error) => return Err(error),
        }
    }
}
