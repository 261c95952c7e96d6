//! COSI, the Common Operating System Interface: a small framework for building
//! operating systems and control planes as controllers reconciling typed
//! resources against one state broker.
//!
//! - [`resource`]: the data. Strict [`Metadata`] plus a spec; `#[derive(Resource)]`
//!   turns a spec struct into a resource type.
//! - [`state`]: the broker. The [`State`] trait stores resources and streams
//!   every change; [`state::memory`] gives an in-memory one (durable, shared
//!   and remote ones live in `cosi-redb`, `cosi-etcd` and `cosi-grpc`).
//! - [`controller`](mod@controller): `#[controller]` declares a controller, its inputs and
//!   outputs; [`Ctx`] is its typed view of the state, so touching an
//!   undeclared type does not compile.
//! - [`runtime`]: the [`Runtime`] wires controllers into a graph over a state,
//!   validates it, and decides who wakes up when.
//!
//! # Example
//!
//! ```
//! use cosi::prelude::*;
//!
//! #[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
//! #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
//! pub struct HostnameSpec {
//!     pub hostname: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> cosi::Result<()> {
//! let state = cosi::state::memory();
//! let spec = Typed::new("default", HostnameSpec { hostname: "talos".into() });
//! state.create(spec, CreateOptions::default()).await?;
//!
//! let spec = state.get::<HostnameSpec>("default").await?;
//! assert_eq!(spec.hostname, "talos");
//! assert_eq!(spec.metadata().version(), Version::new(1));
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

// Expansions of `#[derive(Resource)]` name `::cosi`; this makes that path work
// inside this crate too, which derives `Resource` for its own meta types.
extern crate self as cosi;

pub mod backoff;
pub mod controller;
pub mod resource;
pub mod runtime;
pub mod state;
#[cfg(feature = "testing")]
pub mod testing;

#[doc(hidden)]
pub mod __private;

pub use cosi_macros::{Resource, controller, system};

pub use controller::{Controller, Ctx, QueueController};
pub use resource::{
    DynamicResource, Finalizers, IdQuery, Kind, LabelOp, LabelQuery, LabelTerm, Labels, Metadata, Phase, Pointer,
    Resource, ResourceDefinition, Spec, Typed, Version,
};
pub use runtime::{Runtime, RuntimeError, RuntimeHandle};
pub use state::{Error, Result, ResultExt, State, StateExt};

/// The names most programs need: `use cosi::prelude::*;`.
pub mod prelude {
    pub use cosi_macros::{Resource, controller};
    pub use serde::{Deserialize, Serialize};

    pub use crate::controller::{BoxError, Ctx, Input, InputKind, ReducedMetadata, Register, Requeue, RequeueError};
    pub use crate::runtime::Runtime;

    pub use crate::resource::{
        DynamicResource, IdQuery, Kind, LabelQuery, Labels, Metadata, Phase, Pointer, Resource, Typed, Version,
    };
    pub use crate::state::{
        CreateOptions, DestroyOptions, Event, ListOptions, ResultExt, State, StateExt, TeardownOptions, UpdateOptions,
        WatchCondition, WatchKindOptions, WatchOptions,
    };
}
