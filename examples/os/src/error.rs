//! The OS's errors.

use crate::kernel::KernelError;
use crate::sandbox::SandboxError;

/// Why the OS could not boot, or a controller could not do its work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The sandbox refused a path or an operation.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The fake kernel refused.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The state refused.
    #[error(transparent)]
    State(#[from] cosi::Error),
    /// The controller runtime refused a controller or a start.
    #[error(transparent)]
    Runtime(#[from] cosi::RuntimeError),
    /// The durable state of the `config` namespace could not be opened.
    #[error("cannot open the configuration store {path} (is the OS already running in this sandbox?): {source}")]
    Store {
        /// The file.
        path: String,
        /// Why (boxed: the store's error is large, and every `Result` of the OS carries this type).
        source: Box<cosi_redb::Error>,
    },
    /// The gRPC server could not start.
    #[error(transparent)]
    Serve(#[from] cosi_grpc::ServeError),
    /// The live page could not be served.
    #[error(transparent)]
    Ui(#[from] cosi_ui::Error),
    /// A file watch could not be set up.
    #[error("cannot watch {path}: {source}")]
    Watch {
        /// The directory.
        path: String,
        /// Why.
        source: notify::Error,
    },
    /// Several things failed; each is listed.
    #[error("{}", .0.join("; "))]
    Several(Vec<String>),
}

impl Error {
    /// `Ok` when `errors` is empty, else all of them as one error.
    pub fn from_list(errors: Vec<String>) -> Result<(), Error> {
        match errors.is_empty() {
            true => Ok(()),
            false => Err(Error::Several(errors)),
        }
    }
}

/// So that `main` can return `cosi::Result<()>` and use `?` on a boot.
impl From<Error> for cosi::Error {
    fn from(error: Error) -> Self {
        match error {
            Error::State(error) => error,
            other => cosi::Error::backend(other),
        }
    }
}
