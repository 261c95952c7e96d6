//! `cosi::system!(MyOs = [hostname, ServiceFiles])`: a set of controllers
//! whose graph is checked at compile time.
//!
//! The macro sees only paths, not declarations, so it checks what paths can
//! show (a controller listed twice) and leaves the rest to a `const`
//! evaluation of `cosi::controller::check_graph` over the controllers'
//! `DECLARATION`s: two exclusive writers of one type, or two controllers with
//! one name, fail the build with the same message the runtime would give.
//!
//! Three forms of entry tell `runtime()` how to get each controller:
//!
//! - `Type`: built with `Default`;
//! - `Type { .. }`: built by the caller, with arguments, and given to
//!   `runtime()`; it registers under its declared name;
//! - `Type as NAME`: given to `runtime()` too, and registered under a name
//!   of its own (`NAME`, a `&'static str` constant expression), as the
//!   instances of one generic controller are
//!   (`Merge<HostnameSpec> as "network.HostnameMergeController"`); its
//!   declaration is checked under that name.
//!
//! `runtime()` takes the given controllers as parameters, in the order
//! listed, and refuses one whose registration is under another name than
//! the one listed: the compile-time check holds for what actually runs.
//!
//! `#[system(crate = path::to::cosi)]`, among the attributes, points the
//! expansion at `cosi` when it is not `::cosi`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Ident, Path, Token, Type, Visibility, braced, bracketed, token};

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

/// `Type`, `Type { .. }` or `Type as NAME`.
struct Listed {
    ty: Type,
    /// `{ .. }`: the caller builds it.
    given: Option<token::Brace>,
    name: Option<Expr>,
}

impl Listed {
    /// Whether `runtime()` takes it as a parameter rather than building it.
    fn is_given(&self) -> bool {
        self.given.is_some() || self.name.is_some()
    }
}

impl Parse for Listed {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let ty = input.parse()?;
        let given = match input.peek(token::Brace) {
            true => {
                let content;
                let brace = braced!(content in input);
                let _: Token![..] = content.parse().map_err(|error| {
                    syn::Error::new(error.span(), "expected `{ .. }`: a controller built by the caller")
                })?;
                Some(brace)
            }
            false => None,
        };
        let name = match input.parse::<Option<Token![as]>>()? {
            Some(_) => Some(input.parse()?),
            None => None,
        };
        Ok(Listed { ty, given, name })
    }
}

impl quote::ToTokens for Listed {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        self.ty.to_tokens(tokens);
        if self.given.is_some() {
            quote!({ .. }).to_tokens(tokens);
        }
        if let Some(name) = &self.name {
            quote!(as #name).to_tokens(tokens);
        }
    }
}

/// The parameter of `runtime()` that takes a given controller: its type's
/// name in snake case (`PowerExecutor` → `power_executor`), with its generic
/// arguments' (`Merge<HostnameSpec>` → `merge_hostname_spec`).
fn parameter(ty: &Type) -> String {
    let words = quote!(#ty).to_string().replace("r#", "");
    let mut name = String::new();
    for ident in words.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|word| !word.is_empty()) {
        let mut previous_lower = false;
        for c in ident.chars() {
            if c.is_uppercase() && previous_lower {
                name.push('_');
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            name.extend(c.to_lowercase());
        }
        name.push('_');
    }
    let name = name.trim_end_matches('_');
    // A keyword (`Self` → `self`, `Type` → `type`) is no parameter.
    match syn::parse_str::<Ident>(name) {
        Ok(_) => name.to_owned(),
        Err(_) => format!("{name}_controller").trim_start_matches('_').to_owned(),
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
    let declarations = controllers.iter().map(|Listed { ty, name, .. }| {
        let declaration = quote!(<#ty as #private::Declared>::DECLARATION);
        match name {
            None => quote!(&#declaration),
            Some(name) => quote!(&#private::Declaration { name: #name, ..#declaration }),
        }
    });
    let entries = controllers.iter().map(|Listed { ty, name, .. }| {
        let declaration = quote!(<#ty as #private::Declared>::DECLARATION);
        let name = match name {
            None => quote!(#declaration.name),
            Some(name) => quote!(#name),
        };
        quote!(#private::Entry { name: #name, declaration: &#declaration })
    });
    // The local is interpolated, so that it keeps the span of its declaration
    // when the paths come from a `macro_rules!` metavariable.
    let runtime = Ident::new("__cosi_runtime", proc_macro2::Span::call_site());
    let mut parameters: Vec<Ident> = Vec::new();
    let mut registrations = Vec::new();
    for listed in &controllers {
        let ty = &listed.ty;
        if !listed.is_given() {
            registrations.push(quote_spanned!(ty.span()=>
                #runtime.register(<#ty as #private::SystemDefault>::build())?;
            ));
            continue;
        }
        let mut name = parameter(ty);
        if name.is_empty() || parameters.iter().any(|parameter| *parameter == name) {
            name = format!("{name}_{}", parameters.len() + 1).trim_start_matches('_').to_owned();
        }
        let parameter = Ident::new(&name, ty.span());
        let listed_name = match &listed.name {
            Some(name) => quote!(#name),
            None => quote!(<#ty as #private::Declared>::DECLARATION.name),
        };
        registrations.push(quote!(#private::register_listed(&#runtime, #parameter, #listed_name)?;));
        parameters.push(parameter);
    }
    let given = controllers.iter().filter(|listed| listed.is_given()).map(|listed| &listed.ty);
    let runtime_doc = match parameters.is_empty() {
        true => "A runtime over `state` with every controller of the system registered, built with `Default`.",
        false => {
            "A runtime over `state` with every controller of the system registered: those listed \
             `Type { .. }` or `Type as NAME` as given here, in the order listed, the others built with \
             `Default`. A given controller registered under another name than the one listed is refused."
        }
    };
    let runtime_fn = quote! {
        #[doc = #runtime_doc]
        pub fn runtime(
            state: impl #private::State,
            #(#parameters: #given),*
        ) -> #private::Result<#private::Runtime, #private::RuntimeError> {
            let #runtime = #private::Runtime::new(state);
            #(#registrations)*
            #private::Result::Ok(#runtime)
        }
    };
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
    fn a_given_controller_is_a_parameter_named_after_its_type() {
        let parameter = |ty: syn::Type| super::parameter(&ty);
        assert_eq!(parameter(syn::parse_quote!(PowerExecutor)), "power_executor");
        assert_eq!(parameter(syn::parse_quote!(Merge<HostnameSpec>)), "merge_hostname_spec");
        assert_eq!(parameter(syn::parse_quote!(crate::dns::Resolver2)), "crate_dns_resolver2");
        assert_eq!(parameter(syn::parse_quote!(r#Type)), "type_controller");
        assert_eq!(parameter(syn::parse_quote!(Self)), "self_controller");
        let output = expand(quote!(MyOs = [first, Renderer { .. }, Merge<Spec> as "merge"])).to_string();
        assert!(output.contains(&quote!(renderer: Renderer, merge_spec: Merge<Spec>).to_string()), "{output}");
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
