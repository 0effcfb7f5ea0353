//! `detach`: the body runs on a task of its own after the caller is gone,
//! so it may not borrow from the caller. One error per borrowed parameter,
//! at that parameter.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{
    FnArg, GenericArgument, Lifetime, PathArguments, ReturnType, Signature, Type, TypeParamBound,
};

use crate::diagnostics::Diagnostics;

const WHY: &str = "with `detach` the body runs on after the caller's future is dropped, so it cannot borrow from the caller";

pub(crate) fn owned_params(sig: &Signature, diagnostics: &mut Diagnostics) {
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => {
                if let Some(borrow) = borrow_in(&receiver.ty) {
                    let written = if receiver.mutability.is_some() {
                        "&mut self"
                    } else {
                        "&self"
                    };
                    let written = if receiver.colon_token.is_some() {
                        "this receiver"
                    } else {
                        written
                    };
                    diagnostics.push(syn::Error::new_spanned(
                        borrow,
                        format!("{WHY}: `{written}` borrows the object; take `self: Arc<Self>` (or `self`) instead, or remove `detach`"),
                    ));
                }
            }
            FnArg::Typed(typed) => {
                if let Some(borrow) = borrow_in(&typed.ty) {
                    let pat = &typed.pat;
                    diagnostics.push(syn::Error::new_spanned(
                        borrow,
                        format!(
                            "{WHY}: parameter `{}` borrows; take it owned (`String` rather than `&str`, `Arc<T>` rather than `&T`), or remove `detach`",
                            pat.to_token_stream()
                        ),
                    ));
                }
            }
        }
    }
}

/// The first reference, or lifetime other than `'static`, in `ty`.
fn borrow_in(ty: &Type) -> Option<TokenStream> {
    match ty {
        Type::Reference(reference) => match &reference.lifetime {
            Some(lifetime) if lifetime.ident == "static" => borrow_in(&reference.elem),
            _ => Some(reference.to_token_stream()),
        },
        Type::Path(path) => {
            let qself = path.qself.as_ref().and_then(|q| borrow_in(&q.ty));
            qself.or_else(|| {
                path.path
                    .segments
                    .iter()
                    .find_map(|s| borrow_in_args(&s.arguments))
            })
        }
        Type::ImplTrait(bounds) => bounds.bounds.iter().find_map(borrow_in_bound),
        Type::TraitObject(bounds) => bounds.bounds.iter().find_map(borrow_in_bound),
        Type::Tuple(tuple) => tuple.elems.iter().find_map(borrow_in),
        Type::Array(array) => borrow_in(&array.elem),
        Type::Slice(slice) => borrow_in(&slice.elem),
        Type::Group(group) => borrow_in(&group.elem),
        Type::Paren(paren) => borrow_in(&paren.elem),
        _ => None,
    }
}

fn borrow_in_args(arguments: &PathArguments) -> Option<TokenStream> {
    match arguments {
        PathArguments::AngleBracketed(args) => args.args.iter().find_map(|arg| match arg {
            GenericArgument::Lifetime(lifetime) => non_static(lifetime),
            GenericArgument::Type(ty) => borrow_in(ty),
            _ => None,
        }),
        PathArguments::Parenthesized(args) => {
            let output = match &args.output {
                ReturnType::Type(_, ty) => borrow_in(ty),
                ReturnType::Default => None,
            };
            args.inputs.iter().find_map(borrow_in).or(output)
        }
        PathArguments::None => None,
    }
}

fn borrow_in_bound(bound: &TypeParamBound) -> Option<TokenStream> {
    match bound {
        TypeParamBound::Lifetime(lifetime) => non_static(lifetime),
        TypeParamBound::Trait(bound) => bound
            .path
            .segments
            .iter()
            .find_map(|s| borrow_in_args(&s.arguments)),
        _ => None,
    }
}

fn non_static(lifetime: &Lifetime) -> Option<TokenStream> {
    (lifetime.ident != "static").then(|| lifetime.to_token_stream())
}
