//! A controller's [`Host`]: what its context reaches of the runtime, the
//! controller's own [`RegisteredController`] and the [`Wiring`] it runs on.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::controller::{Declaration, Host, Input, InputKind, check_runtime_inputs};
use crate::resource::Pointer;
use crate::runtime::engine::Wiring;
use crate::runtime::queue::{Job, Key};
use crate::runtime::registered::{RegisteredController, Trigger};
use crate::state::{Error, Result, State};

pub(super) struct ControllerHost {
    registered: Arc<RegisteredController>,
    wiring: Arc<Wiring>,
}

impl ControllerHost {
    pub(super) fn new(registered: Arc<RegisteredController>, wiring: Arc<Wiring>) -> Self {
        ControllerHost { registered, wiring }
    }

    /// Queues every item of a queue controller's primary inputs again, while the runtime runs.
    fn requeue_items(&self) {
        if self.wiring.tasks.running() {
            self.wiring.requeue_primaries(&self.registered);
        }
    }
}

impl Host for ControllerHost {
    fn name(&self) -> &str {
        &self.registered.name
    }

    fn declaration(&self) -> &'static Declaration {
        self.registered.declaration
    }

    fn state(&self) -> &dyn State {
        &*self.registered.state
    }

    fn inputs(&self) -> Arc<[Input]> {
        self.registered.inputs()
    }

    /// Replaces the inputs (COSI's `UpdateInputs`). The same inputs again
    /// change nothing: a controller that sets its inputs on every reconcile
    /// is not woken by its own call.
    fn update_inputs(&self, inputs: Vec<Input>) -> Result<()> {
        let registered = &self.registered;
        let inputs: Arc<[Input]> = check_runtime_inputs(&registered.name, registered.declaration, inputs)
            .map_err(|conflict| Error::InvalidArgument(conflict.to_string()))?
            .into();
        // Two workers changing them at once leave the routes matching the inputs.
        let _rerouting = registered.rerouting.lock();
        if !registered.set_inputs(&inputs) {
            return Ok(());
        }
        self.wiring.reroute(registered, &inputs);
        Ok(())
    }

    fn count_read(&self) {
        self.registered.stats.count_read();
    }

    fn count_write(&self) {
        self.registered.stats.count_write();
    }

    /// A queue controller has no one reconcile to run again: every item of
    /// its primary inputs is queued again, as its [`Waker`](crate::controller::Waker)
    /// does. (Only [`DynCtx`](crate::controller::DynCtx) offers this to a
    /// queue controller; its typed `Ctx` does not.)
    fn requeue(&self) {
        match &self.registered.queue {
            None => {
                self.registered.wake(|| Trigger::Requeue);
            }
            Some(_) => self.requeue_items(),
        }
    }

    fn wake(&self) {
        if !self.wiring.tasks.running() {
            return;
        }
        let stats = &self.registered.stats;
        match &self.registered.queue {
            None => {
                if self.registered.wake(|| Trigger::External) {
                    stats.external_wakeups.fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(_) => {
                stats.external_wakeups.fetch_add(1, Ordering::Relaxed);
                self.requeue_items();
            }
        }
    }

    fn reset_backoff(&self, item: &Pointer) {
        if let Some(queue) = &self.registered.queue {
            queue.forget_backoff(&Key { pointer: item.clone(), job: Job::Reconcile });
        }
    }

    fn wake_item(&self, item: &Pointer) -> Result<()> {
        let Some(queue) = &self.registered.queue else {
            Host::wake(self);
            return Ok(());
        };
        let primary =
            self.registered.inputs().iter().any(|input| input.dependency == InputKind::Primary && input.reads(item));
        if !primary {
            return Err(Error::invalid_argument(format!(
                "controller `{}` cannot queue {item}: it is not a resource of a primary input",
                self.registered.name
            )));
        }
        if !self.wiring.tasks.running() {
            return Ok(());
        }
        self.registered.stats.external_wakeups.fetch_add(1, Ordering::Relaxed);
        queue.put(Key { pointer: item.clone(), job: Job::Reconcile }, None);
        Ok(())
    }
}
