//! The resources the runtime publishes about its controllers: one
//! [`ControllerStatus`] per controller, so that any client of the state, local
//! or remote, can draw the live graph and see which controller is unhealthy.

use serde::{Deserialize, Serialize};

use crate::runtime::{GraphController, GraphInput, GraphOutput};

/// The namespace the runtime publishes controller statuses in, by default.
pub const RUNTIME_NAMESPACE: &str = "runtime";

/// The owner of the statuses; no controller may take this name.
pub const RUNTIME_OWNER: &str = "runtime";

/// One controller as the runtime sees it: its inputs and outputs, and how it fares.
#[derive(crate::Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "ControllerStatuses.runtime.cosi.dev",
    namespace = "runtime",
    aliases = ["controllers"],
    print_columns(name = "Reconciles", json_path = "{.reconciles}"),
    print_columns(name = "Restarts", json_path = "{.restarts}"),
    print_columns(name = "Healthy", json_path = "{.healthy}"),
    print_columns(name = "Long polls", json_path = "{.long_polls}"),
)]
pub struct ControllerStatus {
    /// What it reads now.
    pub inputs: Vec<GraphInput>,
    /// What it writes.
    pub outputs: Vec<GraphOutput>,
    /// For queue controllers, how many items run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Reconciles run (queue controllers: items and mappings processed).
    pub reconciles: u64,
    /// Reconciles that failed or panicked.
    pub errors: u64,
    /// Restarts after a failure.
    pub restarts: u64,
    /// The last failure's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it is retried next, in milliseconds since the Unix epoch, by the
    /// runtime's clock: set while it fails and waits out its backoff
    /// (queue controllers: the last failed item's), unset while healthy and
    /// for a controller whose task stopped for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_ms: Option<u64>,
    /// Whether its last reconcile succeeded.
    pub healthy: bool,
    /// Polls that held their thread longer than the runtime's `long_poll`
    /// ([`ControllerStats::long_polls`](crate::runtime::ControllerStats::long_polls)).
    #[serde(default)]
    pub long_polls: u64,
    /// The longest of those, in milliseconds; unset while there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_poll_ms: Option<u64>,
}

impl ControllerStatus {
    /// The graph node of the controller named `name` with this status.
    pub fn graph_controller(&self, name: &str) -> GraphController {
        GraphController { name: name.to_owned(), inputs: self.inputs.clone(), outputs: self.outputs.clone() }
    }
}
