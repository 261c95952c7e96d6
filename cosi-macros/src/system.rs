//! `cosi::system!(MyOs = [hostname, ServiceFiles])`: a set of controllers
//! whose graph is checked at compile time.
//!
//! The macro sees only paths, not declarations, so it checks what paths can
//! show (a controller listed twice) and leaves the rest to a `const`
//! evaluation of `cosi::controller::check_graph` over the controllers'
//! `DECLARATION`s: two exclusive writers of one type, or two controllers with
//! one name, fail the build with the same message the runtime would give.
//!
//! An entry `Type as NAME` lists a controller registered under a name of
//! its own (`NAME`, a `&'static str` constant expression), as the instances
//! of one generic controller are (`Merge<HostnameSpec> as "network.HostnameMergeController"`):
//! its declaration is checked under that name, and since such a controller
//! is built with arguments, not `Default`, a system with one has no
//! `runtime()`.
//!
//! `#[system(crate = path::to::cosi)]`, among the attributes, points the
//! expansion at `cosi` when it is not `::cosi`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Ident, Path, Token, Type, Visibility, bracketed, token};

use crate::ctxt::Ctxt;
use crate::parse::{Once, entries, path, unknown_key};

/// The keywords of `#[system(...)]`.
mod kw {
    pub(crate) const SYSTEM: &str = "system";
    pub(crate) const CRATE: &str = "crate";
    pub(crate) const KEYS: &[&str] = &[CRATE];
}

/// The whole macro, from the invocation to the items (or the errors).
pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let mut system: System = match syn::parse2(input) {
        Ok(system) => system,
        Err(error) => return error.into_compile_error(),
    };
    let cx = Ctxt::default();
    options(&cx, &mut system);
    check(&cx, &system);
    match cx.check() {
        Ok(()) => expand_system(&system, false),
        // The items, without the graph assertion: uses of the system compile on.
        Err(errors) => {
            let errors = errors.into_compile_error();
            let system = expand_system(&system, true);
            quote!(#errors #system)
        }
    }
}

/// `#[attrs] vis Name = [path, ...]`.
struct System {
    /// The path of the `cosi` crate, `::cosi` unless `#[system(crate = ...)]` says otherwise.
    krate: Path,
    attrs: Vec<Attribute>,
    vis: Visibility,
    ident: Ident,
    bracket: token::Bracket,
    controllers: Punctuated<Listed, Token![,]>,
}

/// `Type`, or `Type as NAME`.
struct Listed {
    ty: Type,
    name: Option<Expr>,
}

impl Parse for Listed {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let ty = input.parse()?;
        let name = match input.parse::<Option<Token![as]>>()? {
            Some(_) => Some(input.parse()?),
            None => None,
        };
        Ok(Listed { ty, name })
    }
}

impl quote::ToTokens for Listed {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        self.ty.to_tokens(tokens);
        if let Some(name) = &self.name {
            quote!(as #name).to_tokens(tokens);
        }
    }
}

impl Parse for System {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let ident = input.parse()?;
        let _: Token![=] = input.parse()?;
        let content;
        let bracket = bracketed!(content in input);
        let controllers = content.parse_terminated(Listed::parse, Token![,])?;
        let _: Option<Token![;]> = input.parse()?;
        Ok(System { krate: syn::parse_quote!(::cosi), attrs, vis, ident, bracket, controllers })
    }
}

/// Takes the `#[system(...)]` attributes, which the struct does not get, out of `attrs`.
fn options(cx: &Ctxt, system: &mut System) {
    let mut krate = Once::default();
    system.attrs.retain(|attr| {
        if !attr.path().is_ident(kw::SYSTEM) {
            return true;
        }
        let parsed = attr.parse_args_with(|input: ParseStream<'_>| {
            entries(cx, input, |key, input| {
                if key == kw::CRATE {
                    // crate = path::to::cosi
                    let value = path(input, key, "crate = path::to::cosi")?;
                    krate.set(cx, key, value);
                    Ok(())
                } else {
                    Err(unknown_key(key, kw::KEYS, "#[system(...)]"))
                }
            });
            Ok(())
        });
        if let Err(error) = parsed {
            cx.syn_error(error);
        }
        false
    });
    if let Some(krate) = krate.value {
        system.krate = krate;
    }
}

/// Each controller once: the graph check would report a duplicate name, but
/// without pointing at the list.
fn check(cx: &Ctxt, system: &System) {
    let listed: Vec<String> = system.controllers.iter().map(|path| quote!(#path).to_string()).collect();
    for (i, path) in system.controllers.iter().enumerate() {
        if listed[..i].contains(&listed[i]) {
            cx.error_spanned_by(
                path,
                format_args!(
                    "`{}` is listed twice in `system!`; list each controller once",
                    listed[i].replace(' ', "")
                ),
            );
        }
    }
}

fn expand_system(system: &System, stub: bool) -> TokenStream {
    let System { krate, attrs, vis, ident, bracket, controllers } = system;
    let private = quote!(#krate::__private);
    let controllers: Vec<&Listed> = controllers.iter().collect();
    let declarations = controllers.iter().map(|Listed { ty, name }| {
        let declaration = quote!(<#ty as #private::Declared>::DECLARATION);
        match name {
            None => quote!(&#declaration),
            Some(name) => quote!(&#private::Declaration { name: #name, ..#declaration }),
        }
    });
    let entries = controllers.iter().map(|Listed { ty, name }| {
        let declaration = quote!(<#ty as #private::Declared>::DECLARATION);
        let name = match name {
            None => quote!(#declaration.name),
            Some(name) => quote!(#name),
        };
        quote!(#private::Entry { name: #name, outputs: #declaration.outputs })
    });
    // The local is interpolated, so that it keeps the span of its declaration
    // when the paths come from a `macro_rules!` metavariable.
    let runtime = Ident::new("__cosi_runtime", proc_macro2::Span::call_site());
    let registrations = controllers.iter().map(
        |Listed { ty, .. }| quote_spanned!(ty.span()=> #runtime.register(<#ty as #private::Default>::default())?;),
    );
    // Controllers under names of their own are built with arguments.
    let runtime_fn = controllers.iter().all(|listed| listed.name.is_none()).then(|| {
        quote! {
            /// A runtime over `state` with every controller of the system registered, built with `Default`.
            pub fn runtime(state: impl #private::State) -> #private::Result<#private::Runtime, #private::RuntimeError> {
                let #runtime = #private::Runtime::new(state);
                #(#registrations)*
                #private::Result::Ok(#runtime)
            }
        }
    });
    let doc = format!("The system of {} controllers declared with `cosi::system!`.", controllers.len());
    let doc = (!attrs.iter().any(|attr| attr.path().is_ident("doc"))).then(|| quote!(#[doc = #doc]));
    let assertion = (!stub).then(|| {
        // Spanned on the list, so the const-evaluation error points at it.
        let span = bracket.span.join();
        let declarations = declarations.clone();
        quote_spanned! {span=>
            const _: () = #private::assert_system(&[#(#entries),*], &[#(#declarations),*]);
        }
    });
    quote! {
        #(#attrs)*
        #doc
        #[derive(#private::Clone, #private::Copy, #private::Debug, #private::Default)]
        #vis struct #ident;

        #[automatically_derived]
        impl #ident {
            /// The declarations of the controllers, in the order listed, each
            /// under the name it is listed with.
            pub const DECLARATIONS: &'static [&'static #private::Declaration] = &[#(#declarations),*];

            #runtime_fn
        }

        #assertion
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::expand;

    #[test]
    fn the_crate_path_is_the_one_given() {
        let output = expand(quote! {
            /// Docs.
            #[system(crate = my::cosi)]
            pub MyOs = [first, second::Second]
        })
        .to_string();
        assert!(!output.contains("compile_error"), "{output}");
        assert!(
            output.contains(&quote!(<first as my::cosi::__private::Declared>::DECLARATION).to_string()),
            "{output}"
        );
        assert!(output.contains(&quote!(my::cosi::__private::Runtime::new(state)).to_string()), "{output}");
        // Every path to `cosi` starts from `my`, and the option is not an attribute of the struct.
        let elsewhere = output.replace(&quote!(my::cosi::).to_string(), "");
        assert!(!elsewhere.contains(":: cosi ::"), "{output}");
        assert!(!output.contains("[system"), "{output}");
        assert!(output.contains("Docs."), "{output}");
    }

    #[test]
    fn the_crate_path_is_cosi_by_default() {
        let output = expand(quote!(MyOs = [first])).to_string();
        assert!(output.contains(&quote!(<first as ::cosi::__private::Declared>::DECLARATION).to_string()), "{output}");
    }

    #[test]
    fn an_unknown_option_is_an_error() {
        let output = expand(quote! {
            #[system(krate = my::cosi)]
            MyOs = [first]
        })
        .to_string();
        assert!(output.contains("unknown key `krate` in `#[system(...)]`, did you mean `crate`?"), "{output}");
        // The struct is still declared, so that its uses compile on.
        assert!(
            output.contains(
                &quote!(
                    struct MyOs;
                )
                .to_string()
            ),
            "{output}"
        );
    }
}
