//! The rules a `#[controller]` must satisfy beyond the grammar.
//!
//! Entry point: [`check`], which runs every rule, records each broken one in
//! the `Ctxt`, and, when none is broken, returns the [`Definition`] to expand.
//! The rules of a declaration, and their messages, are `cosi-rules`'s: the
//! same `const fn`s check the expanded `DECLARATION` again at compile time
//! (through `assert_declaration`), which also sees what tokens cannot (two
//! paths that name one type), and the runtime checks it when registered.
//! Checking them here first puts the error under the token at fault. The
//! rules of the item itself (a struct or an `async fn` of one parameter) are
//! the macro's alone.

use cosi_rules::{self as rules, Conflict, InputRef, OutputRef, QueueRule};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{FnArg, Generics, Item, ItemFn, Path};

use super::attr::{Args, InputEntry, InputKind, OutputEntry, kw};
use super::{Definition, Shape};
use crate::ctxt::Ctxt;
use crate::naming;

/// Checks `args` against `item`; `None` exactly when an error was recorded.
pub(crate) fn check<'a>(cx: &Ctxt, item: &'a Item, args: &'a Args) -> Option<Definition<'a>> {
    let (ident, is_fn) = match item {
        Item::Fn(function) => {
            check_fn(cx, function);
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
    // A struct with queue inputs is a queue controller; a function never is.
    let queue = !is_fn && args.inputs.iter().any(|input| input.kind.is_some_and(InputKind::is_queue));
    let name = check_name(cx, args, ident);
    let controller = args.name.as_ref().map_or_else(|| ident.unraw().to_string(), syn::LitStr::value);
    check_narrowing(cx, args, &controller);
    let concurrency = concurrency(cx, args);
    check_declaration(cx, args, &controller, queue, concurrency);

    if cx.has_errors() {
        return None;
    }
    let shape = match item {
        Item::Fn(function) => Shape::Fn(function),
        Item::Struct(item) if queue => Shape::Queue {
            item,
            concurrency: concurrency.unwrap_or(1),
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

/// The declared name, by default the item's, if it is one a controller may
/// take (`cosi-rules`' `controller_name`, which the runtime applies again to
/// the name a registration gives).
fn check_name(cx: &Ctxt, args: &Args, ident: &syn::Ident) -> Option<String> {
    let name = args.name.as_ref().map_or_else(|| ident.unraw().to_string(), syn::LitStr::value);
    match (rules::controller_name(&name), &args.name) {
        (Ok(()), _) => return Some(name),
        (Err(conflict), Some(literal)) => cx.error_spanned_by(literal, conflict),
        (Err(conflict), None) => cx.error_spanned_by(ident, conflict),
    }
    None
}

/// `(namespace = "...", id = "...")` must be names a state accepts.
fn check_narrowing(cx: &Ctxt, args: &Args, controller: &str) {
    for input in &args.inputs {
        for (what, value) in [(kw::NAMESPACE, &input.namespace), (kw::ID, &input.id)] {
            if let Some(value) = value
                && let Err(reason) = naming::validate_name(what, &value.value())
            {
                cx.error_spanned_by(value, Conflict::InvalidInput { controller, reason: &reason });
            }
        }
    }
}

/// The rules of `cosi-rules` over the entries as written, each broken one
/// reported under its entry. Types are their paths as written; a namespace
/// not named, and every output's, is left empty, as the rules expect where
/// it is not known.
fn check_declaration(cx: &Ctxt, args: &Args, controller: &str, queue: bool, concurrency: Option<usize>) {
    let input_keys: Vec<(String, Option<String>, Option<String>)> = args
        .inputs
        .iter()
        .map(|input| {
            (tokens(&input.ty), input.namespace.as_ref().map(|ns| ns.value()), input.id.as_ref().map(|id| id.value()))
        })
        .collect();
    // Entries of an unknown kind already have their error, and are no input or output yet.
    let inputs: Vec<(InputRef<'_>, &InputEntry)> = args
        .inputs
        .iter()
        .zip(&input_keys)
        .filter_map(|(input, (r#type, namespace, id))| {
            let view = InputRef {
                namespace: namespace.as_deref().unwrap_or(""),
                r#type,
                id: id.as_deref(),
                kind: input.kind?,
                explicit_namespace: namespace.is_some(),
            };
            Some((view, input))
        })
        .collect();
    let output_types: Vec<String> = args.outputs.iter().map(|output| tokens(&output.ty)).collect();
    let outputs: Vec<(OutputRef<'_>, &OutputEntry)> = args
        .outputs
        .iter()
        .zip(&output_types)
        .filter_map(|(output, r#type)| Some((OutputRef { namespace: "", r#type, kind: output.kind? }, output)))
        .collect();

    for (i, (output, entry)) in outputs.iter().enumerate() {
        if let Some(conflict) =
            outputs[..i].iter().find_map(|(earlier, _)| rules::duplicate_output(controller, *earlier, *output).err())
        {
            cx.error_spanned_by(&entry.ty, conflict);
        }
    }

    let queue_inputs = inputs.iter().any(|(input, _)| input.kind.is_queue());
    let primary_input = inputs.iter().any(|(input, _)| input.kind == InputKind::Primary);
    // A queue controller without `concurrency` runs one item at a time.
    let concurrency = match queue {
        true => Some(concurrency.unwrap_or(1)),
        false => concurrency,
    };
    if let Err(conflict) = rules::queue_settings(controller, concurrency, queue_inputs, primary_input) {
        let first_queue_input = inputs.iter().find(|(input, _)| input.kind.is_queue());
        match (conflict, &args.concurrency, first_queue_input) {
            (Conflict::InvalidQueue { reason: QueueRule::ZeroConcurrency, .. }, Some((_, value)), _) => {
                cx.error_spanned_by(value, conflict);
            }
            (Conflict::InvalidQueue { reason: QueueRule::ConcurrencyWithoutQueue, .. }, Some((key, _)), _) => {
                cx.error_spanned_by(key, conflict);
            }
            (_, _, Some((_, entry))) => cx.error_spanned_by(&entry.kind_ident, conflict),
            (_, Some((key, _)), None) => cx.error_spanned_by(key, conflict),
            (_, None, None) => cx.syn_error(syn::Error::new(proc_macro2::Span::call_site(), conflict)),
        }
    }
    // One input of the wrong shape says what the controller is; the others would say it again.
    if let Some((conflict, entry)) =
        inputs.iter().find_map(|(input, entry)| Some((rules::input_shape(controller, queue, *input).err()?, entry)))
    {
        cx.error_spanned_by(&entry.kind_ident, conflict);
    }

    for (i, (input, entry)) in inputs.iter().enumerate() {
        if let Some(conflict) =
            inputs[..i].iter().find_map(|(earlier, _)| rules::duplicate_input(controller, *earlier, *input).err())
        {
            cx.error_spanned_by(&entry.ty, conflict);
        }
        if let Some(conflict) =
            outputs.iter().find_map(|(output, _)| rules::output_is_input(controller, *input, *output).err())
        {
            cx.error_spanned_by(&entry.kind_ident, conflict);
        }
    }
}

/// The value of `concurrency = n`, if given (1 when it does not parse: the error is recorded).
fn concurrency(cx: &Ctxt, args: &Args) -> Option<usize> {
    let (_, value) = args.concurrency.as_ref()?;
    match value.base10_parse::<usize>() {
        Ok(concurrency) => Some(concurrency),
        Err(error) => {
            cx.syn_error(error);
            Some(1)
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
