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

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::expand;

    fn errors(output: &str) -> Vec<&str> {
        output.split("compile_error !").skip(1).collect()
    }

    #[test]
    fn a_function_becomes_a_struct_and_its_ctx_is_completed() {
        let output = expand(
            quote!(inputs = [Weak<Spec>]),
            quote! {
                /// Docs.
                pub async fn hostname(ctx: &mut Ctx) {}
            },
        )
        .to_string();
        assert!(errors(&output).is_empty(), "{output}");
        let structure = quote! {
            #[doc = r" Docs."]
            #[allow(non_camel_case_types)]
            #[derive(::cosi::__private::Clone, ::cosi::__private::Copy, ::cosi::__private::Debug, ::cosi::__private::Default)]
            pub struct hostname {}

            #[doc = r" Docs."]
            pub async fn hostname(ctx: &mut Ctx<hostname>) {}
        };
        assert!(output.starts_with(&structure.to_string()), "{output}");
        for expected in [
            quote!(impl ::cosi::__private::Controller for hostname),
            quote!(impl ::cosi::__private::Reads<hostname> for Spec {}),
            quote!(name: "hostname"),
            quote!(::cosi::__private::InputDecl::of::<Spec>(::cosi::__private::InputKind::Weak)),
            quote!(::cosi::__private::inventory::submit!),
        ] {
            assert!(output.contains(&expected.to_string()), "{expected} not in {output}");
        }
        assert!(!output.contains("Finalizes"), "a weak input grants no finalizers: {output}");
    }

    #[test]
    fn a_queue_struct_gets_its_concurrency_and_one_impl_per_type() {
        let output = expand(
            quote!(inputs = [Primary<A>, Mapped<B>, Mapped<B>(namespace = "other")], outputs = [Shared<C>], concurrency = 3, inventory = false),
            quote!(struct Q;),
        )
        .to_string();
        assert!(errors(&output).is_empty(), "{output}");
        for expected in [
            quote!(concurrency: ::cosi::__private::Option::Some(3usize)),
            quote!(impl ::cosi::__private::QueueController for Q),
            quote!(fn map),
            quote!(::cosi::__private::Registration::queue(self)),
            quote!(.in_namespace("other")),
        ] {
            assert!(output.contains(&expected.to_string()), "{expected} not in {output}");
        }
        assert_eq!(output.matches(&quote!(impl ::cosi::__private::Reads<Q> for B {}).to_string()).count(), 1);
        assert_eq!(output.matches(&quote!(impl ::cosi::__private::Finalizes<Q> for).to_string()).count(), 2);
        assert!(!output.contains("inventory"), "{output}");
    }

    #[test]
    fn every_error_is_reported_with_stubs() {
        let output = expand(
            quote!(inputs = [Wek<A>, Weak<A>, Strong<A>, Exclusive<B>, C], outputs = [Weak<D>, Shared<E>, Shared<E>], nmae = "x", concurrency = 2),
            quote!(fn hostname(ctx: &mut Ctx, extra: u8) {}),
        )
        .to_string();
        let expected = [
            "unknown input kind `Wek`, did you mean `Weak`?",
            "`Exclusive` is an output kind; move `Exclusive<...>` to `outputs = [...]`",
            "expected `Kind<Type>`, such as `Weak<HostnameSpec>`",
            "`Weak` is an input kind; move `Weak<...>` to `inputs = [...]`",
            "unknown key `nmae` in `#[controller(...)]`, did you mean `name`?",
            "a `#[controller]` function must be `async`; write `async fn hostname`",
            "a `#[controller]` function takes exactly one parameter: `ctx: &mut Ctx`",
            "controller `hostname` declares output `E` twice; keep one",
            "controller `hostname` has a `concurrency` but no queue inputs: `concurrency` is for queue controllers; \
             add a `Primary` input or remove `concurrency`",
            "controller `hostname` declares input `A` twice; keep one",
        ];
        let errors = errors(&output);
        assert_eq!(errors.len(), expected.len(), "{output}");
        for (error, expected) in errors.iter().zip(expected) {
            assert!(error.contains(expected), "expected {expected:?} in {error:?}");
        }
        // The stubs keep the body compiling: the struct, the traits, and access to every type named.
        for expected in [
            quote!(
                pub struct hostname {}
            )
            .to_string()
            .replace("pub ", ""),
            quote!(impl ::cosi::__private::Controller for hostname).to_string(),
            quote!(impl ::cosi::__private::Reads<hostname> for A {}).to_string(),
            quote!(impl ::cosi::__private::Writes<hostname> for D {}).to_string(),
        ] {
            assert!(output.contains(&expected), "{expected} not in {output}");
        }
    }

    #[test]
    fn the_crate_path_is_the_one_given() {
        for (args, item) in [
            (
                quote!(inputs = [Weak<A>], outputs = [Shared<B>], crate = my::cosi),
                quote!(
                    async fn f(ctx: &mut Ctx) {}
                ),
            ),
            (
                quote!(inputs = [Weak<A>], crate = my::cosi),
                quote!(
                    struct S;
                ),
            ),
            (
                quote!(inputs = [Primary<A>, Mapped<B>], crate = my::cosi),
                quote!(
                    struct Q;
                ),
            ),
            // The stubs beside an error.
            (
                quote!(inputs = [Wek<A>], crate = my::cosi),
                quote!(
                    async fn f(ctx: &mut Ctx) {}
                ),
            ),
            (
                quote!(inputs = [Primary<A>], nmae = "q", crate = my::cosi),
                quote!(
                    struct Q;
                ),
            ),
        ] {
            let output = expand(args, item).to_string();
            assert!(output.contains(&quote!(my::cosi::__private::Declared).to_string()), "{output}");
            let elsewhere = output.replace(&quote!(my::cosi::).to_string(), "");
            assert!(!elsewhere.contains(":: cosi ::"), "{output}");
        }
    }

    #[test]
    fn a_cfg_after_the_attribute_applies_to_what_it_adds() {
        let cfg = quote!(#[cfg(feature = "x")]).to_string();
        for (args, item) in [
            (
                quote!(inputs = [Weak<A>]),
                quote!(
                    #[cfg(feature = "x")]
                    async fn f(ctx: &mut Ctx) {}
                ),
            ),
            (
                quote!(inputs = [Weak<A>]),
                quote!(
                    #[cfg(feature = "x")]
                    struct S;
                ),
            ),
            // The stubs beside an error too.
            (
                quote!(inputs = [Wek<A>]),
                quote!(
                    #[cfg(feature = "x")]
                    async fn f(ctx: &mut Ctx) {}
                ),
            ),
        ] {
            let output = expand(args, item).to_string();
            let guarded = format!("{cfg} const _ : () =");
            assert!(output.contains(&guarded), "{output}");
            // The function's struct, the function, and the impls: each guarded.
            assert!(output.matches(&cfg).count() >= 2, "{output}");
        }
    }

    #[test]
    fn a_stub_declares_the_name_of_its_item() {
        let declared = |name: &str| quote!(name: #name).to_string();
        let output = expand(
            quote!(inputs = [Wek<A>]),
            quote!(
                async fn hostname(ctx: &mut Ctx) {}
            ),
        )
        .to_string();
        assert_eq!(errors(&output).len(), 1, "{output}");
        assert!(output.contains(&declared("hostname")), "{output}");
        let output = expand(
            quote!(inputs = [Wek<A>], name = "host"),
            quote!(
                struct r#Hostname;
            ),
        )
        .to_string();
        assert!(output.contains(&declared("host")), "{output}");
        // A name the rules refuse is not declared again: the item's is.
        let output = expand(
            quote!(name = " host"),
            quote!(
                struct Hostname;
            ),
        )
        .to_string();
        assert_eq!(errors(&output).len(), 1, "{output}");
        assert!(output.contains(&declared("Hostname")), "{output}");
    }

    #[test]
    fn other_items_pass_through_with_the_error() {
        let output = expand(
            quote!(),
            quote!(
                enum E {
                    A,
                }
            ),
        )
        .to_string();
        assert_eq!(errors(&output).len(), 1, "{output}");
        assert!(output.contains("enum E"), "{output}");
        assert!(!output.contains("impl"), "{output}");
    }
}
