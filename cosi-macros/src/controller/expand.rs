//! The impls of a checked [`Definition`], and the stubs emitted beside the
//! errors when the checks fail.
//!
//! For a function, the output is a braced unit struct of the same name (a
//! braced struct lives in the type namespace only, so it coexists with the
//! function), the function with `Ctx` filled in, and the impls for the
//! struct. Impls and assertions go inside `const _: () = { ... };` and name
//! nothing but `<cosi>::__private::*`, so they compile whatever the user has
//! in scope.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, Item, ItemFn, PathArguments, ReturnType, Type};

use super::attr::{Args, InputEntry, InputKind, OutputEntry};
use super::check::{default_crate, tokens};
use super::{Definition, Shape};

/// Everything a checked controller expands to.
pub(crate) fn controller(definition: &Definition<'_>) -> TokenStream {
    let Definition { ident, krate, name, shape, inputs, outputs, inventory } = definition;
    let private = quote!(#krate::__private);

    let (item, cfgs) = match shape {
        Shape::Fn(function) => (function_and_struct(&private, function, ident), cfgs(&function.attrs)),
        Shape::Struct(item) | Shape::Queue { item, .. } => (quote!(#item), cfgs(&item.attrs)),
    };
    let concurrency = match shape {
        Shape::Queue { concurrency, .. } => quote!(#private::Option::Some(#concurrency)),
        Shape::Fn(_) | Shape::Struct(_) => quote!(#private::Option::None),
    };
    let input_decls = inputs.iter().filter_map(|input| input_decl(&private, input));
    let output_decls = outputs.iter().filter_map(|output| output_decl(&private, output));
    let controller_impl = controller_impl(&private, ident, shape);
    let access = access_impls(&private, ident, inputs, outputs);
    let inventory = inventory.then(|| submit(&private, ident));

    quote! {
        #item

        #(#cfgs)*
        const _: () = {
            #[automatically_derived]
            impl #private::Declared for #ident {
                const DECLARATION: #private::Declaration = #private::Declaration {
                    name: #name,
                    inputs: &[#(#input_decls),*],
                    outputs: &[#(#output_decls),*],
                    concurrency: #concurrency,
                };
            }

            // The rules of `cosi::controller::check_declaration`, at compile time.
            const _: () = #private::assert_declaration(&<#ident as #private::Declared>::DECLARATION);

            #controller_impl
            #access
            #inventory
        };
    }
}

/// `errors`, the item, and stubs: a `Declared` impl that declares nothing but its name,
/// the controller trait, `Register`, and the access markers of every type the
/// attribute names, so that the body and the uses of the controller add no
/// errors of their own. Generic structs and items that are neither functions
/// nor structs get no stub: they could not be controllers anyway.
pub(crate) fn fallback(item: &Item, args: &Args, errors: syn::Error) -> TokenStream {
    let errors = errors.into_compile_error();
    let krate = args.krate.clone().unwrap_or_else(default_crate);
    let private = quote!(#krate::__private);
    let (item, ident, queue, cfgs) = match item {
        // A generic function still gets a (plain) struct: its body then compiles on.
        Item::Fn(original) => {
            // The stub impls never call the function.
            let mut function = original.clone();
            function.attrs.push(syn::parse_quote!(#[allow(dead_code)]));
            let item = function_and_struct(&private, &function, &original.sig.ident);
            (item, &original.sig.ident, false, cfgs(&original.attrs))
        }
        Item::Struct(item) if item.generics.params.is_empty() => {
            let queue = args.inputs.iter().any(|input| input.kind.is_some_and(InputKind::is_queue));
            (quote!(#item), &item.ident, queue, cfgs(&item.attrs))
        }
        item => return quote!(#errors #item),
    };
    let controller_impl = match queue {
        false => quote! {
            #[automatically_derived]
            impl #private::Controller for #ident {
                fn reconcile(&mut self, _: &mut #private::Ctx<Self>) -> impl #private::Future<Output = #private::Outcome> + #private::Send {
                    #private::pending()
                }
            }
        },
        true => quote! {
            #[automatically_derived]
            impl #private::QueueController for #ident {
                fn reconcile(&self, _: &#private::Ctx<Self>, _: &#private::Pointer) -> impl #private::Future<Output = #private::Outcome> + #private::Send {
                    #private::pending()
                }
            }
        },
    };
    let access = access_impls(&private, ident, &args.inputs, &args.outputs);
    let name = stub_name(args, ident);
    quote! {
        #errors
        #item

        #(#cfgs)*
        const _: () = {
            #[automatically_derived]
            impl #private::Declared for #ident {
                const DECLARATION: #private::Declaration = #private::Declaration {
                    name: #name,
                    inputs: &[],
                    outputs: &[],
                    concurrency: #private::Option::None,
                };
            }

            #controller_impl

            #[automatically_derived]
            impl #private::Register for #ident {
                fn registration(self) -> #private::Registration {
                    #private::unreachable!()
                }
            }

            #access
        };
    }
}

/// The name of a stub: the one given if valid, else the item's if valid,
/// else the item's with a suffix (`runtime` is reserved). A `system!` that
/// lists the controller checks the stub's declaration, which must not add an
/// error of its own (an empty or reserved name would).
fn stub_name(args: &Args, ident: &Ident) -> String {
    let valid = |name: &String| cosi_rules::controller_name(name).is_ok();
    let item = ident.unraw().to_string();
    match args.name.as_ref().map(syn::LitStr::value).filter(valid) {
        Some(name) => name,
        None if valid(&item) => item,
        None => format!("{item}-with-errors"),
    }
}

/// The `#[cfg(...)]` attributes written after `#[controller]`: what the
/// expansion adds beside the item exists when the item does.
fn cfgs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|attr| attr.path().is_ident("cfg")).collect()
}

/// The struct named after the function, then the function with `ctx: &mut Ctx`
/// completed to `ctx: &mut Ctx<name>`.
fn function_and_struct(private: &TokenStream, function: &ItemFn, ident: &Ident) -> TokenStream {
    let docs = function.attrs.iter().filter(|attr| attr.path().is_ident("doc"));
    let cfgs = cfgs(&function.attrs);
    let vis = &function.vis;
    let mut function = function.clone();
    if let Some(FnArg::Typed(parameter)) = function.sig.inputs.first_mut() {
        complete_ctx(&mut parameter.ty, ident);
    }
    quote! {
        #(#docs)*
        #(#cfgs)*
        #[allow(non_camel_case_types)]
        #[derive(#private::Clone, #private::Copy, #private::Debug, #private::Default)]
        #vis struct #ident {}

        #function
    }
}

/// `Ctx` or `&mut Ctx`, written without generics, becomes `Ctx<ident>`.
fn complete_ctx(ty: &mut Type, ident: &Ident) {
    match ty {
        Type::Reference(reference) => complete_ctx(&mut reference.elem, ident),
        Type::Path(path) if path.qself.is_none() => {
            if let Some(segment) = path.path.segments.last_mut()
                && segment.ident == "Ctx"
                && matches!(segment.arguments, PathArguments::None)
            {
                let ty: Type = syn::parse_quote_spanned!(segment.ident.span()=> #ident);
                segment.arguments = PathArguments::AngleBracketed(syn::parse_quote!(<#ty>));
            }
        }
        _ => (),
    }
}

/// `impl Controller` or `impl QueueController`, calling the user's function or methods, and `impl Register`.
///
/// Calls are spanned on the user's code, so that a wrong signature or return
/// type is reported there. The locals they use are interpolated, with the
/// call-site span of their declarations: spanned on a name that comes from a
/// `macro_rules!` metavariable, they would take that macro's hygiene and not
/// be the variables declared. A struct's methods are called from free functions
/// beside the trait impl, not from inside it: there the trait's own
/// `reconcile` is in scope, and a struct without an inherent `reconcile`
/// would compile into a call to itself (see `missing_method` for what it
/// compiles into instead). Their `use<..>` lists what the future borrows, as
/// the trait methods do, in any edition.
fn controller_impl(private: &TokenStream, ident: &Ident, shape: &Shape<'_>) -> TokenStream {
    match shape {
        Shape::Fn(function) => {
            let output = output_span(&function.sig.output, function.sig.ident.span());
            let ctx = format_ident!("__cosi_ctx");
            let call = quote_spanned!(output=> #private::IntoOutcome::into_outcome(#ident(#ctx).await));
            quote! {
                #[automatically_derived]
                impl #private::Controller for #ident {
                    fn reconcile(&mut self, __cosi_ctx: &mut #private::Ctx<Self>) -> impl #private::Future<Output = #private::Outcome> + #private::Send {
                        async move { #call }
                    }
                }

                #[automatically_derived]
                impl #private::Register for #ident {
                    fn registration(self) -> #private::Registration {
                        #private::Registration::controller(self)
                    }
                }
            }
        }
        Shape::Struct(_) => {
            let missing = missing_method(private, ident, "reconcile", 2);
            let [future, this, ctx] = locals(["__cosi_future", "__cosi_self", "__cosi_ctx"]);
            let call = quote_spanned! {ident.span()=>
                let #future = #private::reconcile_method::<#ident, _>(#ident::reconcile(#this, #ctx));
            };
            quote! {
                fn __cosi_reconcile<'s, 'c>(
                    __cosi_self: &'s mut #ident,
                    __cosi_ctx: &'c mut #private::Ctx<#ident>,
                ) -> impl #private::Future<Output = #private::Outcome> + #private::Send + use<'s, 'c> {
                    #missing
                    #call
                    async move { #private::IntoOutcome::into_outcome(__cosi_future.await) }
                }

                #[automatically_derived]
                impl #private::Controller for #ident {
                    fn reconcile(&mut self, __cosi_ctx: &mut #private::Ctx<Self>) -> impl #private::Future<Output = #private::Outcome> + #private::Send {
                        __cosi_reconcile(self, __cosi_ctx)
                    }
                }

                #[automatically_derived]
                impl #private::Register for #ident {
                    fn registration(self) -> #private::Registration {
                        #private::Registration::controller(self)
                    }
                }
            }
        }
        Shape::Queue { mapped, .. } => {
            let missing = missing_method(private, ident, "reconcile", 3);
            let [future, this, ctx, item] = locals(["__cosi_future", "__cosi_self", "__cosi_ctx", "__cosi_item"]);
            let call = quote_spanned! {ident.span()=>
                let #future = #private::reconcile_method::<#ident, _>(#ident::reconcile(#this, #ctx, #item));
            };
            let map = mapped.then(|| {
                let missing = missing_method(private, ident, "map", 3);
                let [future, this, ctx, input] = locals(["__cosi_future", "__cosi_self", "__cosi_ctx", "__cosi_input"]);
                let call = quote_spanned! {ident.span()=>
                    let #future = #private::map_method::<#ident, _>(#ident::map(#this, #ctx, #input));
                };
                let map_fn = quote! {
                    fn __cosi_map<'s, 'c, 'i>(
                        __cosi_self: &'s #ident,
                        __cosi_ctx: &'c #private::Ctx<#ident>,
                        __cosi_input: &'i #private::ReducedMetadata,
                    ) -> impl #private::Future<Output = #private::Result<#private::Vec<#private::Pointer>, #private::BoxError>> + #private::Send + use<'s, 'c, 'i> {
                        #missing
                        #call
                        async move { #private::IntoMapped::into_mapped(__cosi_future.await) }
                    }
                };
                let map_method = quote! {
                    fn map(
                        &self,
                        __cosi_ctx: &#private::Ctx<Self>,
                        __cosi_input: &#private::ReducedMetadata,
                    ) -> impl #private::Future<Output = #private::Result<#private::Vec<#private::Pointer>, #private::BoxError>> + #private::Send {
                        __cosi_map(self, __cosi_ctx, __cosi_input)
                    }
                };
                (map_fn, map_method)
            });
            let (map_fn, map_method) = map.unzip();
            quote! {
                fn __cosi_reconcile<'s, 'c, 'i>(
                    __cosi_self: &'s #ident,
                    __cosi_ctx: &'c #private::Ctx<#ident>,
                    __cosi_item: &'i #private::Pointer,
                ) -> impl #private::Future<Output = #private::Outcome> + #private::Send + use<'s, 'c, 'i> {
                    #missing
                    #call
                    async move { #private::IntoOutcome::into_outcome(__cosi_future.await) }
                }

                #map_fn

                #[automatically_derived]
                impl #private::QueueController for #ident {
                    fn reconcile(&self, __cosi_ctx: &#private::Ctx<Self>, __cosi_item: &#private::Pointer) -> impl #private::Future<Output = #private::Outcome> + #private::Send {
                        __cosi_reconcile(self, __cosi_ctx, __cosi_item)
                    }

                    #map_method
                }

                #[automatically_derived]
                impl #private::Register for #ident {
                    fn registration(self) -> #private::Registration {
                        #private::Registration::queue(self)
                    }
                }
            }
        }
    }
}

/// The generated locals `names`, spanned as `quote!` spans their declarations.
fn locals<const N: usize>(names: [&str; N]) -> [Ident; N] {
    names.map(|name| Ident::new(name, proc_macro2::Span::call_site()))
}

/// A trait, local to the function that calls `ident::method`, that gives
/// `ident` a `method` of `arity` parameters: the call resolves to it only when
/// `ident` has no inherent `method`, and its result then fails
/// `reconcile_method`/`map_method`, whose message says what to write.
fn missing_method(private: &TokenStream, ident: &Ident, method: &str, arity: usize) -> TokenStream {
    let method = format_ident!("{method}");
    let parameters: Vec<Ident> = (0..arity).map(|i| format_ident!("__Cosi{i}")).collect();
    quote! {
        #[allow(non_camel_case_types)]
        trait __cosi_missing_method {
            fn #method<#(#parameters),*>(#(_: #parameters),*) -> #private::MissingMethod<#ident>;
        }

        impl __cosi_missing_method for #ident {
            fn #method<#(#parameters),*>(#(_: #parameters),*) -> #private::MissingMethod<#ident> {
                #private::Default::default()
            }
        }
    }
}

fn output_span(output: &ReturnType, default: proc_macro2::Span) -> proc_macro2::Span {
    match output {
        ReturnType::Default => default,
        ReturnType::Type(_, ty) => ty.span(),
    }
}

/// `InputDecl::of::<T>(InputKind::Weak).in_namespace("...").with_id("...")`.
fn input_decl(private: &TokenStream, input: &InputEntry) -> Option<TokenStream> {
    let InputEntry { kind, ty, namespace, id, .. } = input;
    let kind = format_ident!("{}", kind.as_ref()?.variant());
    let namespace = namespace.as_ref().map(|namespace| quote!(.in_namespace(#namespace)));
    let id = id.as_ref().map(|id| quote!(.with_id(#id)));
    Some(quote!(#private::InputDecl::of::<#ty>(#private::InputKind::#kind) #namespace #id))
}

/// `OutputDecl::of::<T>(OutputKind::Exclusive)`.
fn output_decl(private: &TokenStream, output: &OutputEntry) -> Option<TokenStream> {
    let OutputEntry { kind, ty, .. } = output;
    let kind = format_ident!("{}", kind.as_ref()?.variant());
    Some(quote!(#private::OutputDecl::of::<#ty>(#private::OutputKind::#kind)))
}

/// `Reads` for every type named, `Writes` for outputs, `Finalizes` for the
/// inputs that grant finalizers; one impl per type as written.
///
/// The impls are `#[diagnostic::do_not_recommend]`, so that a broken access
/// rule does not list every other controller's declared types. That tool
/// attribute does not resolve under `#![no_implicit_prelude]`, the one
/// place the expansion needs the prelude.
fn access_impls(private: &TokenStream, ident: &Ident, inputs: &[InputEntry], outputs: &[OutputEntry]) -> TokenStream {
    let reads = inputs.iter().map(|input| &input.ty).chain(outputs.iter().map(|output| &output.ty));
    let writes = outputs.iter().map(|output| &output.ty);
    // An unknown kind (only in the fallback) grants the most, so the body adds no errors.
    let finalizes =
        inputs.iter().filter(|input| input.kind.is_none_or(InputKind::grants_finalizers)).map(|input| &input.ty);
    let writes: Vec<&Type> =
        writes.chain(outputs.iter().filter(|output| output.kind.is_none()).map(|output| &output.ty)).collect();
    let (reads, writes, finalizes) = (unique(reads), unique(writes), unique(finalizes));
    quote! {
        #(#[automatically_derived] #[diagnostic::do_not_recommend] impl #private::Reads<#ident> for #reads {})*
        #(#[automatically_derived] #[diagnostic::do_not_recommend] impl #private::Writes<#ident> for #writes {})*
        #(#[automatically_derived] #[diagnostic::do_not_recommend] impl #private::Finalizes<#ident> for #finalizes {})*
    }
}

/// The types in order, each once (as written).
fn unique<'a>(types: impl IntoIterator<Item = &'a Type>) -> Vec<&'a Type> {
    let mut seen = Vec::new();
    let mut unique = Vec::new();
    for ty in types {
        let key = tokens(ty);
        if !seen.contains(&key) {
            seen.push(key);
            unique.push(ty);
        }
    }
    unique
}

/// The inventory entry. Controllers are built with `Default`; the path of
/// the builder is spanned on the name, so that the error of a struct without
/// `Default` points there.
fn submit(private: &TokenStream, ident: &Ident) -> TokenStream {
    let build = quote_spanned!(ident.span()=> #private::build_default::<#ident>);
    quote! {
        #private::inventory::submit! {
            #private::Collected {
                declaration: &<#ident as #private::Declared>::DECLARATION,
                build: #build,
                module: #private::module_path!(),
            }
        }
    }
}
