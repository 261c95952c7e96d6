//! The rules a `#[controller]` must satisfy beyond the grammar.
//!
//! Entry point: [`check`], which runs every rule, records each broken one in
//! the `Ctxt`, and, when none is broken, returns the [`Definition`] to expand.
//! The declaration rules here are the ones `cosi::controller::check_declaration`
//! applies to the expanded `DECLARATION` again at compile time (through
//! `assert_declaration`), which also sees what tokens cannot: two paths that
//! name one type. Checking them here first puts the error under the token at
//! fault, with a message that says what to write instead.

use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{FnArg, Generics, Item, ItemFn, Path};

use super::attr::{Args, InputKind, kw};
use super::{Definition, Shape};
use crate::ctxt::Ctxt;
use crate::naming;

/// Checks `args` against `item`; `None` exactly when an error was recorded.
pub(crate) fn check<'a>(cx: &Ctxt, item: &'a Item, args: &'a Args) -> Option<Definition<'a>> {
    let queue = args.inputs.iter().any(|input| input.kind.is_some_and(InputKind::is_queue));
    let (ident, is_fn) = match item {
        Item::Fn(function) => {
            check_fn(cx, function);
            check_no_queue_inputs_on_fn(cx, args);
            (&function.sig.ident, true)
        }
        Item::Struct(item) => {
            check_generics(cx, &item.generics, "structs");
            (&item.ident, false)
        }
        _ => {
            cx.error_spanned_by(
                item_keyword(item),
                "`#[controller]` goes on an `async fn` (a controller without state) or on a struct",
            );
            return None;
        }
    };
    let name = check_name(cx, args, ident);
    check_narrowing(cx, args);
    check_duplicates(cx, args);
    check_outputs_as_inputs(cx, args);
    check_queue_kinds(cx, args, is_fn);
    let concurrency = check_concurrency(cx, args, queue);

    if cx.has_errors() {
        return None;
    }
    let shape = match item {
        Item::Fn(function) => Shape::Fn(function),
        Item::Struct(item) if queue => Shape::Queue {
            item,
            concurrency,
            mapped: args
                .inputs
                .iter()
                .any(|input| matches!(input.kind, Some(InputKind::Mapped | InputKind::MappedDestroyReady))),
        },
        Item::Struct(item) => Shape::Struct(item),
        _ => return None,
    };
    Some(Definition {
        ident,
        krate: args.krate.clone().unwrap_or_else(default_crate),
        name: name?,
        shape,
        inputs: &args.inputs,
        outputs: &args.outputs,
        inventory: args.inventory.as_ref().is_none_or(|inventory| inventory.value),
    })
}

/// `::cosi`, the path expansions start from unless `crate = ...` says otherwise.
pub(crate) fn default_crate() -> Path {
    syn::parse_quote!(::cosi)
}

/// A controller function is `async fn name(ctx: &mut Ctx) -> R`, not generic.
fn check_fn(cx: &Ctxt, function: &ItemFn) {
    let sig = &function.sig;
    if sig.asyncness.is_none() {
        cx.error_spanned_by(
            sig.fn_token,
            format_args!("a `#[controller]` function must be `async`; write `async fn {}`", sig.ident),
        );
    }
    check_generics(cx, &sig.generics, "functions");
    let one_parameter = "a `#[controller]` function takes exactly one parameter: `ctx: &mut Ctx`";
    match (sig.inputs.len(), sig.inputs.first()) {
        (0, _) => cx.error_spanned_by(&sig.ident, one_parameter),
        (1, Some(FnArg::Typed(_))) => (),
        _ => cx.error_spanned_by(&sig.inputs, one_parameter),
    }
}

/// One `TYPE`, one `DECLARATION`: a generic controller implements the traits by hand.
fn check_generics(cx: &Ctxt, generics: &Generics, what: &str) {
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        cx.error_spanned_by(
            generics,
            format_args!(
                "`#[controller]` does not support generic {what}; implement `cosi::Controller` by hand for a generic controller"
            ),
        );
    }
}

/// Queue controllers keep no `&mut` state and take an item: they are structs.
fn check_no_queue_inputs_on_fn(cx: &Ctxt, args: &Args) {
    if let Some(input) = args.inputs.iter().find(|input| input.kind.is_some_and(InputKind::is_queue)) {
        cx.error_spanned_by(
            &input.kind_ident,
            format_args!(
                "`{}` inputs belong to queue controllers, which are structs: put `#[controller]` on a struct with \
                 `async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer)`",
                input.kind_ident
            ),
        );
    }
}

/// The declared name, by default the item's; a state must accept it as an owner.
fn check_name(cx: &Ctxt, args: &Args, ident: &syn::Ident) -> Option<String> {
    let Some(name) = &args.name else {
        return Some(ident.unraw().to_string());
    };
    match naming::validate_name("controller name", &name.value()) {
        Ok(()) => Some(name.value()),
        Err(reason) => {
            cx.error_spanned_by(name, reason);
            None
        }
    }
}

/// `(namespace = "...", id = "...")` must be names a state accepts.
fn check_narrowing(cx: &Ctxt, args: &Args) {
    for input in &args.inputs {
        for (what, value) in [(kw::NAMESPACE, &input.namespace), (kw::ID, &input.id)] {
            if let Some(value) = value
                && let Err(reason) = naming::validate_name(what, &value.value())
            {
                cx.error_spanned_by(value, reason);
            }
        }
    }
}

/// An input is one (type, namespace, id); an output is one type.
fn check_duplicates(cx: &Ctxt, args: &Args) {
    let key = |input: &super::InputEntry| {
        (tokens(&input.ty), input.namespace.as_ref().map(|ns| ns.value()), input.id.as_ref().map(|id| id.value()))
    };
    for (i, input) in args.inputs.iter().enumerate() {
        if args.inputs[..i].iter().any(|earlier| key(earlier) == key(input)) {
            cx.error_spanned_by(
                &input.ty,
                format_args!("`{}` is declared twice in `inputs = [...]`; keep one", tokens(&input.ty)),
            );
        }
    }
    for (i, output) in args.outputs.iter().enumerate() {
        if args.outputs[..i].iter().any(|earlier| tokens(&earlier.ty) == tokens(&output.ty)) {
            cx.error_spanned_by(
                &output.ty,
                format_args!("`{}` is declared twice in `outputs = [...]`; keep one", tokens(&output.ty)),
            );
        }
    }
}

/// A controller is not woken by its own writes: an output can only be a
/// destroy-ready input, or an input in a namespace named explicitly (a sum of
/// sums reads integers in one namespace and writes them to another).
fn check_outputs_as_inputs(cx: &Ctxt, args: &Args) {
    for input in &args.inputs {
        let Some(kind) = input.kind else { continue };
        if input.namespace.is_some() {
            continue;
        }
        let ty = tokens(&input.ty);
        if !kind.is_destroy_ready() && args.outputs.iter().any(|output| tokens(&output.ty) == ty) {
            cx.error_spanned_by(
                &input.kind_ident,
                format_args!(
                    "`{ty}` is also an output, so it can only be a `DestroyReady` or `MappedDestroyReady` input, \
                     or an input in another namespace (`(namespace = \"...\")`): a controller must not be woken \
                     by its own writes"
                ),
            );
        }
    }
}

/// Either every input is a queue kind (and one is `Primary`) or none is.
fn check_queue_kinds(cx: &Ctxt, args: &Args, is_fn: bool) {
    let mut kinds = args.inputs.iter().filter_map(|input| Some((input.kind?, input)));
    let Some((first, first_input)) = kinds.clone().next() else { return };
    if let Some((kind, input)) = kinds.clone().find(|(kind, _)| kind.is_queue() != first.is_queue()) {
        cx.error_spanned_by(
            &input.kind_ident,
            format_args!(
                "`{}` inputs cannot be mixed with `{}` inputs: a controller is either a queue controller \
                 (`Primary`, `Mapped`, `MappedDestroyReady`) or not (`Weak`, `Strong`, `DestroyReady`)",
                kind.as_str(),
                first.as_str()
            ),
        );
        return;
    }
    if first.is_queue() && !is_fn && !kinds.any(|(kind, _)| kind == InputKind::Primary) {
        cx.error_spanned_by(
            &first_input.kind_ident,
            "a queue controller needs a `Primary` input, whose resources are the items it reconciles",
        );
    }
}

/// `concurrency = n`, n ≥ 1, for queue controllers only; 1 by default.
fn check_concurrency(cx: &Ctxt, args: &Args, queue: bool) -> usize {
    let Some((key, value)) = &args.concurrency else { return 1 };
    if !queue {
        cx.error_spanned_by(
            key,
            "`concurrency` is for queue controllers; add a `Primary` input or remove `concurrency`",
        );
    }
    match value.base10_parse::<usize>() {
        Ok(0) => {
            cx.error_spanned_by(value, "`concurrency` must be at least 1");
            1
        }
        Ok(concurrency) => concurrency,
        Err(error) => {
            cx.syn_error(error);
            1
        }
    }
}

/// Types are compared as written: `A` and `crate::A` differ here, and the
/// compile-time `assert_declaration` catches what this misses.
pub(crate) fn tokens(ty: &impl ToTokens) -> String {
    ty.to_token_stream().to_string()
}

/// The keyword that says what an item is (`enum`, `impl`, ...), for the span of "wrong item" errors.
fn item_keyword(item: &Item) -> proc_macro2::TokenStream {
    match item {
        Item::Enum(item) => item.enum_token.to_token_stream(),
        Item::Union(item) => item.union_token.to_token_stream(),
        Item::Trait(item) => item.trait_token.to_token_stream(),
        Item::Impl(item) => item.impl_token.to_token_stream(),
        Item::Mod(item) => item.mod_token.to_token_stream(),
        Item::Const(item) => item.const_token.to_token_stream(),
        Item::Static(item) => item.static_token.to_token_stream(),
        Item::Type(item) => item.type_token.to_token_stream(),
        item => item.to_token_stream(),
    }
}
