//! Procedural macros for `cosi`.
//!
//! Use them through `cosi`, which re-exports them (`cosi::Resource`): the
//! code they generate names items of `cosi` and nothing of this crate.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod controller;
mod ctxt;
mod debug;
mod resource;
mod system;

// The naming rules and alias derivation are one file compiled into both
// crates, so the derive rejects at compile time exactly the types that
// `cosi::ResourceDefinition::new` rejects at run time, and derives the same
// aliases. It cannot live here alone: a proc-macro crate exports nothing but
// macros. Nor in `cosi` alone: `cosi` depends on this crate, not the reverse.
#[path = "../../cosi/src/resource/naming.rs"]
mod naming;

use proc_macro::TokenStream;

/// Derives `cosi::Resource` for a spec type: its resource type, default
/// namespace and definition, all checked and computed at compile time.
///
/// # Example
///
/// ```
/// use cosi::Resource;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Resource, Clone, Debug, PartialEq, Serialize, Deserialize)]
/// #[resource(
///     type = "HostnameStatuses.net.example.org",
///     namespace = "network",
///     aliases = ["hostname"],
///     print_columns(name = "Hostname", json_path = "{.hostname}"),
/// )]
/// pub struct HostnameStatus {
///     pub hostname: String,
/// }
///
/// assert_eq!(HostnameStatus::TYPE, "HostnameStatuses.net.example.org");
/// assert_eq!(HostnameStatus::NAMESPACE, "network");
///
/// let definition = HostnameStatus::definition();
/// assert_eq!(definition.display_type, "HostnameStatus");
/// assert_eq!(definition.aliases, ["hostname", "hostnamestatus", "hs"]);
/// assert_eq!(
///     definition.all_aliases,
///     ["hostnamestatuses", "hostnamestatuses.net", "hostnamestatuses.net.example", "hostname", "hostnamestatus", "hs"],
/// );
/// ```
///
/// # Keys of `#[resource(...)]`
///
/// | key | | meaning |
/// |---|---|---|
/// | `type = "Plurals.group.example.org"` | required | `Resource::TYPE`; must follow the naming rules below |
/// | `namespace = "network"` | required | `Resource::NAMESPACE`, the default namespace; not empty, no whitespace or control characters |
/// | `aliases = ["hostname", "hn"]` | | short names for command lines, listed before the derived ones; lowercase, no whitespace, each once |
/// | `print_columns(name = "Hostname", json_path = "{.hostname}")` | repeatable | an extra column of table output: a header and a JSONPath into the spec |
/// | `sensitive` | flag | `Resource::SENSITIVE` and `Sensitivity::Sensitive`: read-only clients do not see these resources |
/// | `skip_automatic_aliases` | flag | derive no alias: both alias lists are exactly `aliases` |
/// | `crate = path::to::cosi` | | where `cosi` is, when it is not `::cosi` (renamed, or re-exported by another crate) |
///
/// Keys may be spread over several `#[resource(...)]` attributes; each may be
/// given once, except `print_columns`.
///
/// # Type naming rules
///
/// A type is `Name.suffix`, split at the first `.`. The rules are checked in
/// this order, and the first one broken is the compile error, spanned on the
/// `type` string:
///
/// 1. there is a `.` (`missing suffix`), with something before it (`name is empty`)
///    and after it (`suffix is empty`);
/// 2. the name has an uppercase letter (`name should be in CamelCase`) and matches
///    `^[A-Z][A-Za-z0-9-]+$`;
/// 3. the suffix matches `^[a-z][a-z0-9-]+(\.[a-z][a-z0-9-]+)*$`;
/// 4. the name is plural (`name should be plural`): `HostnameStatuses`, not `HostnameStatus`.
///
/// These are the rules of the Go runtime's `ResourceDefinitionSpec.Fill`, and
/// `cosi::ResourceDefinition::new` applies the same ones at run time.
///
/// # Derived names
///
/// For `HostnameStatuses.net.example.org` with `aliases = ["hostname"]`:
///
/// - `display_type` is the singular of the name: `HostnameStatus`;
/// - `aliases` are the explicit aliases, then the lowercase display type
///   (`hostnamestatus`), then, when the name has more than one uppercase letter,
///   those letters lowercased (`hs`) and, unless they end in `S`, the same plus
///   `s` (`ResourceDefinitions` gives `rd` and `rds`);
/// - `all_aliases` are the lowercase name (`hostnamestatuses`), the name with
///   each proper prefix of the suffix (`hostnamestatuses.net`,
///   `hostnamestatuses.net.example`), then `aliases`.
///
/// No alias is listed twice. With `skip_automatic_aliases`, both lists are
/// exactly the explicit aliases; the display type is still derived.
///
/// # Requirements
///
/// The type is a struct or an enum without generic parameters (a resource type
/// has one `TYPE`), and implements what `Resource` requires: `Clone`,
/// `PartialEq`, `Debug`, `Send`, `Sync`, `serde::Serialize` and
/// `serde::de::DeserializeOwned`.
///
/// # Errors
///
/// Every broken rule of the attribute is reported in one build, each under the
/// token at fault; an unknown key comes with the closest known one
/// (``unknown key `alias` in `#[resource(...)]`, did you mean `aliases`?``).
/// The type still gets a stub `Resource` impl, so its uses add no errors of
/// their own.
///
/// # Debugging
///
/// Set `COSI_MACROS_DEBUG=1` to print each expansion to stderr while building
/// (touch the file that derives, since an environment change alone does not
/// make cargo rebuild it).
#[proc_macro_derive(Resource, attributes(resource))]
pub fn derive_resource(input: TokenStream) -> TokenStream {
    debug::dump("#[derive(Resource)]", resource::derive(input.into())).into()
}

/// Declares a controller (placeholder).
#[proc_macro_attribute]
pub fn controller(args: TokenStream, item: TokenStream) -> TokenStream {
    debug::dump("#[controller]", controller::expand(args.into(), item.into())).into()
}

/// Declares a system (placeholder).
#[proc_macro]
pub fn system(input: TokenStream) -> TokenStream {
    debug::dump("cosi::system!", system::expand(input.into())).into()
}
