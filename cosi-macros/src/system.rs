//! `cosi::system!(MyOs = [hostname, ServiceFiles])`: a set of controllers
//! whose graph is checked at compile time.
//!
//! The macro sees only paths, not declarations, so it checks what paths can
//! show (a controller listed twice) and leaves the rest to a `const`
//! evaluation of `cosi::controller::check_graph` over the controllers'
//! `DECLARATION`s: two exclusive writers of one type, or two controllers with
//! one name, fail the build with the same message the runtime would give.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Ident, Path, Token, Visibility, bracketed, token};

use crate::ctxt::Ctxt;

/// The whole macro, from the invocation to the items (or the errors).
pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let system: System = match syn::parse2(input) {
        Ok(system) => system,
        Err(error) => return error.into_compile_error(),
    };
    let cx = Ctxt::default();
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
    attrs: Vec<Attribute>,
    vis: Visibility,
    ident: Ident,
    bracket: token::Bracket,
    controllers: Punctuated<Path, Token![,]>,
}

impl Parse for System {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let ident = input.parse()?;
        let _: Token![=] = input.parse()?;
        let content;
        let bracket = bracketed!(content in input);
        let controllers = content.parse_terminated(Path::parse, Token![,])?;
        let _: Option<Token![;]> = input.parse()?;
        Ok(System { attrs, vis, ident, bracket, controllers })
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
    let System { attrs, vis, ident, bracket, controllers } = system;
    let private = quote!(::cosi::__private);
    let controllers: Vec<&Path> = controllers.iter().collect();
    let declarations = controllers.iter().map(|path| quote!(&<#path as #private::Declared>::DECLARATION));
    let entries = controllers.iter().map(|path| {
        quote! {
            #private::Entry {
                name: <#path as #private::Declared>::DECLARATION.name,
                outputs: <#path as #private::Declared>::DECLARATION.outputs,
            }
        }
    });
    let registrations = controllers
        .iter()
        .map(|path| quote_spanned!(path.span()=> __cosi_runtime.register(<#path as #private::Default>::default())?;));
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
            /// The declarations of the controllers, in the order listed.
            pub const DECLARATIONS: &'static [&'static #private::Declaration] = &[#(#declarations),*];

            /// A runtime over `state` with every controller of the system registered, built with `Default`.
            pub fn runtime(state: impl #private::State) -> #private::Result<#private::Runtime, #private::RuntimeError> {
                let __cosi_runtime = #private::Runtime::new(state);
                #(#registrations)*
                #private::Result::Ok(__cosi_runtime)
            }
        }

        #assertion
    }
}
