//! Span plumbing: generated tokens placed at the user's own tokens, so
//! that rustc reports an unmet requirement where the user wrote it.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::Ident;

/// The first and last token of a piece of the user's code. Generated
/// tokens spanned with `first` before it and `last` after it make rustc
/// underline the whole piece (a span of one token is all stable proc
/// macros can make, but rustc joins a node's first and last tokens).
#[derive(Clone, Copy)]
pub(crate) struct SpanRange {
    pub first: Span,
    pub last: Span,
}

impl SpanRange {
    pub(crate) fn of(tokens: &impl ToTokens) -> Self {
        let mut spans = tokens
            .to_token_stream()
            .into_iter()
            .map(|token| match token {
                TokenTree::Group(group) => group.span(),
                other => other.span(),
            });
        let first = spans.next().unwrap_or_else(Span::call_site);
        let last = spans.last().unwrap_or(first);
        SpanRange { first, last }
    }
}

/// `<self_ty as trait_path>::item`, underlining `range`.
pub(crate) fn qualified(
    range: SpanRange,
    self_ty: &TokenStream,
    trait_path: &TokenStream,
    item: &str,
) -> TokenStream {
    let open = quote_spanned!(range.first=> <);
    let close = quote_spanned!(range.first=> as #trait_path >);
    let item = Ident::new(item, range.last);
    let colons = quote_spanned!(range.last=> ::);
    quote!(#open #self_ty #close #colons #item)
}

/// `(tokens)`, with the parentheses spanned at `tokens`' last token, so
/// rustc's span for `&(tokens)` is the user's expression, not the
/// attribute.
pub(crate) fn parenthesized(tokens: &impl ToTokens) -> TokenStream {
    let tokens = tokens.to_token_stream();
    let range = SpanRange::of(&tokens);
    let mut group = Group::new(Delimiter::Parenthesis, tokens);
    group.set_span(range.last);
    let amp = quote_spanned!(range.first=> &);
    quote!(#amp #group)
}

/// The same tokens, every one spanned at `span`: a type named again at
/// another token of the user's (an `errors = …` value).
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut new = Group::new(group.delimiter(), respan(group.stream(), span));
                new.set_span(span);
                TokenTree::Group(new)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}
