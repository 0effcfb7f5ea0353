//! Errors collected while parsing and checking, so the user sees all of
//! them at once, each at its token.

/// Collects errors, to report all of them together.
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

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.first.map_or(Ok(()), Err)
    }
}
