//! The attribute parsers under a token-stream generator: every macro's
//! entry point gets arbitrary token trees built from its grammar's own
//! vocabulary (keys, wrappers, literals, punctuation, nested groups) and must
//! answer with tokens (an expansion or `compile_error!`), never a panic.
//! `PROPTEST_CASES` sets how many inputs each property tries (default 256).

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use proptest::prelude::*;
use quote::quote;

const WORDS: &[&str] = &[
    "type",
    "namespace",
    "aliases",
    "display_type",
    "sensitive",
    "print_columns",
    "crate",
    "inventory",
    "inputs",
    "outputs",
    "concurrency",
    "name",
    "id",
    "ids",
    "kind",
    "Weak",
    "Strong",
    "Exclusive",
    "Shared",
    "DestroyReady",
    "Primary",
    "Mapped",
    "MappedDestroyReady",
    "Config",
    "Status",
    "Option",
    "true",
    "false",
    "self",
    "r#type",
    "cosi",
    "async",
    "fn",
    "struct",
    "pub",
    "impl",
    "_",
    "x",
];

const STRINGS: &[&str] = &[
    "",
    "Things.test.cosi.dev",
    "things.test.cosi.dev",
    "Thing",
    "default",
    "network",
    "a b",
    "{.value}",
    "\u{0}",
    "Hostnames.net.example.org",
    "X.",
    ".",
    "..",
    "Ünïcode.test.dev",
    "Things.test.cosi.dev.",
];

fn leaf() -> impl Strategy<Value = TokenTree> {
    prop_oneof![
        prop::sample::select(WORDS).prop_map(|word| match word.strip_prefix("r#") {
            Some(raw) => TokenTree::Ident(Ident::new_raw(raw, Span::call_site())),
            None => TokenTree::Ident(Ident::new(word, Span::call_site())),
        }),
        prop::sample::select(STRINGS).prop_map(|text| TokenTree::Literal(Literal::string(text))),
        any::<u32>().prop_map(|n| TokenTree::Literal(Literal::u32_unsuffixed(n))),
        any::<i64>().prop_map(|n| TokenTree::Literal(Literal::i64_suffixed(n))),
        Just(TokenTree::Literal(Literal::f64_unsuffixed(1.5))),
        Just(TokenTree::Literal(Literal::character('c'))),
        prop::sample::select(&['=', ',', '<', '>', ':', '#', '!', '-', '&', '|', '.', ';', '@', '?'][..])
            .prop_map(|c| TokenTree::Punct(Punct::new(c, Spacing::Alone))),
        Just(TokenTree::Punct(Punct::new(':', Spacing::Joint))),
    ]
}

fn tokens() -> impl Strategy<Value = TokenStream> {
    let tree = leaf().prop_recursive(4, 48, 6, |inner| {
        (
            prop::sample::select(&[Delimiter::Parenthesis, Delimiter::Bracket, Delimiter::Brace, Delimiter::None][..]),
            prop::collection::vec(inner, 0..6),
        )
            .prop_map(|(delimiter, trees)| TokenTree::Group(Group::new(delimiter, trees.into_iter().collect())))
    });
    prop::collection::vec(tree, 0..12).prop_map(|trees| trees.into_iter().collect())
}

/// `key = value` lists, the shape both grammars share, with arbitrary values:
/// reaches deeper into the parsers than free token soup.
fn entries() -> impl Strategy<Value = TokenStream> {
    prop::collection::vec((prop::sample::select(WORDS), tokens()), 0..5).prop_map(|entries| {
        let mut out = TokenStream::new();
        for (n, (key, value)) in entries.into_iter().enumerate() {
            if n > 0 {
                out.extend([TokenTree::Punct(Punct::new(',', Spacing::Alone))]);
            }
            let key = match key.strip_prefix("r#") {
                Some(raw) => Ident::new_raw(raw, Span::call_site()),
                None => Ident::new(key, Span::call_site()),
            };
            out.extend(quote!(#key = #value));
        }
        out
    })
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn resource_attributes_never_panic(args in prop_oneof![tokens(), entries()], body in tokens()) {
        let input = quote! {
            #[resource(#args)]
            pub struct Thing { #body }
        };
        let _ = crate::resource::derive(input);
        let _ = crate::resource::derive(body);
    }

    #[test]
    fn controller_attributes_never_panic(args in prop_oneof![tokens(), entries()], item in tokens()) {
        let function = quote! { async fn thing(ctx: &mut Ctx) -> cosi::Result<()> { Ok(()) } };
        let _ = crate::controller::expand(args.clone(), function);
        let structure = quote! { struct Thing { a: u32 } };
        let _ = crate::controller::expand(args.clone(), structure);
        let _ = crate::controller::expand(args, item);
    }

    #[test]
    fn system_lists_never_panic(input in tokens(), name in prop::sample::select(WORDS)) {
        let _ = crate::system::expand(input.clone());
        let name = Ident::new(if name.starts_with("r#") { "x" } else { name }, Span::call_site());
        let _ = crate::system::expand(quote!(#name = [#input]));
    }
}
