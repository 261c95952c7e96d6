//! The items `cosi-macros` expansions name. Not API: anything here may change in any release.

pub use core::default::Default;
pub use core::option::Option;
// The macro, for the stub impl `#[derive(Resource)]` emits beside its errors.
pub use core::unreachable;
pub use std::borrow::ToOwned;
pub use std::string::String;
// The module and the `vec!` macro.
pub use std::vec;
pub use std::vec::Vec;

pub use crate::resource::{PrintColumn, Resource, ResourceDefinition, Sensitivity};
