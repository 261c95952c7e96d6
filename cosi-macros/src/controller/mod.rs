//! `#[controller(...)]`: parse the attribute (`attr`), check it against the
//! item it is on (`check`), expand the controller impls (`expand`).
//!
//! Every stage records user errors in one `Ctxt`; on any error the output is
//! the errors, the item, and stub impls, so code using the controller compiles
//! on and the user sees only the errors that matter.

mod attr;
mod check;
mod expand;

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Ident, Item, ItemFn, ItemStruct, Path};

use crate::ctxt::Ctxt;
use attr::{Args, InputEntry, OutputEntry};

/// The whole attribute macro, from the arguments and the item to the impls (or the errors).
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::default();
    let args = Args::parse(&cx, args);
    let parsed: Item = match syn::parse2(item.clone()) {
        Ok(parsed) => parsed,
        Err(error) => {
            // Not an item syn knows: pass it through untouched, beside the errors.
            cx.syn_error(error);
            let errors = cx.check().err().map(syn::Error::into_compile_error);
            return quote!(#errors #item);
        }
    };
    let definition = check::check(&cx, &parsed, &args);
    match (cx.check(), definition) {
        (Ok(()), Some(definition)) => expand::controller(&definition),
        (Err(errors), _) => expand::fallback(&parsed, &args, errors),
        (Ok(()), None) => unreachable!("`check` returns a definition unless it recorded an error"),
    }
}

/// A controller that passed every check: what `expand` turns into impls.
pub(crate) struct Definition<'a> {
    /// The type the impls are for: the struct, or the one generated for the function.
    pub(crate) ident: &'a Ident,
    /// The path of the `cosi` crate, `::cosi` unless `crate = ...` says otherwise.
    pub(crate) krate: Path,
    /// The declared name.
    pub(crate) name: String,
    pub(crate) shape: Shape<'a>,
    pub(crate) inputs: &'a [InputEntry],
    pub(crate) outputs: &'a [OutputEntry],
    /// Whether to submit the controller to the inventory.
    pub(crate) inventory: bool,
}

/// The three kinds of controller the macro writes.
pub(crate) enum Shape<'a> {
    /// `async fn name(ctx: &mut Ctx) -> R`: a reconcile controller without state.
    Fn(&'a ItemFn),
    /// A struct with `async fn reconcile(&mut self, ctx: &mut Ctx<Self>) -> R`.
    Struct(&'a ItemStruct),
    /// A struct with `async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer) -> R`
    /// and, when it has mapped inputs, `async fn map(&self, ctx: &Ctx<Self>, input: &ReducedMetadata) -> M`.
    Queue { item: &'a ItemStruct, concurrency: usize, mapped: bool },
}
