//! Procedural macros for `cosi`.
//!
//! Use them through `cosi`, which re-exports them (`cosi::Resource`): the
//! code they generate names items of `cosi` and nothing of this crate.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod controller;
mod ctxt;
mod debug;
#[cfg(test)]
mod fuzz;
mod parse;
mod resource;
mod system;

// The naming rules and alias derivation live in `cosi-naming`, which `cosi`
// uses too, so the macros reject at compile time exactly what
// `cosi::ResourceDefinition::new` rejects at run time.
use cosi_naming as naming;

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
/// # Aliases of different types
///
/// A runtime publishes the definition of every type its program uses, and
/// refuses at registration (`cosi::RuntimeError::AliasConflict`, naming both
/// types and the alias) two types that answer to one name, unless the name is
/// an alias both derive: derived aliases collide by design (`HostnameSpecs`
/// and `HostnameStatuses` both derive `hs`, as in Talos), and a client asked
/// for such a name says it is ambiguous. So an explicit alias, the lowercase
/// plural and its dotted prefixes must each name one type in a program. An
/// explicit alias the type derives anyway counts as derived.
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

/// Declares a controller: what it reads (inputs) and writes (outputs), and
/// the code that reconciles them.
///
/// On an `async fn`, the controller has no state: the function is its
/// reconcile, and a struct of the same name (braced and empty, so it lives
/// beside the function) is the controller type. On a struct, the struct is
/// the controller and its inherent `async fn reconcile` the reconcile.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// pub struct HostnameSpec {
///     pub hostname: String,
/// }
///
/// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// pub struct HostnameStatus {
///     pub hostname: String,
/// }
///
/// /// Writes a status for each spec: a controller without state.
/// #[controller(inputs = [Strong<HostnameSpec>], outputs = [Exclusive<HostnameStatus>])]
/// pub async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
///     for spec in ctx.list::<HostnameSpec>(&ListOptions::default()).await? {
///         ctx.modify::<HostnameStatus>(spec.id(), |status| status.hostname = spec.hostname.clone()).await?;
///     }
///     ctx.cleanup_outputs::<HostnameStatus>().await
/// }
///
/// /// Counts reconciles: a controller with state.
/// #[controller(inputs = [Weak<HostnameStatus>], name = "hostname-counter")]
/// #[derive(Default)]
/// pub struct Counter {
///     reconciles: usize,
/// }
///
/// impl Counter {
///     async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> cosi::Result<()> {
///         self.reconciles += ctx.list::<HostnameStatus>(&ListOptions::default()).await?.len();
///         Ok(())
///     }
/// }
///
/// /// Reconciles one spec at a time, up to four at once: a queue controller.
/// #[controller(inputs = [Primary<HostnameSpec>], concurrency = 4)]
/// #[derive(Default)]
/// pub struct PerSpec;
///
/// impl PerSpec {
///     async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> cosi::Result<()> {
///         let spec = ctx.get::<HostnameSpec>(item).await?;
///         ctx.add_finalizers::<HostnameSpec>(&spec, &["per-spec"]).await
///     }
/// }
///
/// use cosi::controller::{Declared, InputKind};
///
/// assert_eq!(hostname::DECLARATION.name, "hostname");
/// assert_eq!(hostname::DECLARATION.inputs[0].kind, InputKind::Strong);
/// assert_eq!(Counter::DECLARATION.name, "hostname-counter");
/// assert_eq!(PerSpec::DECLARATION.concurrency, Some(4));
///
/// let runtime = Runtime::new(cosi::state::memory());
/// runtime.register(hostname {})?; // `hostname` alone is the function
/// runtime.register(Counter::default())?;
/// runtime.register(PerSpec)?;
/// # Ok::<(), cosi::RuntimeError>(())
/// ```
///
/// # Keys of `#[controller(...)]`
///
/// | key | | meaning |
/// |---|---|---|
/// | `inputs = [Weak<A>, Strong<B>(namespace = "ns", id = "one")]` | default `[]` | what wakes the controller, and what it may read |
/// | `outputs = [Exclusive<C>, Shared<D>]` | default `[]` | what it writes (and may read) |
/// | `name = "custom-name"` | | the controller's name, the owner of its outputs; default: the function or struct name |
/// | `concurrency = 4` | queue controllers | how many items are reconciled at once; default 1 |
/// | `inventory = false` | | do not collect the controller for `Runtime::from_inventory` |
/// | `crate = path::to::cosi` | | where `cosi` is, when it is not `::cosi` |
///
/// Input kinds:
///
/// | kind | controller | woken by | finalizers |
/// |---|---|---|---|
/// | `Weak<T>` | reconcile | any change | no |
/// | `Strong<T>` | reconcile | any change | may add and remove its own |
/// | `DestroyReady<T>` | reconcile | a resource tearing down with no finalizers left | no |
/// | `Primary<T>` | queue | each changed resource, queued as an item | yes |
/// | `Mapped<T>` | queue | each changed resource, mapped to items by `map` | yes |
/// | `MappedDestroyReady<T>` | queue | as `Mapped`, once tearing down with no finalizers | no |
///
/// An input watches `T::NAMESPACE` unless `(namespace = "...")` names
/// another; `(id = "...")` narrows it to one resource. Output kinds are
/// `Exclusive<T>` (the one writer of the type) and `Shared<T>` (one of several
/// writers, each of its own resources).
///
/// # The three shapes
///
/// - `async fn name(ctx: &mut Ctx) -> R`: a reconcile controller without
///   state. Write `Ctx` bare: the macro fills in the controller type.
/// - A struct with `async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> R`:
///   a reconcile controller with state kept across reconciles.
/// - A struct with a `Primary` input: a queue controller, with
///   `async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> R` and,
///   when it has `Mapped`/`MappedDestroyReady` inputs,
///   `async fn map(&self, ctx: &Ctx<Self>, input: &ReducedMetadata) -> M`.
///
/// `R` is `()`, `Result<(), E>` or (queue controllers) `Result<Requeue, E>`,
/// for any error `E` that converts into `Box<dyn Error + Send + Sync>`; `M`
/// is `Vec<Pointer>` or `Result<Vec<Pointer>, E>`. A struct collected by the
/// inventory must implement `Default`, which builds it.
///
/// # What the compiler checks
///
/// The context is typed by the declaration: `ctx.list::<T>(&ListOptions::default())` needs `T` among
/// the inputs or outputs, `ctx.modify::<T>(..)` among the outputs, and
/// `ctx.add_finalizers::<T>(..)` among the `Strong`, `Primary` or `Mapped`
/// inputs, or the build fails with a message that says what to declare.
///
/// The declaration itself is checked as it is written, each mistake under its
/// token: unknown keys and kinds (with the closest known one), a kind in the
/// wrong list, an entry that is not `Kind<Type>`, an input (type, namespace,
/// ID) or output type given twice, an output that is also an input that would
/// wake the controller on its own writes, queue kinds mixed with the others or
/// without a `Primary` one, `concurrency` outside queue controllers or `0`,
/// namespaces and IDs a state would refuse, generics, and a function that is
/// not `async` or does not take exactly one parameter. The same rules run
/// again over the generated declaration at compile time, which catches what
/// tokens hide (one type named by two paths), and once more when a runtime
/// registers the controller.
///
/// # Generated items
///
/// For a function `name`, a struct `name {}` with the function's visibility
/// and docs. For the controller type: `cosi::controller::Declared` (its
/// `DECLARATION`), `Controller` or `QueueController`, `Register`, and the
/// access markers `Reads`, `Writes`, `Finalizes` for the declared types.
/// Unless `inventory = false`, an entry for `Runtime::from_inventory`.
///
/// # Link-time collection and its pitfall
///
/// The entries are collected by the linker (the `inventory` crate). A crate
/// that the program lists as a dependency but never names is not linked at
/// all, so its controllers are silently missing from `from_inventory`. Name
/// such a crate once in the binary, and in each integration test that needs
/// its controllers:
///
/// ```text
/// use my_os_controllers as _;
/// ```
///
/// Registering by hand always works: `runtime.register(hostname {})`, and is
/// the way for controllers declared with `inventory = false`, for instances
/// built with arguments, and for several instances of one type
/// (`runtime.register(Sum::new("a").named("sum-a"))`).
#[proc_macro_attribute]
pub fn controller(args: TokenStream, item: TokenStream) -> TokenStream {
    debug::dump("#[controller]", controller::expand(args.into(), item.into())).into()
}

/// Declares a set of controllers whose graph the compiler checks: two
/// controllers with one name, or two writers of one type where either is
/// exclusive, fail the build.
///
/// `cosi::system!(MyOs = [hostname, ServiceFiles]);` (or `pub MyOs`, with
/// doc comments before it) declares a unit struct `MyOs` with
///
/// - `MyOs::DECLARATIONS: &'static [&'static Declaration]`, in the order listed;
/// - `MyOs::runtime(state, ...) -> Result<Runtime, RuntimeError>`, a runtime
///   over `state` with each controller registered, in the order listed.
///
/// An entry says where `runtime()` gets its controller:
///
/// - `Type`: built with `Default`;
/// - `Type { .. }`: built by the caller with its arguments, and given to
///   `runtime()` as a parameter (`MyOs::runtime(state, Renderer::new(dir))`);
/// - `Type as NAME`: given too, and registered under a name of its own
///   (`NAME`, a `&'static str` constant), as each instance of a generic
///   controller such as `cosi::controller::Merge` is; the graph is checked
///   under that name, and `runtime()` refuses an instance registered under
///   another (`cosi::RuntimeError::NotAsListed`).
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// #[resource(type = "HostnameStatuses.net.example.org", namespace = "network")]
/// pub struct HostnameStatus {
///     pub hostname: String,
/// }
///
/// #[controller(outputs = [Exclusive<HostnameStatus>])]
/// async fn hostname(ctx: &mut Ctx) -> cosi::Result<()> {
///     ctx.modify::<HostnameStatus>("hostname", |status| status.hostname = "talos".into()).await?;
///     Ok(())
/// }
///
/// #[controller(inputs = [Weak<HostnameStatus>])]
/// async fn motd(ctx: &mut Ctx) -> cosi::Result<()> {
///     ctx.list::<HostnameStatus>(&ListOptions::default()).await?;
///     Ok(())
/// }
///
/// cosi::system!(
///     /// The controllers of the OS.
///     pub MyOs = [hostname, motd]
/// );
///
/// assert_eq!(MyOs::DECLARATIONS.len(), 2);
/// let runtime = MyOs::runtime(cosi::state::memory())?;
/// assert_eq!(runtime.controllers(), ["hostname", "motd"]);
/// # Ok::<(), cosi::RuntimeError>(())
/// ```
///
/// A second controller with `outputs = [Exclusive<HostnameStatus>]` in the
/// list fails the build with the runtime's message:
///
/// ```text
/// error[E0080]: evaluation panicked: controllers `hostname` and `other` both write
///               `HostnameStatuses.net.example.org`, and `hostname` declares it exclusive:
///               a type has one exclusive writer, or only shared ones
/// ```
#[proc_macro]
pub fn system(input: TokenStream) -> TokenStream {
    debug::dump("cosi::system!", system::expand(input.into())).into()
}
