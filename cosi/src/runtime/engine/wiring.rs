//! What a running controller reaches through its host: the state, the
//! routes, the feeds and the tasks. The registry and the lifecycle are the
//! engine's, above; nothing here points to them.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;

use crate::controller::{Body, Host, Shutdown};
use crate::runtime::RuntimeOptions;
use crate::runtime::engine::host::ControllerHost;
use crate::runtime::engine::panic_message;
use crate::runtime::engine::routing::Router;
use crate::runtime::engine::tasks::Tasks;
use crate::runtime::engine::watch::{Established, Feeds};
use crate::runtime::registered::RegisteredController;
use crate::runtime::settle::{InFlight, WorkEpoch};
use crate::state::State;

pub(super) struct Wiring {
    pub(super) state: Arc<dyn State>,
    pub(super) options: RuntimeOptions,
    /// The epoch of pending work, for `settled`.
    pub(super) epoch: Arc<WorkEpoch>,
    pub(super) router: Arc<Router>,
    pub(super) feeds: Arc<Feeds>,
    pub(super) tasks: Tasks,
}

/// What a controller's loop starts from: the controller, the watches of the
/// kinds it reads (its first reconcile waits until they are established),
/// and the work in flight that keeps `settled` waiting until it has started.
pub(super) struct Launch {
    pub(super) registered: Arc<RegisteredController>,
    pub(super) established: Vec<Arc<Established>>,
    pub(super) starting: InFlight,
}

impl Wiring {
    pub(super) fn new(state: Arc<dyn State>, options: RuntimeOptions) -> Arc<Self> {
        let epoch = Arc::<WorkEpoch>::default();
        Arc::new(Wiring {
            state,
            router: Arc::default(),
            feeds: Feeds::new(Arc::clone(&epoch)),
            tasks: Tasks::new(options.long_poll),
            epoch,
            options,
        })
    }

    /// Starts a registered controller's loop once the kinds it reads are watched.
    pub(super) fn start_controller(self: &Arc<Self>, registered: Arc<RegisteredController>, body: Body) {
        let starting = self.epoch.begin();
        let established = registered.inputs().iter().map(|input| self.ensure_watch(&input.kind)).collect();
        let wiring = Arc::clone(self);
        let reported = Arc::clone(&registered);
        let host = Arc::new(ControllerHost::new(Arc::clone(&registered), Arc::clone(self))) as Arc<dyn Host>;
        let owner = Arc::clone(&registered);
        let launch = Launch { registered, established, starting };
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = match body {
            Body::Reconcile(build) => {
                let (controller, shutdown) = build(host);
                if let Some(shutdown) = shutdown {
                    self.on_stop(shutdown);
                }
                Box::pin(async move { wiring.run_reconciler(launch, controller).await })
            }
            Body::Queue(build) => {
                let controller = build(host);
                let hooked = Arc::clone(&controller);
                self.on_stop(Box::pin(async move { hooked.on_shutdown().await }));
                Box::pin(async move { wiring.run_queue(launch, controller).await })
            }
        };
        // Reconciles catch their own panics and restart; a panic in the loop
        // around them ends the controller, which its status then reports.
        self.tasks.drive(&owner, async move {
            if let Err(panic) = AssertUnwindSafe(run).catch_unwind().await {
                let message = format!("the controller's task panicked and stopped: {}", panic_message(&*panic));
                tracing::error!(controller = %reported.name, error = %message, "controller stopped");
                reported.stats.record_failure(Duration::ZERO, message, None);
            }
        });
    }

    /// Runs a controller's shutdown hook once the runtime stops: a task of
    /// its own, outside the pool, whose lanes end at the stop.
    fn on_stop(self: &Arc<Self>, shutdown: Shutdown) {
        let wiring = Arc::clone(self);
        self.tasks.spawn(async move {
            wiring.tasks.stopped().await;
            shutdown.await;
        });
    }
}
