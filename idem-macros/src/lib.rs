//! The `#[idempotent]` attribute of [idem](https://docs.rs/idem).
//!
//! Use it through the `idem` crate, which documents every option; this
//! crate only parses the attribute into a typed model ([`args`]) and
//! expands it ([`expand`]) into calls on `::idem::__private`.

#![warn(missing_docs)]

mod args;
mod duration;
mod expand;

use proc_macro::TokenStream;

/// Makes an async fn idempotent. See the `idem` crate for the options.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::idempotent(args.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
