//! The errors of the state broker.

use std::sync::Arc;

use crate::resource::{Finalizers, Kind, Phase, Pointer, Version};

/// The result of state operations, and of a program built on `cosi`:
/// `async fn main() -> cosi::Result<()>` and `async fn reconcile(ctx: &mut Ctx) -> cosi::Result<()>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error from a state: each failure COSI distinguishes is its own variant,
/// and every message names the resource.
///
/// It is also `cosi::Error`, the error of a whole program: the runtime's
/// errors convert into it ([`Error::Other`]), so `?` works on both in a
/// function returning [`cosi::Result`]. Matching on the state's
/// failures stays as it is (`Error::NotFound(pointer)`, `error.is_conflict()`).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The resource does not exist.
    #[error("resource {0} doesn't exist")]
    NotFound(Pointer),

    /// A create found the resource already there.
    #[error("resource {0} already exists")]
    AlreadyExists(Pointer),

    /// An update carried a version other than the stored one: someone wrote in between.
    #[error(
        "resource {pointer} update conflict: the update is based on version {given}, the stored version is {stored}"
    )]
    VersionConflict {
        /// The resource.
        pointer: Pointer,
        /// The version the update was based on.
        given: Version,
        /// The version stored.
        stored: Version,
    },

    /// A destroy found finalizers still on the resource.
    #[error("resource {pointer} has pending finalizers {finalizers}")]
    PendingFinalizers {
        /// The resource.
        pointer: Pointer,
        /// The finalizers left.
        finalizers: Finalizers,
    },

    /// A write named an owner other than the resource's.
    #[error("resource {pointer} is owned by {}", owner_text(.owner.as_deref()))]
    OwnerConflict {
        /// The resource.
        pointer: Pointer,
        /// The stored owner.
        owner: Option<String>,
    },

    /// An update expected another phase than the stored one.
    #[error("resource {pointer} is not in phase {expected}")]
    PhaseConflict {
        /// The resource.
        pointer: Pointer,
        /// The phase the caller expected.
        expected: Phase,
    },

    /// A watch was asked to resume from a bookmark this state cannot resume from.
    #[error("invalid watch bookmark for {kind}: {reason}")]
    InvalidBookmark {
        /// The watched kind.
        kind: Kind,
        /// Why it was rejected.
        reason: String,
    },

    /// A watcher fell so far behind that the events it missed are gone.
    #[error(
        "buffer overrun: namespace {:?} type {:?}: the watcher is {behind} events behind, the history holds {capacity}",
        .kind.namespace(), .kind.r#type()
    )]
    BufferOverrun {
        /// The watched kind.
        kind: Kind,
        /// How many events the watcher had not read.
        behind: u64,
        /// How many the history keeps.
        capacity: usize,
    },

    /// The request itself is malformed: an empty ID, a bad query, options that exclude each other.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A controller touched a resource outside its declared inputs and outputs,
    /// or a client one its role does not allow.
    #[error("access denied: {0}")]
    AccessDenied(String),

    /// The backend failed: an I/O error, a lost connection.
    #[error("state backend error: {0}")]
    Backend(Arc<dyn std::error::Error + Send + Sync>),

    /// A failure from outside the state, carried by [`Result`] so that one
    /// error type serves a whole program: a controller runtime's refusal (the
    /// runtime's `RuntimeError` converts into this variant, so `?` works on
    /// it in a function returning `cosi::Result`), or any error wrapped with
    /// [`Error::other`]. Read it back with [`downcast_ref`](Error::downcast_ref).
    ///
    /// The state never returns it: every predicate below is false for it.
    #[error(transparent)]
    Other(Arc<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// An invalid-argument error.
    pub fn invalid_argument(reason: impl Into<String>) -> Self {
        Error::InvalidArgument(reason.into())
    }

    /// A backend error wrapping `source`.
    pub fn backend(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Backend(Arc::new(source))
    }

    /// An error from outside the state, carried as [`Error::Other`].
    ///
    /// ```
    /// # fn main() -> cosi::Result<()> {
    /// let error = cosi::Error::other(std::io::Error::other("no sandbox"));
    /// assert!(!error.is_not_found());
    /// assert_eq!(error.to_string(), "no sandbox");
    /// assert!(error.downcast_ref::<std::io::Error>().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn other(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Other(Arc::new(error))
    }

    /// The error inside an [`Error::Other`] or an [`Error::Backend`], if it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Error::Other(error) | Error::Backend(error) => error.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// The resource does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }

    /// The write conflicts with the stored resource: it exists already, changed
    /// since it was read, still has finalizers, has another owner or is in another phase.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            Error::AlreadyExists(_)
                | Error::VersionConflict { .. }
                | Error::PendingFinalizers { .. }
                | Error::OwnerConflict { .. }
                | Error::PhaseConflict { .. }
        )
    }

    /// The resource belongs to another owner.
    pub fn is_owner_conflict(&self) -> bool {
        matches!(self, Error::OwnerConflict { .. })
    }

    /// The resource is not in the expected phase.
    pub fn is_phase_conflict(&self) -> bool {
        matches!(self, Error::PhaseConflict { .. })
    }

    /// The watch bookmark cannot be resumed from.
    pub fn is_invalid_bookmark(&self) -> bool {
        matches!(self, Error::InvalidBookmark { .. })
    }

    /// The caller may not do this.
    pub fn is_access_denied(&self) -> bool {
        matches!(self, Error::AccessDenied(_))
    }

    /// The request is malformed.
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Error::InvalidArgument(_))
    }

    /// The resource the error is about, when it is about one.
    pub fn pointer(&self) -> Option<&Pointer> {
        match self {
            Error::NotFound(pointer) | Error::AlreadyExists(pointer) => Some(pointer),
            Error::VersionConflict { pointer, .. }
            | Error::PendingFinalizers { pointer, .. }
            | Error::OwnerConflict { pointer, .. }
            | Error::PhaseConflict { pointer, .. } => Some(pointer),
            Error::InvalidBookmark { .. }
            | Error::BufferOverrun { .. }
            | Error::InvalidArgument(_)
            | Error::AccessDenied(_)
            | Error::Backend(_)
            | Error::Other(_) => None,
        }
    }
}

/// Not found as a value: `use cosi::ResultExt;` (or the prelude).
///
/// "Destroy it, but a resource that is already gone is fine" and "read it,
/// if it exists" are one call each.
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
/// assert!(state.get::<HostnameSpec>("default").await.ignore_not_found()?.is_some());
/// // Any other error stays one.
/// let again = state.create(Typed::new("default", HostnameSpec::default()), CreateOptions::default()).await;
/// assert!(again.ignore_not_found().is_err_and(|error| error.is_conflict()));
///
/// state.destroy::<HostnameSpec>("default", DestroyOptions::default()).await.ignore_not_found()?;
/// // Gone already: no error.
/// assert_eq!(state.destroy::<HostnameSpec>("default", DestroyOptions::default()).await.ignore_not_found()?, None);
/// assert!(state.get::<HostnameSpec>("default").await.ignore_not_found()?.is_none());
/// # Ok(())
/// # }
/// ```
pub trait ResultExt<T> {
    /// `Ok(None)` in place of an [`Error::NotFound`]; the value otherwise,
    /// and any other error as it is.
    fn ignore_not_found(self) -> Result<Option<T>>;
}

impl<T> ResultExt<T> for Result<T> {
    fn ignore_not_found(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

fn owner_text(owner: Option<&str>) -> String {
    match owner {
        Some(owner) => format!("{owner:?}"),
        None => "nobody".to_owned(),
    }
}
