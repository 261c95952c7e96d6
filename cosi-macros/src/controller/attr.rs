//! The `#[controller(...)]` grammar.
//!
//! Entry point: [`Args::parse`], which never fails: an unknown, repeated or
//! malformed key or entry is recorded in the `Ctxt` and skipped up to the next
//! `,`, so the user sees every mistake of the attribute at once. An entry with
//! an unknown kind keeps its type, so the fallback expansion can still let the
//! body read it. Rules across keys and entries live in `check.rs`.

use proc_macro2::{TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Expr, GenericArgument, Ident, Lit, LitBool, LitInt, LitStr, Path, PathArguments, Token, Type, token};

use crate::ctxt::Ctxt;
use crate::parse::{Once, closest, entries, path, quoted, skip_entry, string, unknown_key, value};

/// Every keyword of the grammar.
pub(crate) mod kw {
    pub(crate) const INPUTS: &str = "inputs";
    pub(crate) const OUTPUTS: &str = "outputs";
    pub(crate) const NAME: &str = "name";
    pub(crate) const CONCURRENCY: &str = "concurrency";
    pub(crate) const INVENTORY: &str = "inventory";
    pub(crate) const CRATE: &str = "crate";
    /// The keys of `#[controller(...)]`.
    pub(crate) const KEYS: &[&str] = &[INPUTS, OUTPUTS, NAME, CONCURRENCY, INVENTORY, CRATE];

    pub(crate) const NAMESPACE: &str = "namespace";
    pub(crate) const ID: &str = "id";
    /// The keys that narrow an input: `Weak<T>(namespace = "...", id = "...")`.
    pub(crate) const NARROW_KEYS: &[&str] = &[NAMESPACE, ID];
}

/// The keys of one `#[controller(...)]`.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) inputs: Vec<InputEntry>,
    pub(crate) outputs: Vec<OutputEntry>,
    pub(crate) name: Option<LitStr>,
    /// The `concurrency` key (for spans) and its value.
    pub(crate) concurrency: Option<(Ident, LitInt)>,
    pub(crate) inventory: Option<LitBool>,
    pub(crate) krate: Option<Path>,
}

/// `Kind<Type>` or `Kind<Type>(namespace = "...", id = "...")` in `inputs = [...]`.
pub(crate) struct InputEntry {
    /// `None` when `kind_ident` is not an input kind (the error is recorded).
    pub(crate) kind: Option<InputKind>,
    pub(crate) kind_ident: Ident,
    pub(crate) ty: Type,
    pub(crate) namespace: Option<LitStr>,
    pub(crate) id: Option<LitStr>,
}

/// `Kind<Type>` in `outputs = [...]`.
pub(crate) struct OutputEntry {
    /// `None` when `kind_ident` is not an output kind (the error is recorded).
    pub(crate) kind: Option<OutputKind>,
    pub(crate) ty: Type,
}

// The kinds, and what each allows, are `cosi-rules`'s, which `cosi` re-exports.
pub(crate) use cosi_rules::{InputKind, OutputKind};

impl Args {
    /// Parses the tokens between the parentheses of `#[controller(...)]`.
    pub(crate) fn parse(cx: &Ctxt, tokens: TokenStream) -> Args {
        let mut builder = Builder::default();
        let parsed = (|input: ParseStream<'_>| {
            entries(cx, input, |key, input| builder.entry(cx, key, input));
            Ok(())
        })
        .parse2(tokens);
        // The closure consumes every token, so this is only a safety net.
        if let Err(error) = parsed {
            cx.syn_error(error);
        }
        builder.build()
    }
}

#[derive(Default)]
struct Builder {
    inputs: Once<Vec<InputEntry>>,
    outputs: Once<Vec<OutputEntry>>,
    name: Once<LitStr>,
    concurrency: Once<(Ident, LitInt)>,
    inventory: Once<LitBool>,
    krate: Once<Path>,
}

impl Builder {
    /// Parses the value of `key`, up to but not including the next `,`.
    fn entry(&mut self, cx: &Ctxt, key: &Ident, input: ParseStream<'_>) -> syn::Result<()> {
        if key == kw::INPUTS {
            // inputs = [Weak<A>, Strong<B>(namespace = "other", id = "one")]
            let value = list(cx, input, key, "inputs = [Weak<Type>, ...]", input_entry)?;
            self.inputs.set(cx, key, value);
        } else if key == kw::OUTPUTS {
            // outputs = [Exclusive<E>, Shared<F>]
            let value = list(cx, input, key, "outputs = [Exclusive<Type>, ...]", output_entry)?;
            self.outputs.set(cx, key, value);
        } else if key == kw::NAME {
            // name = "custom-name"
            let value = string(input, key, r#"name = "...""#)?;
            self.name.set(cx, key, value);
        } else if key == kw::CONCURRENCY {
            // concurrency = 4
            let value = match value(input, key, "concurrency = 4")? {
                Expr::Lit(syn::ExprLit { lit: Lit::Int(int), .. }) => int,
                expr => return Err(syn::Error::new_spanned(expr, "expected an integer: `concurrency = 4`")),
            };
            self.concurrency.set(cx, key, (key.clone(), value));
        } else if key == kw::INVENTORY {
            // inventory = false
            let value = match value(input, key, "inventory = false")? {
                Expr::Lit(syn::ExprLit { lit: Lit::Bool(bool), .. }) => bool,
                expr => return Err(syn::Error::new_spanned(expr, "expected `true` or `false`: `inventory = false`")),
            };
            self.inventory.set(cx, key, value);
        } else if key == kw::CRATE {
            // crate = path::to::cosi
            let value = path(input, key, "crate = path::to::cosi")?;
            self.krate.set(cx, key, value);
        } else {
            return Err(unknown_key(key, kw::KEYS, "#[controller(...)]"));
        }
        Ok(())
    }

    fn build(self) -> Args {
        Args {
            inputs: self.inputs.value.unwrap_or_default(),
            outputs: self.outputs.value.unwrap_or_default(),
            name: self.name.value,
            concurrency: self.concurrency.value,
            inventory: self.inventory.value,
            krate: self.krate.value,
        }
    }
}

/// One entry of `inputs = [...]`; `None` when it is malformed (the error is recorded).
fn input_entry(cx: &Ctxt, input: ParseStream<'_>) -> syn::Result<Option<InputEntry>> {
    let (kind_ident, ty) = kind_and_type(input, "Weak<HostnameSpec>")?;
    let name = kind_ident.to_string();
    let kind = InputKind::from_variant(&name);
    if kind.is_none() {
        let message = match OutputKind::from_variant(&name) {
            Some(_) => format!("`{name}` is an output kind; move `{name}<...>` to `outputs = [...]`"),
            None => unknown_kind(&name, "input", &InputKind::ALL.map(InputKind::variant)),
        };
        cx.error_spanned_by(&kind_ident, message);
    }
    let (mut namespace, mut id) = (Once::default(), Once::default());
    if input.peek(token::Paren) {
        // Weak<T>(namespace = "other", id = "one")
        let content;
        syn::parenthesized!(content in input);
        entries(cx, &content, |key, input| {
            if key == kw::NAMESPACE {
                let value = string(input, key, r#"namespace = "...""#)?;
                namespace.set(cx, key, value);
            } else if key == kw::ID {
                let value = string(input, key, r#"id = "...""#)?;
                id.set(cx, key, value);
            } else {
                return Err(unknown_key(key, kw::NARROW_KEYS, format_args!("{name}<...>(...)")));
            }
            Ok(())
        });
    }
    Ok(Some(InputEntry { kind, kind_ident, ty, namespace: namespace.value, id: id.value }))
}

/// One entry of `outputs = [...]`; `None` when it is malformed (the error is recorded).
fn output_entry(cx: &Ctxt, input: ParseStream<'_>) -> syn::Result<Option<OutputEntry>> {
    let (kind_ident, ty) = kind_and_type(input, "Exclusive<HostnameStatus>")?;
    let name = kind_ident.to_string();
    let kind = OutputKind::from_variant(&name);
    if kind.is_none() {
        let message = match InputKind::from_variant(&name) {
            Some(_) => format!("`{name}` is an input kind; move `{name}<...>` to `inputs = [...]`"),
            None => unknown_kind(&name, "output", &OutputKind::ALL.map(OutputKind::variant)),
        };
        cx.error_spanned_by(&kind_ident, message);
    }
    if input.peek(token::Paren) {
        let group: TokenTree = input.parse()?;
        return Err(syn::Error::new_spanned(
            group,
            "outputs cannot be narrowed: an output covers its type in every namespace",
        ));
    }
    Ok(Some(OutputEntry { kind, ty }))
}

/// `Kind<Type>`, parsed as a type so that `Kind<Vec<(A, B)>>` comes whole.
fn kind_and_type(input: ParseStream<'_>, example: &str) -> syn::Result<(Ident, Type)> {
    let message = format!("expected `Kind<Type>`, such as `{example}`");
    let start = input.span();
    let ty: Type = input.parse().map_err(|_| syn::Error::new(start, &message))?;
    let malformed = || syn::Error::new_spanned(&ty, &message);
    let Type::Path(path) = &ty else { return Err(malformed()) };
    let (Some(segment), 1, None) = (path.path.segments.first(), path.path.segments.len(), &path.qself) else {
        return Err(malformed());
    };
    let PathArguments::AngleBracketed(arguments) = &segment.arguments else {
        return Err(malformed());
    };
    match (arguments.args.len(), arguments.args.first()) {
        (1, Some(GenericArgument::Type(inner))) => Ok((segment.ident.clone(), inner.clone())),
        _ => Err(malformed()),
    }
}

/// `= [entry, ...]`; each bad entry is recorded and skipped.
fn list<T>(
    cx: &Ctxt,
    input: ParseStream<'_>,
    key: &Ident,
    syntax: &str,
    entry: fn(&Ctxt, ParseStream<'_>) -> syn::Result<Option<T>>,
) -> syn::Result<Vec<T>> {
    if !input.peek(Token![=]) {
        return Err(syn::Error::new(key.span(), format_args!("expected `{syntax}`")));
    }
    let _: Token![=] = input.parse()?;
    if !input.peek(token::Bracket) {
        let value: TokenTree = input.parse()?;
        return Err(syn::Error::new_spanned(value, format_args!("expected a list: `{syntax}`")));
    }
    let content;
    syn::bracketed!(content in input);
    let mut values = Vec::new();
    while !content.is_empty() {
        match entry(cx, &content) {
            Ok(value) => values.extend(value),
            Err(error) => {
                cx.syn_error(error);
                skip_entry(&content);
            }
        }
        match content.is_empty() || content.peek(Token![,]) {
            true => (),
            false => {
                cx.syn_error(content.error("expected `,`"));
                skip_entry(&content);
            }
        }
        if content.peek(Token![,]) {
            let _: Token![,] = content.parse()?;
        }
    }
    Ok(values)
}

/// ``unknown input kind `Weeak`, did you mean `Weak`?``
fn unknown_kind(name: &str, what: &str, known: &[&str]) -> String {
    match closest(name, known) {
        Some(candidate) => format!("unknown {what} kind `{name}`, did you mean `{candidate}`?"),
        None => format!("unknown {what} kind `{name}`, expected one of {}", quoted(known)),
    }
}
