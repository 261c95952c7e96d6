//! What every attribute grammar of the crate parses the same way: `key = value`
//! lists whose bad entries are recorded in the `Ctxt` and skipped, keys given
//! at most once, and "did you mean" suggestions for misspelled names.

use std::fmt::Display;

use proc_macro2::TokenTree;
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::{Expr, Ident, Lit, LitStr, Path, Token};

use crate::ctxt::Ctxt;

/// A key that may be given once.
pub(crate) struct Once<T> {
    pub(crate) value: Option<T>,
}

impl<T> Default for Once<T> {
    fn default() -> Self {
        Once { value: None }
    }
}

impl<T> Once<T> {
    /// Keeps the first value; a second one is an error on its key.
    pub(crate) fn set(&mut self, cx: &Ctxt, key: &Ident, value: T) {
        match self.value {
            Some(_) => cx.error_spanned_by(key, format_args!("duplicate `{key}` key")),
            None => self.value = Some(value),
        }
    }
}

/// Parses `key ..., key ...` with `entry` parsing each key's value; the error
/// of a bad entry is recorded and the rest of that entry skipped.
pub(crate) fn entries(
    cx: &Ctxt,
    input: ParseStream<'_>,
    mut entry: impl FnMut(&Ident, ParseStream<'_>) -> syn::Result<()>,
) {
    while !input.is_empty() {
        // `Ident::parse_any` accepts the keywords `type` and `crate`; `unraw` maps `r#type` to `type`.
        let parsed = match input.call(Ident::parse_any) {
            Ok(key) => entry(&key.unraw(), input),
            Err(_) => Err(input.error("expected a key")),
        };
        match parsed {
            Ok(()) if input.is_empty() || input.peek(Token![,]) => (),
            Ok(()) => {
                cx.syn_error(input.error("expected `,`"));
                // Most likely the `,` alone is missing: go on with the next key, if that is one.
                if !input.peek(Ident::peek_any) {
                    skip_entry(input);
                }
            }
            Err(error) => {
                cx.syn_error(error);
                skip_entry(input);
            }
        }
        if input.peek(Token![,]) {
            let _: Token![,] = input.parse().expect("peeked `,`");
        }
    }
}

/// Skips to the next `,` of this list (the ones inside brackets or parentheses are single token trees).
pub(crate) fn skip_entry(input: ParseStream<'_>) {
    while !input.is_empty() && !input.peek(Token![,]) {
        let _: TokenTree = input.parse().expect("input is not empty");
    }
}

/// `= <expr>`; without the `=` the error is on `key` and shows `syntax`.
pub(crate) fn value(input: ParseStream<'_>, key: &Ident, syntax: &str) -> syn::Result<Expr> {
    if !input.peek(Token![=]) {
        return Err(syn::Error::new(key.span(), format_args!("expected `{syntax}`")));
    }
    let _: Token![=] = input.parse()?;
    input.parse()
}

/// `= path::to::item`.
pub(crate) fn path(input: ParseStream<'_>, key: &Ident, syntax: &str) -> syn::Result<Path> {
    match value(input, key, syntax)? {
        Expr::Path(expr) if expr.attrs.is_empty() && expr.qself.is_none() => Ok(expr.path),
        expr => Err(syn::Error::new_spanned(expr, format_args!("expected a path: `{syntax}`"))),
    }
}

/// `= "..."`.
pub(crate) fn string(input: ParseStream<'_>, key: &Ident, syntax: &str) -> syn::Result<LitStr> {
    let expr = value(input, key, syntax)?;
    as_string(&expr)
        .ok_or_else(|| syn::Error::new_spanned(&expr, format_args!("expected a string literal: `{syntax}`")))
}

pub(crate) fn as_string(expr: &Expr) -> Option<LitStr> {
    match expr {
        Expr::Lit(expr) if expr.attrs.is_empty() => match &expr.lit {
            Lit::Str(string) => Some(string.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// ``unknown key `alias` in `#[resource(...)]`, did you mean `aliases`?``
pub(crate) fn unknown_key(key: &Ident, known: &[&str], within: impl Display) -> syn::Error {
    let name = key.to_string();
    let message = match closest(&name, known) {
        Some(candidate) => format!("unknown key `{name}` in `{within}`, did you mean `{candidate}`?"),
        None => format!("unknown key `{name}` in `{within}`, expected one of {}", quoted(known)),
    };
    syn::Error::new(key.span(), message)
}

/// `` `a`, `b`, `c` ``.
pub(crate) fn quoted(known: &[&str]) -> String {
    known.iter().map(|candidate| format!("`{candidate}`")).collect::<Vec<_>>().join(", ")
}

/// The known name `name` is most likely a misspelling of, if any.
pub(crate) fn closest<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| (strsim::jaro_winkler(name, candidate), *candidate))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|(a, _), (b, _)| a.total_cmp(b))
        .map(|(_, candidate)| candidate)
}
