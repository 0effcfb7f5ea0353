//! Errors collected while parsing and checking, so the user sees all of
//! them at once, each at its token.

/// Collects errors, to report all of them together. Like serde_derive's
/// `Ctxt`, it must be consumed with [`finish`](Diagnostics::finish): an
/// error dropped unreported would expand a fn the user got wrong.
#[derive(Default)]
pub(crate) struct Diagnostics {
    first: Option<syn::Error>,
}

impl Diagnostics {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.first {
            Some(first) => first.combine(error),
            None => self.first = Some(error),
        }
    }

    pub(crate) fn finish(mut self) -> syn::Result<()> {
        self.first.take().map_or(Ok(()), Err)
    }
}

impl Drop for Diagnostics {
    fn drop(&mut self) {
        if self.first.is_some() && !std::thread::panicking() {
            panic!("idem-macros: collected errors were dropped without `finish`");
        }
    }
}
