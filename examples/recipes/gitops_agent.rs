//! Recipe: a GitOps agent. A directory of YAML manifests (a checkout of a Git
//! repository) is the desired state. A sync controller turns each file into
//! an `App` resource and removes the apps whose file is gone; a generic
//! transform renders each app into the `Deployment` an orchestrator would
//! receive. A broken manifest fails the sync, and the last good state stays.
//!
//! Run it with `cargo run --example gitops_agent`; the book's recipes
//! chapter draws its graph, and `cargo test -p cosi-book` runs it.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;

use cosi::controller::{Transform, Waker};
use cosi::prelude::*;
use cosi::runtime::Graph;
use parking_lot::Mutex;

/// An application as its manifest describes it.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Apps.gitops.example.org", namespace = "apps")]
#[serde(deny_unknown_fields)]
pub struct App {
    pub image: String,
    pub replicas: u32,
}

/// What the orchestrator is asked to run for an app.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Deployments.gitops.example.org", namespace = "apps", aliases = ["deploy"])]
pub struct Deployment {
    pub containers: Vec<String>,
}

/// Asks the agent to sync now: a webhook on push, or a timer.
#[derive(Clone, Debug, Default)]
pub struct SyncTrigger {
    waker: Arc<Mutex<Option<Waker>>>,
}

impl SyncTrigger {
    /// Syncs once more (coalesced with a sync not yet started).
    pub fn pull(&self) {
        if let Some(waker) = &*self.waker.lock() {
            waker.wake();
        }
    }
}

/// Reads every `*.yaml` of the checkout into `App`s. An app removed from
/// the checkout is torn down, and destroyed once the render controller (a
/// strong reader of apps) lets go: `DestroyReady<App>` wakes it then.
#[controller(name = "gitops.SyncController", inputs = [DestroyReady<App>], outputs = [Exclusive<App>])]
#[derive(Default)]
pub struct SyncController {
    checkout: PathBuf,
    trigger: SyncTrigger,
}

impl SyncController {
    async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.trigger.waker.lock().get_or_insert_with(|| ctx.waker());
        // Parse everything before writing anything: one broken file keeps the whole last good state.
        let mut apps = Vec::new();
        for entry in std::fs::read_dir(&self.checkout)? {
            let path = entry?.path();
            let (Some(name), Some("yaml")) =
                (path.file_stem().and_then(|stem| stem.to_str()), path.extension().and_then(|ext| ext.to_str()))
            else {
                continue;
            };
            let app: App = cosi::resource::from_yaml(&std::fs::read_to_string(&path)?)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            apps.push((name.to_owned(), app));
        }
        for (name, app) in apps {
            ctx.modify::<App>(&name, |stored| *stored.spec_mut() = app.clone()).await?;
        }
        ctx.cleanup_outputs::<App>().await?;
        Ok(())
    }
}

/// Each app becomes a deployment of `replicas` containers.
pub fn render() -> Transform<App, Deployment> {
    Transform::<App, Deployment>::new(
        "gitops.RenderController",
        |app| Some(app.id().to_owned()),
        |app, deployment| {
            deployment.containers =
                (0..app.replicas).map(|replica| format!("{}-{replica}={}", app.id(), app.image)).collect();
            Ok(())
        },
    )
}

/// Registers the agent's controllers on `runtime`.
pub fn register(runtime: &Runtime, checkout: PathBuf, trigger: &SyncTrigger) -> Result<(), cosi::RuntimeError> {
    runtime.register(SyncController { checkout, trigger: trigger.clone() })?;
    runtime.register(render())
}

/// The recipe's controller graph.
pub fn graph() -> Graph {
    let runtime = Runtime::new(cosi::state::memory());
    register(&runtime, PathBuf::new(), &SyncTrigger::default()).expect("the recipe's controllers register");
    runtime.graph()
}

async fn deployed(state: &Arc<dyn State>) -> cosi::Result<Vec<String>> {
    let deployments = state.list::<Deployment>(&ListOptions::default()).await?;
    Ok(deployments.iter().flat_map(|deployment| deployment.containers.clone()).collect())
}

/// Adds, changes, removes and breaks manifests, checking the deployments after each sync.
pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let checkout = tempfile::tempdir()?;
    let write = |name: &str, yaml: &str| std::fs::write(checkout.path().join(name), yaml);
    write("web.yaml", "image: nginx:1.27\nreplicas: 2\n")?;
    write("api.yaml", "image: api:3\nreplicas: 1\n")?;
    write("README.md", "not a manifest\n")?;

    let state = cosi::state::memory();
    let trigger = SyncTrigger::default();
    let runtime = Runtime::new(state.clone());
    register(&runtime, checkout.path().to_owned(), &trigger)?;
    runtime.start()?;
    runtime.settled().await;
    println!("deployed: {:?}", deployed(&state).await?);
    assert_eq!(deployed(&state).await?, ["api-0=api:3", "web-0=nginx:1.27", "web-1=nginx:1.27"]);

    // A commit scales web and removes api.
    write("web.yaml", "image: nginx:1.27\nreplicas: 3\n")?;
    std::fs::remove_file(checkout.path().join("api.yaml"))?;
    trigger.pull();
    runtime.settled().await;
    println!("after the commit: {:?}", deployed(&state).await?);
    assert_eq!(deployed(&state).await?, ["web-0=nginx:1.27", "web-1=nginx:1.27", "web-2=nginx:1.27"]);

    // A broken commit (a typo in a key): the sync fails, nothing changes.
    write("web.yaml", "image: nginx:1.28\nreplica: 1\n")?;
    trigger.pull();
    runtime.settled().await;
    let stats = runtime.stats("gitops.SyncController").unwrap_or_default();
    println!("after a broken commit: {:?} ({:?})", deployed(&state).await?, stats.last_error);
    assert_eq!(deployed(&state).await?, ["web-0=nginx:1.27", "web-1=nginx:1.27", "web-2=nginx:1.27"]);
    assert!(stats.last_error.is_some_and(|error| error.contains("unknown field `replica`")));

    runtime.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("{}", graph().to_mermaid());
    run().await
}
