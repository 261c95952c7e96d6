//! Error accumulation shared by every macro of the crate.
//!
//! Parsers and checks never return early on a user mistake: they record it
//! here and go on, so one build reports every broken rule at once. The driver
//! calls [`Ctxt::check`] once, at the stage boundary, to turn the errors into
//! a single `syn::Error`.

use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

use quote::ToTokens;

/// The errors found so far in one macro invocation.
///
/// Dropping a `Ctxt` without calling [`Ctxt::check`] panics, so no error can be forgotten.
pub(crate) struct Ctxt {
    // `None` once checked.
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Default for Ctxt {
    fn default() -> Self {
        Ctxt { errors: RefCell::new(Some(Vec::new())) }
    }
}

impl Ctxt {
    /// Records `message`, spanned from the first to the last token of `tokens`.
    pub(crate) fn error_spanned_by(&self, tokens: impl ToTokens, message: impl Display) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    /// Records an error that already carries its span.
    pub(crate) fn syn_error(&self, error: syn::Error) {
        self.errors.borrow_mut().as_mut().expect("`Ctxt` used after `check`").push(error);
    }

    /// Whether an error was recorded so far.
    pub(crate) fn has_errors(&self) -> bool {
        self.errors.borrow().as_ref().is_some_and(|errors| !errors.is_empty())
    }

    /// All recorded errors, combined into one, in the order they were found.
    pub(crate) fn check(self) -> syn::Result<()> {
        let mut errors = self.errors.take().expect("`Ctxt::check` called twice").into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for error in errors {
            combined.combine(error);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("`Ctxt` dropped without `check`");
        }
    }
}
