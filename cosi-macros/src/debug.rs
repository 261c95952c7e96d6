//! `COSI_MACROS_DEBUG=1` prints every expansion to stderr.
//!
//! Cargo does not rerun a macro when only the environment changes: touch the
//! file that uses the derive, or run `cargo clean -p <crate>`, to see the output.

use proc_macro2::TokenStream;

/// Returns `tokens`, printing them first when `COSI_MACROS_DEBUG` is set to anything but `0` or nothing.
pub(crate) fn dump(what: &str, tokens: TokenStream) -> TokenStream {
    if std::env::var_os("COSI_MACROS_DEBUG").is_some_and(|value| !value.is_empty() && value != "0") {
        eprintln!("{what} expands to:\n{tokens}\n");
    }
    tokens
}
