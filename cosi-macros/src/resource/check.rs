//! The rules a `#[derive(Resource)]` must satisfy beyond the grammar.
//!
//! Entry point: [`check`], which runs every rule, records each broken one in
//! the `Ctxt`, and, when none is broken, returns the [`Definition`] to expand.
//! The type naming rules and the alias derivation are `crate::naming`, the
//! same code `cosi` runs for definitions built at run time.

use syn::{Data, DeriveInput, LitStr, Path};

use super::Definition;
use super::attr::{Attrs, PrintColumn, kw};
use crate::ctxt::Ctxt;
use crate::naming;

/// Checks `input` and its parsed `attrs`; `None` exactly when an error was recorded.
pub(crate) fn check<'a>(cx: &Ctxt, input: &'a DeriveInput, attrs: Attrs) -> Option<Definition<'a>> {
    check_shape(cx, input);
    let (r#type, namespace) = required_keys(cx, input, &attrs);
    let derived = r#type.as_ref().and_then(|r#type| derive(cx, r#type, &attrs));
    if let Some(namespace) = &namespace {
        check_namespace(cx, namespace);
    }
    check_aliases(cx, &attrs.aliases);
    check_print_columns(cx, &attrs.print_columns);

    if cx.has_errors() {
        return None;
    }
    let derived = derived?;
    Some(Definition {
        ident: &input.ident,
        krate: attrs.krate.unwrap_or_else(default_crate),
        r#type: r#type?,
        namespace: namespace?,
        display_type: derived.display_type,
        aliases: derived.aliases,
        all_aliases: derived.all_aliases,
        print_columns: attrs.print_columns,
        sensitive: attrs.sensitive,
    })
}

/// `::cosi`, the path expansions start from unless `crate = ...` says otherwise.
pub(crate) fn default_crate() -> Path {
    syn::parse_quote!(::cosi)
}

/// Specs are structs or enums without generics: a resource type has one
/// `TYPE`, and `Resource` needs `'static` and `DeserializeOwned`.
fn check_shape(cx: &Ctxt, input: &DeriveInput) {
    if let Data::Union(data) = &input.data {
        cx.error_spanned_by(data.union_token, "`#[derive(Resource)]` does not support unions; use a struct or an enum");
    }
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(&input.generics, "`#[derive(Resource)]` does not support generic types");
    }
}

/// `type` and `namespace` must be given; the error is on the type's name. A
/// key that was written but malformed or misspelled already has its error.
fn required_keys(cx: &Ctxt, input: &DeriveInput, attrs: &Attrs) -> (Option<LitStr>, Option<LitStr>) {
    if !attrs.present {
        cx.error_spanned_by(
            &input.ident,
            r#"missing `#[resource(type = "PluralName.group.example.org", namespace = "...")]`"#,
        );
        return (None, None);
    }
    let required = [(kw::TYPE, r#"type = "PluralName.group.example.org""#), (kw::NAMESPACE, r#"namespace = "...""#)];
    for (key, syntax) in required.into_iter().filter(|(key, _)| !attrs.mentioned.contains(key)) {
        cx.error_spanned_by(&input.ident, format_args!("missing `{key}` key; add `{syntax}` to `#[resource(...)]`"));
    }
    (attrs.r#type.clone(), attrs.namespace.clone())
}

/// The namespace must be one a state accepts: the run-time rule, shared through `naming`.
fn check_namespace(cx: &Ctxt, namespace: &LitStr) {
    if let Err(reason) = naming::validate_name("namespace", &namespace.value()) {
        cx.error_spanned_by(namespace, reason);
    }
}

/// Aliases follow `naming::validate_alias`, each given once.
fn check_aliases(cx: &Ctxt, aliases: &[LitStr]) {
    for (i, alias) in aliases.iter().enumerate() {
        let value = alias.value();
        if let Err(reason) = naming::validate_alias(&value) {
            cx.error_spanned_by(alias, reason);
        } else if aliases[..i].iter().any(|earlier| earlier.value() == value) {
            cx.error_spanned_by(alias, format_args!("duplicate alias `{value}`"));
        }
    }
}

fn check_print_columns(cx: &Ctxt, columns: &[PrintColumn]) {
    for column in columns {
        if column.name.value().is_empty() {
            cx.error_spanned_by(&column.name, "print column name is empty");
        }
        if column.json_path.value().is_empty() {
            cx.error_spanned_by(&column.json_path, "print column json_path is empty");
        }
    }
}

/// The display type and aliases, or the naming rule `type` breaks (on the literal).
fn derive(cx: &Ctxt, r#type: &LitStr, attrs: &Attrs) -> Option<naming::Derived> {
    let value = r#type.value();
    let explicit: Vec<String> = attrs.aliases.iter().map(LitStr::value).collect();
    let explicit: Vec<&str> = explicit.iter().map(String::as_str).collect();
    match naming::derive_with(&value, &explicit, attrs.skip_automatic_aliases) {
        Ok(derived) => Some(derived),
        Err(reason) => {
            cx.error_spanned_by(r#type, format_args!("invalid resource type `{value}`: {reason}"));
            None
        }
    }
}
