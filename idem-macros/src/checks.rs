//! The checks written into the expansion: what the signature says
//! syntactically (the `Ok` and error types of a spelled-out `Result`, a
//! borrowed `Ok` type), and spanned calls on `__private`'s check traits,
//! each pointing at the user's own token.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::{GenericArgument, Ident, Lifetime, PathArguments, Type};

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

/// The `Ok` and error types of a return type spelled `…Result<T, E>` or
/// `…Result<T>` (an alias such as `anyhow::Result<T>`). `None` where the
/// type does not show them; the expansion then names them through
/// `IdempotentReturn`.
pub(crate) struct ReturnShape<'a> {
    pub ok: Option<&'a Type>,
    pub err: Option<&'a Type>,
}

impl<'a> ReturnShape<'a> {
    pub(crate) fn of(ret: &'a Type) -> Self {
        let none = ReturnShape {
            ok: None,
            err: None,
        };
        let ret = unwrap_group(ret);
        let Type::Path(path) = ret else { return none };
        if path.qself.is_some() {
            return none;
        }
        let Some(last) = path.path.segments.last() else {
            return none;
        };
        if last.ident != "Result" {
            return none;
        }
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return none;
        };
        let types: Vec<&Type> = args
            .args
            .iter()
            .filter_map(|arg| match arg {
                GenericArgument::Type(ty) => Some(ty),
                _ => None,
            })
            .collect();
        match types.as_slice() {
            [ok] => ReturnShape {
                ok: Some(ok),
                err: None,
            },
            [ok, err] => ReturnShape {
                ok: Some(ok),
                err: Some(err),
            },
            _ => none,
        }
    }
}

fn unwrap_group(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => unwrap_group(&group.elem),
        Type::Paren(paren) => unwrap_group(&paren.elem),
        other => other,
    }
}

/// An `Ok` type that borrows cannot be decoded from the store: one error
/// at each reference and each lifetime other than `'static`.
pub(crate) fn borrowed_ok(ok: &Type, errors: &mut Vec<syn::Error>) {
    const WHY: &str =
        "the `Ok` value is stored and decoded again for every duplicate call, so it cannot borrow";
    match ok {
        Type::Reference(reference) => errors.push(syn::Error::new_spanned(
            reference,
            format!("{WHY}: return an owned type instead of a reference (`String` rather than `&str`, `Vec<T>` rather than `&[T]`)"),
        )),
        Type::Path(path) => {
            if let Some(qself) = &path.qself {
                borrowed_ok(&qself.ty, errors);
            }
            for segment in &path.path.segments {
                let PathArguments::AngleBracketed(args) = &segment.arguments else {
                    continue;
                };
                for arg in &args.args {
                    match arg {
                        GenericArgument::Lifetime(lifetime) => borrowed_lifetime(lifetime, errors),
                        GenericArgument::Type(ty) => borrowed_ok(ty, errors),
                        _ => {}
                    }
                }
            }
        }
        Type::Tuple(tuple) => tuple.elems.iter().for_each(|ty| borrowed_ok(ty, errors)),
        Type::Array(array) => borrowed_ok(&array.elem, errors),
        Type::Slice(slice) => borrowed_ok(&slice.elem, errors),
        Type::Group(group) => borrowed_ok(&group.elem, errors),
        Type::Paren(paren) => borrowed_ok(&paren.elem, errors),
        _ => {}
    }

    fn borrowed_lifetime(lifetime: &Lifetime, errors: &mut Vec<syn::Error>) {
        if lifetime.ident != "static" {
            errors.push(syn::Error::new_spanned(
                lifetime,
                format!("{WHY}: a value decoded from the store lives for `'static`, not `{lifetime}`; use an owned type or `'static` (`Cow<'static, str>`, `String`)"),
            ));
        }
    }
}

/// What a parameter is hashed into.
#[derive(Clone, Copy)]
pub(crate) enum Derived {
    KeyAndFingerprint,
    Key,
    Fingerprint,
}

/// Hashes one parameter into the derived digest, checked: a parameter that
/// is not `Serialize` is one error at that parameter, naming it and
/// saying how to leave it out. The check trait is local to the statement
/// so its message can name the parameter.
pub(crate) fn hashed_param(private: &TokenStream, param: &Ident, derived: Derived) -> TokenStream {
    let (what, instead) = match derived {
        Derived::KeyAndFingerprint => (
            "key and fingerprint",
            "or give the key yourself with `key = …` and the fingerprint with `fingerprint = …` (or `fingerprint = false`)",
        ),
        Derived::Key => ("key", "or give the key yourself with `key = …`"),
        Derived::Fingerprint => (
            "fingerprint",
            "or give the fingerprint yourself with `fingerprint = …` (or `fingerprint = false`)",
        ),
    };
    let message = format!(
        "parameter `{param}` cannot be hashed into the derived {what}: `{{Self}}` does not implement `serde::Serialize`"
    );
    let label = format!("hashed into the derived {what}, so it must be `serde::Serialize`");
    let note = format!(
        "leave it out with `#[idempotent(skip({param}))]` (pools, clients, handles), {instead}"
    );
    quote_spanned! {param.span()=>
        {
            #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
            trait __IdemHashed: #private::Hashed {}
            impl<__IdemT: ?::core::marker::Sized + #private::Hashed> __IdemHashed for __IdemT {}
            fn __idem_hash<__IdemT: ?::core::marker::Sized + __IdemHashed>(
                __idem_digest: &mut #private::ParamDigest,
                __idem_value: &__IdemT,
            ) {
                #private::ParamDigest::param(__idem_digest, __idem_value)
            }
            __idem_hash(&mut __idem_digest, &#param);
        }
    }
}
