//! The annotated item: an `async fn`, or a clear error at the token that
//! shows why it is not one.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Item, ItemFn, Signature};

pub(crate) fn async_fn(item: TokenStream) -> syn::Result<ItemFn> {
    let parsed: Item = syn::parse2(item)?;
    let Item::Fn(func) = parsed else {
        return Err(syn::Error::new(
            item_keyword_span(&parsed),
            "`#[idempotent]` goes on an `async fn` that returns a `Result`, not on this item",
        ));
    };
    if func.sig.asyncness.is_none() && rewritten_by_async_trait(&func.sig) {
        return Err(syn::Error::new(
            func.sig.fn_token.span,
            "`#[async_trait]` has already turned this `async fn` into a fn returning `Pin<Box<dyn Future>>`, so `#[idempotent]` cannot wrap its body; either annotate an inherent `async fn` with `#[idempotent]` and call it from the trait method, or drop `#[async_trait]` and write a native `async fn` in the trait (Rust 1.75 and later)",
        ));
    }
    if func.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            func.sig.fn_token.span,
            "`#[idempotent]` needs an `async fn`: a call may have to wait for the store, so the function must be able to await; write `async fn`",
        ));
    }
    Ok(func)
}

/// Whether `#[async_trait]` rewrote this signature: its lifetimes are
/// named `'async_trait` and `'life0`, `'life1`, ….
fn rewritten_by_async_trait(sig: &Signature) -> bool {
    sig.generics.lifetimes().any(|def| {
        let name = def.lifetime.ident.to_string();
        name == "async_trait" || name.starts_with("life")
    })
}

/// The keyword that says what an item is (`struct`, `impl`, …), to point
/// at.
fn item_keyword_span(item: &Item) -> Span {
    match item {
        Item::Struct(item) => item.struct_token.span,
        Item::Enum(item) => item.enum_token.span,
        Item::Impl(item) => item.impl_token.span,
        Item::Trait(item) => item.trait_token.span,
        Item::Mod(item) => item.mod_token.span,
        Item::Const(item) => item.const_token.span,
        Item::Static(item) => item.static_token.span,
        Item::Type(item) => item.type_token.span,
        other => other.span(),
    }
}
