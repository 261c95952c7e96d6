//! The lifecycle phase of a resource.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ParseError;

/// The lifecycle phase of a resource.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> cosi::Result<()> {
/// let state = cosi::state::memory();
/// state.create(Typed::new("default", HostnameSpec::default()), CreateOptions::default()).await?;
/// state.add_finalizers::<HostnameSpec>("default", &["mine"]).await?;
///
/// // Torn down, but held by a finalizer: still there, going away.
/// assert!(!state.teardown::<HostnameSpec>("default", TeardownOptions::default()).await?);
/// assert_eq!(state.get::<HostnameSpec>("default").await?.metadata().phase(), Phase::TearingDown);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// In use: the normal state.
    #[default]
    #[serde(rename = "running")]
    Running,
    /// Being torn down: its consumers release it, then its owner destroys it.
    #[serde(rename = "tearingDown")]
    TearingDown,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Running => "running",
            Phase::TearingDown => "tearingDown",
        })
    }
}

impl std::str::FromStr for Phase {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "running" => Ok(Phase::Running),
            "tearingDown" => Ok(Phase::TearingDown),
            _ => Err(ParseError(format!("unknown phase: {s:?}"))),
        }
    }
}
