//! The one interface between a controller and whatever runs it.
//!
//! [`Ctx`](crate::Ctx), [`Waker`](crate::controller::Waker) and the
//! type-erased controllers of [`Registration`](crate::controller::Registration)
//! reach the runtime only through [`Host`], which the runtime implements once
//! per registered controller. Nothing under `controller/` names the runtime:
//! a test keeps it so.

use std::sync::Arc;

use crate::controller::{Declaration, Input};
use crate::resource::Pointer;
use crate::state::{Result, State};

/// What a controller's context needs from the runtime that runs it.
pub(crate) trait Host: Send + Sync + 'static {
    /// The controller's name: the owner of what it writes.
    fn name(&self) -> &str;

    /// Its declaration.
    fn declaration(&self) -> &'static Declaration;

    /// The state it reads and writes.
    fn state(&self) -> &dyn State;

    /// The inputs it has now.
    fn inputs(&self) -> Arc<[Input]>;

    /// Replaces its inputs (checked, and a no-op when unchanged).
    fn update_inputs(&self, inputs: Vec<Input>) -> Result<()>;

    /// Counts a read through the context.
    fn count_read(&self);

    /// Counts a write through the context.
    fn count_write(&self);

    /// Asks for another reconcile after the running one.
    fn requeue(&self);

    /// A wake-up from outside the state ([`Waker::wake`](crate::controller::Waker::wake)).
    fn wake(&self);

    /// Forgets the backoff of a queue controller's item.
    fn reset_backoff(&self, item: &Pointer);

    /// A wake-up for one item ([`Waker::wake_item`](crate::controller::Waker::wake_item)).
    fn wake_item(&self, item: &Pointer) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The claim of this module's documentation: the code under
    /// `controller/` names no runtime item (its comments and doc examples
    /// may), so the runtime depends on controllers and never the reverse.
    #[test]
    fn controllers_name_no_runtime_item() {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controller");
        // Spelled in parts, so that this file does not name them itself.
        let names = ["crate::", "super::"]
            .map(|root| format!("{root}runtime"))
            .into_iter()
            .chain([format!("crate::{}", "Runtime")])
            .collect::<Vec<_>>();
        let mut files = 0;
        let mut offences = Vec::new();
        for entry in std::fs::read_dir(&folder).expect("the controller folder") {
            let path = entry.expect("a folder entry").path();
            if path.extension().is_none_or(|extension| extension != "rs") {
                continue;
            }
            files += 1;
            let source = std::fs::read_to_string(&path).expect("a source file");
            for (number, line) in source.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if names.iter().any(|name| code.contains(name.as_str())) {
                    let name = path.file_name().unwrap_or_default().to_string_lossy();
                    offences.push(format!("{name}:{}: {}", number + 1, line.trim()));
                }
            }
        }
        assert!(files >= 8, "found only {files} files under {}", folder.display());
        assert!(offences.is_empty(), "controller code names the runtime:\n{}", offences.join("\n"));
    }
}
