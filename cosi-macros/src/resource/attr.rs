//! The `#[resource(...)]` grammar.
//!
//! Entry point: [`Attrs::from_ast`], which never fails: an unknown, repeated
//! or malformed key is recorded in the `Ctxt` and skipped up to the next `,`,
//! so the user sees every bad key of the attribute at once.
//! Rules about what the values mean (the type naming rules, valid aliases,
//! required keys) live in `check.rs`.

use proc_macro2::TokenTree;
use syn::parse::ParseStream;
use syn::{Attribute, Expr, ExprArray, Ident, LitStr, MacroDelimiter, Meta, Path, Token, parenthesized, token};

use crate::ctxt::Ctxt;
use crate::parse::{Once, as_string, closest, entries, path, string, unknown_key, value};

/// Every keyword of the grammar.
pub(crate) mod kw {
    pub(crate) const RESOURCE: &str = "resource";

    pub(crate) const TYPE: &str = "type";
    pub(crate) const NAMESPACE: &str = "namespace";
    pub(crate) const ALIASES: &str = "aliases";
    pub(crate) const PRINT_COLUMNS: &str = "print_columns";
    pub(crate) const SENSITIVE: &str = "sensitive";
    pub(crate) const SKIP_AUTOMATIC_ALIASES: &str = "skip_automatic_aliases";
    pub(crate) const CRATE: &str = "crate";
    /// The keys of `#[resource(...)]`.
    pub(crate) const KEYS: &[&str] =
        &[TYPE, NAMESPACE, ALIASES, PRINT_COLUMNS, SENSITIVE, SKIP_AUTOMATIC_ALIASES, CRATE];

    pub(crate) const NAME: &str = "name";
    pub(crate) const JSON_PATH: &str = "json_path";
    /// The keys of `print_columns(...)`.
    pub(crate) const COLUMN_KEYS: &[&str] = &[NAME, JSON_PATH];
}

/// The keys of every `#[resource(...)]` attribute of one item, merged.
pub(crate) struct Attrs {
    /// Whether the item has a `#[resource]` attribute at all.
    pub(crate) present: bool,
    /// The keys written, well-formed or not, and the keys misspelled ones
    /// were taken for: a key in here is not reported missing.
    pub(crate) mentioned: Vec<&'static str>,
    pub(crate) r#type: Option<LitStr>,
    pub(crate) namespace: Option<LitStr>,
    pub(crate) aliases: Vec<LitStr>,
    pub(crate) print_columns: Vec<PrintColumn>,
    pub(crate) sensitive: bool,
    pub(crate) skip_automatic_aliases: bool,
    pub(crate) krate: Option<Path>,
}

/// One `print_columns(name = "...", json_path = "...")`.
pub(crate) struct PrintColumn {
    pub(crate) name: LitStr,
    pub(crate) json_path: LitStr,
}

impl Attrs {
    /// Parses the `#[resource(...)]` attributes among `attrs`; the others are not ours.
    pub(crate) fn from_ast(cx: &Ctxt, attrs: &[Attribute]) -> Attrs {
        let mut builder = Builder::default();
        for attr in attrs.iter().filter(|attr| attr.path().is_ident(kw::RESOURCE)) {
            builder.present = true;
            match &attr.meta {
                Meta::List(list) if matches!(list.delimiter, MacroDelimiter::Paren(_)) => {
                    let parsed = list.parse_args_with(|input: ParseStream<'_>| {
                        entries(cx, input, |key, input| builder.entry(cx, key, input));
                        Ok(())
                    });
                    // The closure consumes every token, so this is only a safety net.
                    if let Err(error) = parsed {
                        cx.syn_error(error);
                    }
                }
                _ => cx.error_spanned_by(attr, r#"expected `#[resource(type = "...", namespace = "...")]`"#),
            }
        }
        builder.build()
    }
}

#[derive(Default)]
struct Builder {
    present: bool,
    mentioned: Vec<&'static str>,
    r#type: Once<LitStr>,
    namespace: Once<LitStr>,
    aliases: Once<Vec<LitStr>>,
    print_columns: Vec<PrintColumn>,
    sensitive: Once<()>,
    skip_automatic_aliases: Once<()>,
    krate: Once<Path>,
}

impl Builder {
    /// Parses the value of `key`, up to but not including the next `,`.
    fn entry(&mut self, cx: &Ctxt, key: &Ident, input: ParseStream<'_>) -> syn::Result<()> {
        let name = key.to_string();
        let known = kw::KEYS.iter().copied().find(|known| *known == name);
        self.mentioned.extend(known.or_else(|| closest(&name, kw::KEYS)));

        if key == kw::TYPE {
            // type = "HostnameStatuses.net.example.org"
            let value = string(input, key, r#"type = "PluralName.group.example.org""#)?;
            self.r#type.set(cx, key, value);
        } else if key == kw::NAMESPACE {
            // namespace = "network"
            let value = string(input, key, r#"namespace = "...""#)?;
            self.namespace.set(cx, key, value);
        } else if key == kw::ALIASES {
            // aliases = ["hostname", "hn"]
            let value = string_list(cx, input, key, r#"aliases = ["...", ...]"#)?;
            self.aliases.set(cx, key, value);
        } else if key == kw::PRINT_COLUMNS {
            // print_columns(name = "Hostname", json_path = "{.hostname}"), repeatable
            if let Some(column) = print_column(cx, input, key)? {
                self.print_columns.push(column);
            }
        } else if key == kw::SENSITIVE {
            // sensitive
            flag(input, key)?;
            self.sensitive.set(cx, key, ());
        } else if key == kw::SKIP_AUTOMATIC_ALIASES {
            // skip_automatic_aliases
            flag(input, key)?;
            self.skip_automatic_aliases.set(cx, key, ());
        } else if key == kw::CRATE {
            // crate = path::to::cosi
            let value = path(input, key, "crate = path::to::cosi")?;
            self.krate.set(cx, key, value);
        } else {
            return Err(unknown_key(key, kw::KEYS, "#[resource(...)]"));
        }
        Ok(())
    }

    fn build(self) -> Attrs {
        Attrs {
            present: self.present,
            mentioned: self.mentioned,
            r#type: self.r#type.value,
            namespace: self.namespace.value,
            aliases: self.aliases.value.unwrap_or_default(),
            print_columns: self.print_columns,
            sensitive: self.sensitive.value.is_some(),
            skip_automatic_aliases: self.skip_automatic_aliases.value.is_some(),
            krate: self.krate.value,
        }
    }
}

/// `= ["...", ...]`; a non-string element is an error on that element only.
fn string_list(cx: &Ctxt, input: ParseStream<'_>, key: &Ident, syntax: &str) -> syn::Result<Vec<LitStr>> {
    let expr = value(input, key, syntax)?;
    let Expr::Array(ExprArray { elems, .. }) = &expr else {
        return Err(syn::Error::new_spanned(&expr, format_args!("expected a list of string literals: `{syntax}`")));
    };
    let mut list = Vec::new();
    for elem in elems {
        match as_string(elem) {
            Some(string) => list.push(string),
            None => cx.error_spanned_by(elem, "expected a string literal"),
        }
    }
    Ok(list)
}

/// A bare key: any `= value` or `(...)` after it is an error on that value.
fn flag(input: ParseStream<'_>, key: &Ident) -> syn::Result<()> {
    let message = format!("`{key}` takes no value; write `{key}` alone");
    if input.peek(Token![=]) {
        let _: Token![=] = input.parse()?;
        let value: Expr = input.parse()?;
        return Err(syn::Error::new_spanned(value, message));
    }
    if input.peek(token::Paren) {
        let group: TokenTree = input.parse()?;
        return Err(syn::Error::new_spanned(group, message));
    }
    Ok(())
}

/// `(name = "...", json_path = "...")`; `None` when the column is incomplete (the error is recorded).
fn print_column(cx: &Ctxt, input: ParseStream<'_>, key: &Ident) -> syn::Result<Option<PrintColumn>> {
    const SYNTAX: &str = r#"print_columns(name = "...", json_path = "{...}")"#;
    if !input.peek(token::Paren) {
        return Err(syn::Error::new(key.span(), format_args!("expected `{SYNTAX}`")));
    }
    let content;
    parenthesized!(content in input);

    let mut name = Once::default();
    let mut json_path = Once::default();
    entries(cx, &content, |column_key, input| {
        if column_key == kw::NAME {
            // name = "Hostname"
            let value = string(input, column_key, r#"name = "...""#)?;
            name.set(cx, column_key, value);
        } else if column_key == kw::JSON_PATH {
            // json_path = "{.hostname}"
            let value = string(input, column_key, r#"json_path = "{...}""#)?;
            json_path.set(cx, column_key, value);
        } else {
            return Err(unknown_key(column_key, kw::COLUMN_KEYS, "print_columns(...)"));
        }
        Ok(())
    });

    for (missing, syntax) in
        [(name.value.is_none(), r#"name = "...""#), (json_path.value.is_none(), r#"json_path = "{...}""#)]
    {
        if missing {
            cx.error_spanned_by(key, format_args!("`print_columns(...)` is missing `{syntax}`"));
        }
    }
    Ok(name.value.zip(json_path.value).map(|(name, json_path)| PrintColumn { name, json_path }))
}
