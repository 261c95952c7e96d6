//! The compile-time access rules: which resource types a controller may read,
//! write, and put finalizers on.
//!
//! `#[controller]` implements these marker traits for exactly the types its
//! declaration names, and every method of [`Ctx`](crate::Ctx) requires one, so
//! touching anything else is a compile error whose message says what to add
//! where. The runtime checks the namespace and ID part of each access again
//! when it happens, because those can change while a controller runs.

/// `Self` is an input or an output of controller `C`: `C` may read it.
#[diagnostic::on_unimplemented(
    message = "controller `{C}` reads `{Self}`, which is not among its inputs or outputs",
    label = "not an input or output of `{C}`",
    note = "add `Weak<{Self}>` or `Strong<{Self}>` to `inputs = [...]` in `#[controller]`"
)]
pub trait Reads<C: ?Sized> {}

/// `Self` is an output of controller `C`: `C` may write it.
#[diagnostic::on_unimplemented(
    message = "controller `{C}` writes `{Self}`, which is not among its outputs",
    label = "not an output of `{C}`",
    note = "add `Shared<{Self}>` or `Exclusive<{Self}>` to `outputs = [...]` in `#[controller]`"
)]
pub trait Writes<C: ?Sized>: Reads<C> {}

/// `Self` is a strong (or queue) input of controller `C`: `C` may put finalizers on it.
#[diagnostic::on_unimplemented(
    message = "controller `{C}` changes the finalizers of `{Self}`, which is not among its strong inputs",
    label = "not a strong input of `{C}`",
    note = "declare it as `Strong<{Self}>` in `inputs = [...]` in `#[controller]`"
)]
pub trait Finalizes<C: ?Sized>: Reads<C> {}
