//! The `cosi::Resource` impl of a checked [`Definition`], and the stub emitted
//! beside the errors when the checks fail.
//!
//! Generated code names nothing but `<cosi>::__private::*` (`<cosi>` being
//! `::cosi` or the `crate = ...` path), so it compiles whatever the user has
//! in scope, `#![no_implicit_prelude]` included.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Path};

use super::Definition;
use super::check::default_crate;

/// `impl Resource for #ident`, every value computed at compile time.
pub(crate) fn impl_resource(definition: &Definition<'_>) -> TokenStream {
    let Definition { ident, krate, r#type, namespace, display_type, aliases, all_aliases, print_columns, sensitive } =
        definition;
    let private = quote!(#krate::__private);
    let sensitivity = match sensitive {
        true => quote!(#private::Sensitivity::Sensitive),
        false => quote!(#private::Sensitivity::NonSensitive),
    };
    let column_names = print_columns.iter().map(|column| &column.name);
    let column_paths = print_columns.iter().map(|column| &column.json_path);

    quote! {
        #[automatically_derived]
        impl #private::Resource for #ident {
            const TYPE: &'static str = #r#type;
            const NAMESPACE: &'static str = #namespace;
            const SENSITIVE: bool = #sensitive;

            fn type_names() -> &'static #private::TypeNames {
                fn index() -> u32 {
                    static SLOT: #private::TypeSlot = #private::TypeSlot::new();
                    SLOT.index()
                }
                static NAMES: #private::TypeNames =
                    #private::TypeNames::new(#namespace, #r#type, #private::Option::Some(index));
                &NAMES
            }

            fn definition() -> #private::ResourceDefinition {
                #private::ResourceDefinition {
                    r#type: #private::ToOwned::to_owned(#r#type),
                    display_type: #private::ToOwned::to_owned(#display_type),
                    default_namespace: #private::ToOwned::to_owned(#namespace),
                    aliases: #private::vec![#(#private::ToOwned::to_owned(#aliases)),*],
                    all_aliases: #private::vec![#(#private::ToOwned::to_owned(#all_aliases)),*],
                    print_columns: #private::vec![#(
                        #private::PrintColumn {
                            name: #private::ToOwned::to_owned(#column_names),
                            json_path: #private::ToOwned::to_owned(#column_paths),
                        }
                    ),*],
                    sensitivity: #sensitivity,
                }
            }
        }
    }
}

/// `errors`, plus a stub impl so that uses of the type (`T::TYPE`, `Typed<T>`)
/// add no errors of their own. A union or a generic type gets no stub: it
/// could not implement `Resource` anyway.
pub(crate) fn fallback(input: &DeriveInput, krate: Option<Path>, errors: syn::Error) -> TokenStream {
    let errors = errors.into_compile_error();
    if matches!(input.data, Data::Union(_)) || !input.generics.params.is_empty() {
        return errors;
    }
    let ident = &input.ident;
    let krate = krate.unwrap_or_else(default_crate);
    let private = quote!(#krate::__private);
    quote! {
        #errors

        #[automatically_derived]
        impl #private::Resource for #ident {
            const TYPE: &'static str = "";
            const NAMESPACE: &'static str = "";
            const SENSITIVE: bool = false;

            fn definition() -> #private::ResourceDefinition {
                #private::unreachable!()
            }
        }
    }
}
