//! Waking a controller from outside the state.

use std::fmt;
use std::sync::{Arc, Weak};

use crate::controller::Host;
use crate::resource::Pointer;
use crate::state::Result;

/// Wakes one controller from outside the state (Go COSI's `QueueReconcile`):
/// what a file watcher thread, a timer task or an operator task the
/// controller started calls when the world the controller observes changed.
/// [`Ctx::waker`](crate::Ctx::waker) hands one out.
///
/// A wake-up coalesces with the controller's other triggers, as changes of
/// its inputs do: many wake-ups while it is busy make one more reconcile,
/// never none. It shows as the trigger `external` in the reconcile's span
/// (reconcile controllers; a queue item's span names the item instead), and
/// is counted in [`ControllerStats::external_wakeups`](crate::runtime::ControllerStats::external_wakeups).
///
/// A waker is cheap to clone and to keep: it holds the controller weakly.
/// It stays valid while the controller restarts after failures, and once the
/// runtime has shut down, waking does nothing.
///
/// # Queue controllers
///
/// A queue controller reconciles items: [`wake_item`](Waker::wake_item)
/// queues one (a resource of one of its primary inputs), and
/// [`wake`](Waker::wake) queues every resource of its primary inputs again,
/// as if each had changed.
///
/// # Example
///
/// A controller that mirrors something outside the state (here a counter
/// another thread bumps; a file in practice) and has no inputs to wake it:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::{Arc, Mutex};
///
/// use cosi::controller::Waker;
/// use cosi::prelude::*;
///
/// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// #[resource(type = "Uptimes.example.org", namespace = "default")]
/// pub struct Uptime {
///     pub ticks: u64,
/// }
///
/// #[controller(outputs = [Exclusive<Uptime>], inventory = false)]
/// struct UptimeController {
///     ticks: Arc<AtomicU64>,
///     waker: Arc<Mutex<Option<Waker>>>,
/// }
///
/// impl UptimeController {
///     async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
///         // Hand the outside world a way to wake this controller (a watcher
///         // thread would get its clone here).
///         self.waker.lock().expect("not poisoned").get_or_insert_with(|| ctx.waker());
///         let ticks = self.ticks.load(Ordering::SeqCst);
///         ctx.modify::<Uptime>("node", |uptime| uptime.ticks = ticks).await?;
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// let (ticks, waker) = (Arc::new(AtomicU64::new(0)), Arc::new(Mutex::new(None)));
/// let runtime = Runtime::new(state.clone());
/// runtime.register(UptimeController { ticks: Arc::clone(&ticks), waker: Arc::clone(&waker) })?;
/// runtime.start()?;
/// runtime.settled().await;
///
/// // Outside the state, something changes, and says so.
/// ticks.store(42, Ordering::SeqCst);
/// let waker = waker.lock().expect("not poisoned").clone().expect("handed out in the first reconcile");
/// std::thread::spawn(move || waker.wake()).join().expect("the thread");
///
/// runtime.settled().await;
/// assert_eq!(state.get::<Uptime>("node").await?.ticks, 42);
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Waker {
    host: Weak<dyn Host>,
}

impl Waker {
    pub(crate) fn new(host: &Arc<dyn Host>) -> Self {
        Waker { host: Arc::downgrade(host) }
    }

    /// Asks for one reconcile of the controller (queue controllers: of every
    /// resource of its primary inputs), coalesced with any not yet started.
    /// Does nothing once the runtime has shut down.
    pub fn wake(&self) {
        if let Some(host) = self.host.upgrade() {
            host.wake();
        }
    }

    /// Queues `item` for a queue controller: a resource of one of its primary
    /// inputs (anything else is an invalid-argument error, and nothing is
    /// queued). A reconcile controller, which reconciles everything each
    /// time, is woken as by [`wake`](Waker::wake). Does nothing once the
    /// runtime has shut down.
    pub fn wake_item(&self, item: &Pointer) -> Result<()> {
        match self.host.upgrade() {
            Some(host) => host.wake_item(item),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Waker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.host.upgrade().map(|host| host.name().to_owned());
        f.debug_struct("Waker").field("controller", &name).finish()
    }
}
