//! The items `cosi-macros` expansions name. Not API: anything here may change in any release.

// The traits, and their derives for the struct `#[controller]` generates for a function.
pub use core::clone::Clone;
pub use core::default::Default;
pub use core::fmt::Debug;
pub use core::marker::Copy;
// For the inventory entry of a controller.
pub use core::module_path;
// For the stub impls `#[controller]` emits beside its errors.
pub use core::future::pending;
pub use core::future::Future;
pub use core::marker::Send;
pub use core::option::Option;
pub use core::result::Result;
// The macro, for the stub impl `#[derive(Resource)]` emits beside its errors.
pub use core::unreachable;
pub use std::borrow::ToOwned;
pub use std::string::String;
pub use std::sync::Arc;
// The module and the `vec!` macro.
pub use std::vec;
pub use std::vec::Vec;

pub use inventory;

pub use crate::controller::{
    Controller, Ctx, Declaration, Declared, Entry, Finalizes, InputDecl, InputKind, IntoMapped, IntoOutcome,
    OutputDecl, OutputKind, Outcome, QueueController, BoxError, Reads, ReducedMetadata, Register, Writes, assert_system,
};
pub use crate::resource::{Pointer, PrintColumn, Resource, ResourceDefinition, Sensitivity};
pub use crate::runtime::{Collected, Registration, Runtime, RuntimeError};
pub use crate::state::State;

/// Compile-time check of one controller's declaration, for what the macro
/// cannot see in tokens (two type paths that name one type, say).
pub const fn assert_declaration(declaration: &Declaration) {
    assert_system(&[], &[declaration]);
}

/// Builds a collected controller with `Default`.
pub fn build_default<C: Register + Default>() -> Registration {
    C::default().registration()
}

/// Compile-time check that a collected controller can be built: the inventory builds it with `Default`.
pub const fn assert_inventory_default<C: InventoryDefault>() {}

/// The bound of [`assert_inventory_default`], for its message.
#[diagnostic::on_unimplemented(
    message = "controller `{Self}` is collected by the inventory, which builds it with `Default`",
    label = "`{Self}` does not implement `Default`",
    note = "derive `Default` for `{Self}`, or add `inventory = false` to `#[controller(...)]` and register an instance yourself"
)]
pub trait InventoryDefault {}

impl<C: Default> InventoryDefault for C {}
