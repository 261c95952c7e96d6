//! What a reconcile returns, and how the runtime reads it.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// Any error a controller returns.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// When a queue controller wants an item reconciled again.
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// /// Looks at every spec again each minute, even if nothing changes.
/// #[controller(inputs = [Primary<HostnameSpec>])]
/// #[derive(Default)]
/// pub struct Refresh;
///
/// impl Refresh {
///     async fn reconcile(&self, _ctx: &Ctx<Self>, _item: &Pointer) -> cosi::Result<Requeue> {
///         Ok(Requeue::After(Duration::from_secs(60)))
///     }
/// }
///
/// Runtime::new(cosi::state::memory()).register(Refresh)?;
/// assert_eq!(Requeue::default(), Requeue::Never);
/// # Ok::<(), cosi::RuntimeError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Requeue {
    /// Only when something changes.
    #[default]
    Never,
    /// After this long, even if nothing changes.
    After(Duration),
}

/// An error that also says when to try again, instead of the item's backoff.
///
/// ```
/// # use std::time::Duration;
/// # use cosi::controller::RequeueError;
/// let error = RequeueError::new("disk not ready", Duration::from_secs(5));
/// assert_eq!(error.to_string(), "disk not ready");
/// ```
#[derive(Debug)]
pub struct RequeueError {
    error: BoxError,
    after: Duration,
}

impl RequeueError {
    /// `error`, to be retried after `after`.
    pub fn new(error: impl Into<BoxError>, after: Duration) -> Self {
        RequeueError { error: error.into(), after }
    }

    /// When to try again.
    pub fn after(&self) -> Duration {
        self.after
    }
}

impl fmt::Display for RequeueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl StdError for RequeueError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.error)
    }
}

/// A reconcile's result as the runtime sees it.
#[derive(Debug)]
pub enum Outcome {
    /// Done; for queue controllers, maybe with a requeue.
    Done(Requeue),
    /// Failed: restart with backoff (or, for a [`RequeueError`], after its delay).
    Failed(BoxError),
}

/// The return types a reconcile may have: `()`, `Result<(), E>` and
/// `Result<Requeue, E>`, for any error `E` that converts into a boxed error
/// (`cosi::Error`, `std::io::Error`, `anyhow::Error`, ...).
#[diagnostic::on_unimplemented(
    message = "a reconcile cannot return `{Self}`",
    label = "returns `{Self}`",
    note = "return `()`, `Result<(), E>` or `Result<Requeue, E>`, where `E` converts into `Box<dyn Error + Send + Sync>`"
)]
pub trait IntoOutcome {
    /// Converts.
    fn into_outcome(self) -> Outcome;
}

impl IntoOutcome for () {
    fn into_outcome(self) -> Outcome {
        Outcome::Done(Requeue::Never)
    }
}

impl<E: Into<BoxError>> IntoOutcome for Result<(), E> {
    fn into_outcome(self) -> Outcome {
        match self {
            Ok(()) => Outcome::Done(Requeue::Never),
            Err(error) => Outcome::Failed(error.into()),
        }
    }
}

impl<E: Into<BoxError>> IntoOutcome for Result<Requeue, E> {
    fn into_outcome(self) -> Outcome {
        match self {
            Ok(requeue) => Outcome::Done(requeue),
            Err(error) => Outcome::Failed(error.into()),
        }
    }
}

impl IntoOutcome for Outcome {
    fn into_outcome(self) -> Outcome {
        self
    }
}

/// The pointers a mapper returns: `Vec<Pointer>` or `Result<Vec<Pointer>, E>`.
pub trait IntoMapped {
    /// Converts.
    fn into_mapped(self) -> Result<Vec<crate::Pointer>, BoxError>;
}

impl IntoMapped for Vec<crate::Pointer> {
    fn into_mapped(self) -> Result<Vec<crate::Pointer>, BoxError> {
        Ok(self)
    }
}

impl<E: Into<BoxError>> IntoMapped for Result<Vec<crate::Pointer>, E> {
    fn into_mapped(self) -> Result<Vec<crate::Pointer>, BoxError> {
        self.map_err(Into::into)
    }
}
