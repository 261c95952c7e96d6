//! The items `cosi-macros` expansions name. Not API: anything here may change in any release.

// The traits, and their derives for the struct `#[controller]` generates for a function.
pub use core::clone::Clone;
pub use core::default::Default;
pub use core::fmt::Debug;
pub use core::marker::Copy;
// For the stub impls `#[controller]` emits beside its errors.
pub use core::future::pending;
// For the inventory entry of a controller.
pub use core::module_path;
// The macro, for the stub impl `#[derive(Resource)]` emits beside its errors.
pub use core::unreachable;

pub use core::future::Future;
pub use core::marker::Send;
pub use core::option::Option;
pub use core::result::Result;
pub use std::borrow::ToOwned;
pub use std::string::String;
pub use std::sync::Arc;
// The module and the `vec!` macro.
pub use std::vec;
pub use std::vec::Vec;

use core::future::{IntoFuture, Pending};
use core::marker::PhantomData;

pub use inventory;

pub use crate::controller::{
    BoxError, Controller, Ctx, Declaration, Declared, Entry, Finalizes, InputDecl, InputKind, IntoMapped, IntoOutcome,
    Outcome, OutputDecl, OutputKind, QueueController, Reads, ReducedMetadata, Register, Writes, assert_system,
};
pub use crate::controller::{Collected, Registration};
pub use crate::resource::{Pointer, PrintColumn, Resource, ResourceDefinition, Sensitivity, TypeNames, TypeSlot};
pub use crate::runtime::{Runtime, RuntimeError};
pub use crate::state::State;

/// Compile-time check of one controller's declaration, for what the macro
/// cannot see in tokens (two type paths that name one type, say).
pub const fn assert_declaration(declaration: &Declaration) {
    assert_system(&[], &[declaration]);
}

/// Builds a collected controller with `Default`.
pub fn build_default<C: Register + InventoryDefault>() -> Registration {
    C::build().registration()
}

/// `Default`, under a name whose message says why the inventory needs it.
#[diagnostic::on_unimplemented(
    message = "controller `{Self}` is collected by the inventory, which builds it with `Default`",
    label = "`{Self}` does not implement `Default`",
    note = "derive `Default` for `{Self}`, or add `inventory = false` to `#[controller(...)]` and register an instance yourself"
)]
pub trait InventoryDefault {
    /// `Default::default()`.
    fn build() -> Self;
}

impl<C: Default> InventoryDefault for C {
    fn build() -> Self {
        C::default()
    }
}

/// `Default`, under a name whose message says why `system!` needs it.
#[diagnostic::on_unimplemented(
    message = "controller `{Self}` is listed in `system!`, whose `runtime()` builds it with `Default`",
    label = "`{Self}` does not implement `Default`",
    note = "derive `Default` for `{Self}`, or list it as `{Self} {{ .. }}` and give `runtime()` an instance built with its arguments"
)]
pub trait SystemDefault {
    /// `Default::default()`.
    fn build() -> Self;
}

impl<C: Default> SystemDefault for C {
    fn build() -> Self {
        C::default()
    }
}

/// Registers a controller `system!`'s `runtime()` was given, if it
/// registers under the name the system lists it with: the name the graph
/// was checked under at compile time.
pub fn register_listed(runtime: &Runtime, controller: impl Register, listed: &str) -> Result<(), RuntimeError> {
    let registration = controller.registration();
    if registration.name() != listed {
        return Err(RuntimeError::NotAsListed {
            listed: listed.to_owned(),
            registered: registration.name().to_owned(),
        });
    }
    runtime.register(registration)
}

/// What `Type::reconcile` or `Type::map` resolves to in the code
/// `#[controller]` generates for a struct without that inherent method: an
/// awaitable that type-checks, so that the only error is the one of
/// [`ReconcileMethod`] or [`MapMethod`], which says what to write.
pub struct MissingMethod<C>(PhantomData<fn() -> C>);

impl<C> Default for MissingMethod<C> {
    fn default() -> Self {
        MissingMethod(PhantomData)
    }
}

impl<C> IntoFuture for MissingMethod<C> {
    type Output = MissingMethodOutput;
    type IntoFuture = Pending<MissingMethodOutput>;

    fn into_future(self) -> Self::IntoFuture {
        pending()
    }
}

/// The output of a [`MissingMethod`], which never comes: the build fails first.
pub struct MissingMethodOutput;

impl IntoOutcome for MissingMethodOutput {
    fn into_outcome(self) -> Outcome {
        Outcome::Failed("`#[controller]` method missing".into())
    }
}

impl IntoMapped for MissingMethodOutput {
    fn into_mapped(self) -> Result<Vec<Pointer>, BoxError> {
        Err("`#[controller]` method missing".into())
    }
}

/// `F` is what the user's `reconcile` returned, not a [`MissingMethod`]
/// (which is awaitable but not a `Future`).
#[diagnostic::on_unimplemented(
    message = "controller `{C}` has no `reconcile` method",
    label = "`#[controller]` calls `{C}::reconcile`",
    note = "add `async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()>` to an `impl {C}` block, or, for a queue controller, `async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<()>`"
)]
pub trait ReconcileMethod<C> {}

impl<C, F: Future> ReconcileMethod<C> for F {}

/// Passes the future of `C::reconcile` through, checking that there is such a method.
pub fn reconcile_method<C, F: ReconcileMethod<C>>(future: F) -> F {
    future
}

/// `F` is what the user's `map` returned, not a [`MissingMethod`].
#[diagnostic::on_unimplemented(
    message = "controller `{C}` has mapped inputs but no `map` method",
    label = "`#[controller]` calls `{C}::map`",
    note = "add `async fn map(&self, ctx: &Ctx<Self>, input: &ReducedMetadata) -> Vec<Pointer>` to an `impl {C}` block"
)]
pub trait MapMethod<C> {}

impl<C, F: Future> MapMethod<C> for F {}

/// Passes the future of `C::map` through, checking that there is such a method.
pub fn map_method<C, F: MapMethod<C>>(future: F) -> F {
    future
}
