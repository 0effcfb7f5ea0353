//! What the expansion needs, resolved and checked once: the runtime's
//! path, the return type and its `Ok` and error types, the parameters
//! hashed into the derived digest. Every mistake found on the way is
//! collected in `Diagnostics`.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{Attribute, FnArg, Ident, ItemFn, Pat, ReturnType, Type};

use crate::args::Args;
use crate::detach;
use crate::diagnostics::Diagnostics;
use crate::digest::Derived;
use crate::return_type::{self, ReturnShape, TonicShape};
use crate::spans::{self, SpanRange};

pub(crate) struct Model<'a> {
    pub args: &'a Args,
    pub func: &'a ItemFn,
    /// `::idem::__private`, or under the `crate = …` path.
    pub private: TokenStream,
    /// The return type as written.
    pub ret: &'a Type,
    pub types: Types,
    /// Whether the return type spells out its `Ok` type (`Result<T, E>`)
    /// rather than hiding it behind an alias.
    pub spelled_ok: bool,
    /// Parameters hashed into the derived key and fingerprint, each with
    /// its `#[cfg]` attributes.
    pub hashed: Vec<(Ident, Vec<Attribute>)>,
    /// What the derived digest is used for, if it is needed.
    pub derived: Option<Derived>,
    /// A tonic service method (`Result<Response<M>, Status>`), stored
    /// through `idem::grpc`.
    pub grpc: Option<Grpc>,
}

/// A tonic service method: the runtime's path and the user's status type.
pub(crate) struct Grpc {
    /// `::idem::grpc::__private`.
    pub private: TokenStream,
    /// The status type as written.
    pub status: TokenStream,
}

/// The return type, and its `Ok` and error types named with the user's
/// tokens (or through `IdempotentReturn` at the return type, for an alias),
/// for the turbofish of `run` and `bail`.
pub(crate) struct Types {
    pub ret: TokenStream,
    pub ok: TokenStream,
    pub err: TokenStream,
    /// The first token of the `Ok` type: where the runtime's call and its
    /// checks are reported.
    pub ok_span: Span,
}

impl<'a> Model<'a> {
    /// `None` when the fn has no return type (an error is collected).
    pub(crate) fn new(
        args: &'a Args,
        func: &'a ItemFn,
        diagnostics: &mut Diagnostics,
    ) -> Option<Self> {
        let derived = derived(args);
        let hashed = hashed_params(args, func, derived, diagnostics);
        check_skips(args, func, diagnostics);
        let ret = return_type(func, diagnostics);
        if hashed.is_empty() && matches!(derived, Some(Derived::KeyAndFingerprint | Derived::Key)) {
            diagnostics.push(syn::Error::new(
                func.sig.ident.span(),
                "the derived key would be the same for every call: this fn has no parameter to hash (`self` and skipped parameters are left out), so every call would replay the first call's result; give the key with `key = …` (for a method, what identifies the object, e.g. `key = self.id`), or, if one result for all calls is really meant, say so with a constant such as `key = \"singleton\"`",
            ));
        }
        if args.detach.is_some() {
            detach::owned_params(&func.sig, diagnostics);
        }
        if args.reconcile.is_some() {
            named_params(func, diagnostics);
        }
        let ret = ret?;
        let krate = args
            .krate
            .clone()
            .unwrap_or_else(|| syn::parse_quote!(::idem));
        let private = quote!(#krate::__private);
        let tonic = TonicShape::of(ret);
        if let (Some(_), Some(reconcile)) = (&tonic, &args.reconcile) {
            diagnostics.push(syn::Error::new_spanned(
                reconcile,
                "`reconcile = …` is not supported on a tonic service method (`Result<Response<M>, Status>`): put `#[idempotent(reconcile = …)]` on a fn of your own that the method calls",
            ));
        }
        let (types, grpc) = match tonic {
            Some(tonic) => {
                let grpc = Grpc {
                    private: quote!(#krate::grpc::__private),
                    status: tonic.status.to_token_stream(),
                };
                (Types::tonic(&private, &grpc, &tonic), Some(grpc))
            }
            None => (Types::new(&private, ret), None),
        };
        Some(Model {
            types,
            grpc,
            spelled_ok: ReturnShape::of(ret).ok.is_some(),
            private,
            ret,
            args,
            func,
            hashed,
            derived,
        })
    }
}

impl Types {
    fn new(private: &TokenStream, ret: &Type) -> Self {
        let shape = ReturnShape::of(ret);
        let range = SpanRange::of(ret);
        let ret = ret.to_token_stream();
        let trait_path = quote!(#private::IdempotentReturn);
        let ok = match shape.ok {
            Some(ok) => ok.to_token_stream(),
            None => spans::qualified(range, &ret, &trait_path, "Ok"),
        };
        let err = match shape.err {
            Some(err) => err.to_token_stream(),
            None => spans::qualified(range, &ret, &trait_path, "Err"),
        };
        let ok_span = SpanRange::of(&ok).first;
        Types {
            ret,
            ok,
            err,
            ok_span,
        }
    }
}

impl Types {
    /// A tonic method's answer as the call stores it: `Reply<M>` and
    /// `StatusRecord`, spanned at the user's `M` and status type.
    fn tonic(private: &TokenStream, grpc: &Grpc, tonic: &TonicShape<'_>) -> Self {
        let runtime = &grpc.private;
        let message = tonic.message;
        let ok_span = SpanRange::of(message).first;
        let ok = spans::respan(quote!(#runtime::Reply<#message>), ok_span);
        let err = spans::respan(
            quote!(#runtime::StatusRecord),
            SpanRange::of(tonic.status).first,
        );
        Types {
            ret: quote!(#private::Result<#ok, #err>),
            ok,
            err,
            ok_span,
        }
    }
}

fn derived(args: &Args) -> Option<Derived> {
    match (&args.key, &args.fingerprint) {
        (None, None) => Some(Derived::KeyAndFingerprint),
        (None, Some(_)) => Some(Derived::Key),
        (Some(_), None) => Some(Derived::Fingerprint),
        (Some(_), Some(_)) => None,
    }
}

fn hashed_params(
    args: &Args,
    func: &ItemFn,
    derived: Option<Derived>,
    diagnostics: &mut Diagnostics,
) -> Vec<(Ident, Vec<Attribute>)> {
    let mut hashed = Vec::new();
    for input in &func.sig.inputs {
        let FnArg::Typed(typed) = input else { continue };
        match &*typed.pat {
            Pat::Ident(pat) if !args.skip.contains(&pat.ident) => {
                let cfgs = typed
                    .attrs
                    .iter()
                    .filter(|attr| attr.path().is_ident("cfg"))
                    .cloned()
                    .collect();
                hashed.push((pat.ident.clone(), cfgs));
            }
            Pat::Ident(_) => {}
            other if derived.is_some() => diagnostics.push(syn::Error::new_spanned(
                other,
                "a destructured parameter cannot be hashed into the derived key: bind it to a name, or give both `key = …` and `fingerprint = …` (or `fingerprint = false`)",
            )),
            _ => {}
        }
    }
    hashed
}

/// `reconcile = …` is called with every parameter by name.
fn named_params(func: &ItemFn, diagnostics: &mut Diagnostics) {
    for input in &func.sig.inputs {
        if let FnArg::Typed(typed) = input
            && !matches!(&*typed.pat, Pat::Ident(_))
        {
            diagnostics.push(syn::Error::new_spanned(
                &typed.pat,
                "`reconcile = …` is called with the fn's parameters by reference: bind this parameter to a name",
            ));
        }
    }
}

/// Every `skip(…)` names a parameter.
fn check_skips(args: &Args, func: &ItemFn, diagnostics: &mut Diagnostics) {
    let names: Vec<&Ident> = func
        .sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(pat) => Some(&pat.ident),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    for skip in args.skip.iter().filter(|skip| !names.contains(skip)) {
        let known = if names.is_empty() {
            "this function has no parameter to skip (`self` is always skipped)".to_owned()
        } else {
            let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("its parameters are {}", list.join(", "))
        };
        diagnostics.push(syn::Error::new(
            skip.span(),
            format!("`skip({skip})` names no parameter of this function; {known}"),
        ));
    }
}

/// The return type, which must be a `Result` whose `Ok` type owns its data.
fn return_type<'a>(func: &'a ItemFn, diagnostics: &mut Diagnostics) -> Option<&'a Type> {
    let ReturnType::Type(_, ret) = &func.sig.output else {
        diagnostics.push(syn::Error::new(
            func.sig.paren_token.span.close(),
            "an `#[idempotent]` fn must return `Result<T, E>`: the `Ok` value is stored and replayed, and `E: From<idem::Error>` carries idem's own errors; add `-> Result<(), idem::Error>`",
        ));
        return None;
    };
    if let Some(ok) = ReturnShape::of(ret).ok {
        let mut errors = Vec::new();
        return_type::borrowed_ok(ok, &mut errors);
        errors.into_iter().for_each(|e| diagnostics.push(e));
    }
    Some(ret)
}
