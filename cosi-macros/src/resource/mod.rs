//! `#[derive(Resource)]`: parse the `#[resource(...)]` attribute (`attr`),
//! check it (`check`), expand the `cosi::Resource` impl (`expand`).
//!
//! Every stage records user errors in one `Ctxt`; on any error the output is
//! the errors plus a stub impl, so code using the type compiles on and the user
//! sees only the errors that matter.

mod attr;
mod check;
mod expand;

use proc_macro2::TokenStream;
use syn::{DeriveInput, Ident, LitStr, Path};

use crate::ctxt::Ctxt;

/// The whole derive, from the item to the impl (or the errors).
pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.into_compile_error(),
    };
    let cx = Ctxt::default();
    let attrs = attr::Attrs::from_ast(&cx, &input.attrs);
    let krate = attrs.krate.clone();
    let definition = check::check(&cx, &input, attrs);
    match (cx.check(), definition) {
        (Ok(()), Some(definition)) => expand::impl_resource(&definition),
        (Err(errors), _) => expand::fallback(&input, krate, errors),
        (Ok(()), None) => unreachable!("`check` returns a definition unless it recorded an error"),
    }
}

/// A resource that passed every check: what `expand` turns into the impl.
pub(crate) struct Definition<'a> {
    pub(crate) ident: &'a Ident,
    /// The path of the `cosi` crate, `::cosi` unless `crate = ...` says otherwise.
    pub(crate) krate: Path,
    pub(crate) r#type: LitStr,
    pub(crate) namespace: LitStr,
    pub(crate) display_type: String,
    pub(crate) aliases: Vec<String>,
    pub(crate) all_aliases: Vec<String>,
    pub(crate) print_columns: Vec<attr::PrintColumn>,
    pub(crate) sensitive: bool,
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::derive;

    #[test]
    fn minimal() {
        let input = quote! {
            #[resource(type = "Links.net.example.org", namespace = "network")]
            struct LinkSpec {}
        };
        let expected = quote! {
            #[automatically_derived]
            impl ::cosi::__private::Resource for LinkSpec {
                const TYPE: &'static str = "Links.net.example.org";
                const NAMESPACE: &'static str = "network";
                const SENSITIVE: bool = false;

                fn type_names() -> &'static ::cosi::__private::TypeNames {
                    fn index() -> u32 {
                        static SLOT: ::cosi::__private::TypeSlot = ::cosi::__private::TypeSlot::new();
                        SLOT.index()
                    }
                    static NAMES: ::cosi::__private::TypeNames = ::cosi::__private::TypeNames::new(
                        "network",
                        "Links.net.example.org",
                        ::cosi::__private::Option::Some(index)
                    );
                    &NAMES
                }

                fn definition() -> ::cosi::__private::ResourceDefinition {
                    ::cosi::__private::ResourceDefinition {
                        r#type: ::cosi::__private::ToOwned::to_owned("Links.net.example.org"),
                        display_type: ::cosi::__private::ToOwned::to_owned("Link"),
                        default_namespace: ::cosi::__private::ToOwned::to_owned("network"),
                        aliases: ::cosi::__private::vec![::cosi::__private::ToOwned::to_owned("link")],
                        all_aliases: ::cosi::__private::vec![
                            ::cosi::__private::ToOwned::to_owned("links"),
                            ::cosi::__private::ToOwned::to_owned("links.net"),
                            ::cosi::__private::ToOwned::to_owned("links.net.example"),
                            ::cosi::__private::ToOwned::to_owned("link")
                        ],
                        print_columns: ::cosi::__private::vec![],
                        sensitivity: ::cosi::__private::Sensitivity::NonSensitive,
                    }
                }
            }
        };
        assert_eq!(derive(input).to_string(), expected.to_string());
    }

    #[test]
    fn every_key() {
        let input = quote! {
            #[resource(
                type = "Secrets.example.org",
                namespace = "secrets",
                aliases = ["sec"],
                print_columns(name = "Key", json_path = "{.key}"),
                sensitive,
                skip_automatic_aliases,
                crate = my::cosi,
            )]
            enum SecretSpec { A, B }
        };
        let expected = quote! {
            #[automatically_derived]
            impl my::cosi::__private::Resource for SecretSpec {
                const TYPE: &'static str = "Secrets.example.org";
                const NAMESPACE: &'static str = "secrets";
                const SENSITIVE: bool = true;

                fn type_names() -> &'static my::cosi::__private::TypeNames {
                    fn index() -> u32 {
                        static SLOT: my::cosi::__private::TypeSlot = my::cosi::__private::TypeSlot::new();
                        SLOT.index()
                    }
                    static NAMES: my::cosi::__private::TypeNames = my::cosi::__private::TypeNames::new(
                        "secrets",
                        "Secrets.example.org",
                        my::cosi::__private::Option::Some(index)
                    );
                    &NAMES
                }

                fn definition() -> my::cosi::__private::ResourceDefinition {
                    my::cosi::__private::ResourceDefinition {
                        r#type: my::cosi::__private::ToOwned::to_owned("Secrets.example.org"),
                        display_type: my::cosi::__private::ToOwned::to_owned("Secret"),
                        default_namespace: my::cosi::__private::ToOwned::to_owned("secrets"),
                        aliases: my::cosi::__private::vec![my::cosi::__private::ToOwned::to_owned("sec")],
                        all_aliases: my::cosi::__private::vec![my::cosi::__private::ToOwned::to_owned("sec")],
                        print_columns: my::cosi::__private::vec![
                            my::cosi::__private::PrintColumn {
                                name: my::cosi::__private::ToOwned::to_owned("Key"),
                                json_path: my::cosi::__private::ToOwned::to_owned("{.key}"),
                            }
                        ],
                        sensitivity: my::cosi::__private::Sensitivity::Sensitive,
                    }
                }
            }
        };
        assert_eq!(derive(input).to_string(), expected.to_string());
    }

    #[test]
    fn errors_come_with_a_stub_impl() {
        let input = quote! {
            #[resource(namespace = "network")]
            struct LinkSpec {}
        };
        let message = r#"missing `type` key; add `type = "PluralName.group.example.org"` to `#[resource(...)]`"#;
        let expected = quote! {
            ::core::compile_error! { #message }

            #[automatically_derived]
            impl ::cosi::__private::Resource for LinkSpec {
                const TYPE: &'static str = "";
                const NAMESPACE: &'static str = "";
                const SENSITIVE: bool = false;

                fn definition() -> ::cosi::__private::ResourceDefinition {
                    ::cosi::__private::unreachable!()
                }
            }
        };
        assert_eq!(derive(input).to_string(), expected.to_string());
    }

    #[test]
    fn a_stub_impl_takes_the_crate_path_given() {
        let input = quote! {
            #[resource(namespace = "network", crate = my::cosi)]
            struct LinkSpec {}
        };
        let output = derive(input).to_string();
        assert!(output.contains(&quote!(impl my::cosi::__private::Resource for LinkSpec).to_string()), "{output}");
        let elsewhere = output.replace(&quote!(my::cosi::).to_string(), "");
        assert!(!elsewhere.contains(":: cosi ::"), "{output}");
    }

    #[test]
    fn every_error_is_reported() {
        let input = quote! {
            #[resource(type = "links.net", namespace = "", alias = [], sensitive = true, aliases = ["A", "b", "b"])]
            #[resource(type = "Links.net", print_columns(name = "Name"))]
            struct LinkSpec {}
        };
        let output = derive(input).to_string();
        let errors: Vec<&str> = output.split("compile_error !").skip(1).collect();
        let expected = [
            "unknown key `alias` in `#[resource(...)]`, did you mean `aliases`?",
            "`sensitive` takes no value; write `sensitive` alone",
            "duplicate `type` key",
            r#"`print_columns(...)` is missing `json_path = \"{...}\"`"#,
            "invalid resource type `links.net`: name should be in CamelCase",
            "namespace is empty",
            "alias `A` should be lowercase",
            "duplicate alias `b`",
        ];
        assert_eq!(errors.len(), expected.len(), "{output}");
        for (error, expected) in errors.iter().zip(expected) {
            assert!(error.contains(expected), "expected {expected:?} in {error:?}");
        }
    }

    #[test]
    fn unions_and_generics_get_no_stub() {
        for input in [
            quote!(union U { a: u8 }),
            quote!(
                struct G<T>(T);
            ),
        ] {
            let output = derive(input).to_string();
            assert!(output.contains("compile_error"), "{output}");
            assert!(!output.contains("impl"), "{output}");
        }
    }
}
