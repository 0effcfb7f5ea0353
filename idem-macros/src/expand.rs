//! Rewrites the annotated `async fn`: the signature is re-emitted as is,
//! the body is wrapped in a call on the runtime (`__private`), and every
//! requirement on the user's types is checked at the user's own token
//! (see `checks`).

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType};

use crate::args::{Args, Diagnostics, Duration, Errors, Fingerprint};
use crate::checks::{self, Derived, ReturnShape, SpanRange};

pub(crate) fn idempotent(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut diagnostics = Diagnostics::default();
    let args = syn::parse2::<Args>(args)
        .map_err(|e| diagnostics.push(e))
        .ok();
    let func = parse_fn(item).map_err(|e| diagnostics.push(e)).ok();
    let (Some(args), Some(func)) = (args, func) else {
        diagnostics.finish()?;
        unreachable!("a failed parse always leaves an error");
    };
    let model = Model::new(&args, &func, &mut diagnostics);
    diagnostics.finish()?;
    Ok(expand(&args, &func, &model))
}

fn parse_fn(item: TokenStream) -> syn::Result<ItemFn> {
    let parsed: syn::Item = syn::parse2(item)?;
    let syn::Item::Fn(func) = parsed else {
        return Err(syn::Error::new(
            item_keyword_span(&parsed),
            "`#[idempotent]` goes on an `async fn` that returns a `Result`, not on this item",
        ));
    };
    if func.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            func.sig.fn_token.span,
            "`#[idempotent]` needs an `async fn`: a call may have to wait for the store, so the function must be able to await; write `async fn`",
        ));
    }
    Ok(func)
}

/// The keyword that says what an item is (`struct`, `impl`, …), to point
/// at.
fn item_keyword_span(item: &syn::Item) -> proc_macro2::Span {
    match item {
        syn::Item::Struct(item) => item.struct_token.span,
        syn::Item::Enum(item) => item.enum_token.span,
        syn::Item::Impl(item) => item.impl_token.span,
        syn::Item::Trait(item) => item.trait_token.span,
        syn::Item::Mod(item) => item.mod_token.span,
        syn::Item::Const(item) => item.const_token.span,
        syn::Item::Static(item) => item.static_token.span,
        syn::Item::Type(item) => item.type_token.span,
        other => other.span(),
    }
}

/// What the expansion needs from the signature, checked.
struct Model {
    /// Parameters hashed into the derived key and fingerprint.
    hashed: Vec<Ident>,
    /// What the derived digest is used for, if it is needed.
    derived: Option<Derived>,
}

impl Model {
    fn new(args: &Args, func: &ItemFn, diagnostics: &mut Diagnostics) -> Self {
        let derived = match (&args.key, &args.fingerprint) {
            (None, None) => Some(Derived::KeyAndFingerprint),
            (None, Some(_)) => Some(Derived::Key),
            (Some(_), None) => Some(Derived::Fingerprint),
            (Some(_), Some(_)) => None,
        };
        let mut hashed = Vec::new();
        let mut names = Vec::new();
        for input in &func.sig.inputs {
            let FnArg::Typed(typed) = input else { continue };
            match &*typed.pat {
                Pat::Ident(pat) => {
                    names.push(pat.ident.clone());
                    if !args.skip.contains(&pat.ident) {
                        hashed.push(pat.ident.clone());
                    }
                }
                other if derived.is_some() => diagnostics.push(syn::Error::new_spanned(
                    other,
                    "a destructured parameter cannot be hashed into the derived key: bind it to a name, or give both `key = …` and `fingerprint = …` (or `fingerprint = false`)",
                )),
                _ => {}
            }
        }
        for skip in &args.skip {
            if !names.contains(skip) {
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
        match &func.sig.output {
            ReturnType::Default => diagnostics.push(syn::Error::new(
                func.sig.paren_token.span.close(),
                "an `#[idempotent]` fn must return `Result<T, E>`: the `Ok` value is stored and replayed, and `E: From<idem::Error>` carries idem's own errors; add `-> Result<(), idem::Error>`",
            )),
            ReturnType::Type(_, ret) => {
                if let Some(ok) = ReturnShape::of(ret).ok {
                    let mut errors = Vec::new();
                    checks::borrowed_ok(ok, &mut errors);
                    errors.into_iter().for_each(|e| diagnostics.push(e));
                }
            }
        }
        Model { hashed, derived }
    }
}

/// The conversions between the user's types and the checked types the
/// runtime is given; each names the check trait at the user's token.
struct Conversions {
    ret_into: TokenStream,
    ret_from: TokenStream,
    ok_into: [TokenStream; 2],
    ok_from: [TokenStream; 2],
    err_into: Vec<TokenStream>,
    err_from: Vec<TokenStream>,
    err_ty: TokenStream,
}

impl Conversions {
    fn new(private: &TokenStream, ret: &syn::Type, errors: Option<&Errors>) -> Self {
        let shape = ReturnShape::of(ret);
        let ret_range = SpanRange::of(ret);
        let ret_tokens = ret.to_token_stream();
        let ret_trait = quote!(#private::IdempotentReturn);
        let (ok_ty, ok_range) = match shape.ok {
            Some(ok) => (ok.to_token_stream(), SpanRange::of(ok)),
            None => (
                checks::qualified(ret_range, &ret_tokens, &ret_trait, "Ok"),
                ret_range,
            ),
        };
        let (err_ty, err_range) = match shape.err {
            Some(err) => (err.to_token_stream(), SpanRange::of(err)),
            None => (
                checks::qualified(ret_range, &ret_tokens, &ret_trait, "Err"),
                ret_range,
            ),
        };

        // Each stage checks the previous stage's checked type, so a failed
        // check leaves the later ones (and the runtime's bounds) unknown
        // rather than reported again.
        let mut ok_stages = Vec::new();
        let mut ty = ok_ty;
        for check in ["StoredOk", "ReplayedOk"] {
            let check = format_ident!("{check}");
            let check = quote!(#private::#check);
            ok_stages.push((ty.clone(), check.clone(), ok_range));
            ty = checks::qualified(ok_range, &ty, &check, "Checked");
        }
        let mut err_stages = vec![(
            err_ty.clone(),
            quote!(#private::IdempotentError),
            err_range,
        )];
        let replay_range = match errors {
            Some(Errors::Replay(span)) => Some(SpanRange {
                first: *span,
                last: *span,
            }),
            Some(Errors::Predicate(path)) => Some(SpanRange::of(path)),
            _ => None,
        };
        if let Some(range) = replay_range {
            let checked =
                checks::qualified(err_range, &err_ty, &quote!(#private::IdempotentError), "Checked");
            err_stages.push((checked, quote!(#private::ReplayedError), range));
        }

        let into = |stages: &[(TokenStream, TokenStream, SpanRange)]| -> Vec<TokenStream> {
            stages
                .iter()
                .map(|(ty, check, range)| checks::qualified(*range, ty, check, "into_checked"))
                .collect()
        };
        let from = |stages: &[(TokenStream, TokenStream, SpanRange)]| -> Vec<TokenStream> {
            stages
                .iter()
                .rev()
                .map(|(ty, check, range)| checks::qualified(*range, ty, check, "from_checked"))
                .collect()
        };
        let ok_into = into(&ok_stages);
        let ok_from = from(&ok_stages);
        Conversions {
            ret_into: checks::qualified(ret_range, &ret_tokens, &ret_trait, "into_result"),
            ret_from: checks::qualified(ret_range, &ret_tokens, &ret_trait, "from_result"),
            ok_into: [ok_into[0].clone(), ok_into[1].clone()],
            ok_from: [ok_from[0].clone(), ok_from[1].clone()],
            err_into: into(&err_stages),
            err_from: from(&err_stages),
            err_ty,
        }
    }

    /// `f_n(…f_1(value))`.
    fn chain(stages: &[TokenStream], value: TokenStream) -> TokenStream {
        stages
            .iter()
            .fold(value, |inner, stage| quote!(#stage(#inner)))
    }
}

fn expand(args: &Args, func: &ItemFn, model: &Model) -> TokenStream {
    let krate = args
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::idem));
    let private = quote!(#krate::__private);
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    let ReturnType::Type(_, ret) = &sig.output else {
        unreachable!("checked in Model::new")
    };
    let conv = Conversions::new(&private, ret, args.errors.as_ref());
    let Conversions {
        ret_into, ret_from, ..
    } = &conv;
    let ok_into = Conversions::chain(&conv.ok_into, quote!(__idem_value));
    let ok_from = Conversions::chain(&conv.ok_from, quote!(__idem_value));
    let err_into = Conversions::chain(&conv.err_into, quote!(__idem_error));
    let err_from = Conversions::chain(&conv.err_from, quote!(__idem_error));
    let err_from_idem = Conversions::chain(
        &conv.err_from,
        quote!(#private::From::from(__idem_error)),
    );

    let bail = quote!(return __idem_bail(__idem_error));

    let digest = model.derived.map(|derived| {
        let params = model
            .hashed
            .iter()
            .map(|param| checks::hashed_param(&private, param, derived));
        quote! {
            let __idem_digest = {
                let mut __idem_digest = #private::ParamDigest::new();
                #(#params)*
                match #private::ParamDigest::finish(__idem_digest) {
                    #private::Result::Ok(__idem_digest) => __idem_digest,
                    #private::Result::Err(__idem_error) => #bail,
                }
            };
        }
    });

    let handle = match &args.store {
        Some(store) => {
            let range = SpanRange::of(store);
            let amp = quote_spanned!(range.first=> &);
            let call = quote_spanned!(range.first=> #private::handle);
            quote!(#call(#amp(#store)))
        }
        None => quote! {
            &match #private::installed() {
                #private::Result::Ok(__idem_handle) => __idem_handle,
                #private::Result::Err(__idem_error) => #bail,
            }
        },
    };
    let scope = match &args.scope {
        Some(scope) => key_part(&private, scope),
        None => {
            let name = sig.ident.to_string();
            quote!(#private::concat!(#private::module_path!(), "::", #name))
        }
    };
    let key = match &args.key {
        Some(key) => key_part(&private, key),
        None => quote!(&__idem_digest),
    };
    let fingerprint = match &args.fingerprint {
        Some(Fingerprint::Disabled) => quote!(),
        Some(Fingerprint::Expr(expr)) => {
            let range = SpanRange::of(expr);
            let call = quote_spanned!(range.first=> #private::fingerprint_of);
            let amp = quote_spanned!(range.first=> &);
            quote! {
                .fingerprint_digest(match #call(#amp(#expr)) {
                    #private::Result::Ok(__idem_fingerprint) => __idem_fingerprint,
                    #private::Result::Err(__idem_error) => #bail,
                })
            }
        }
        None => quote!(.fingerprint_digest(__idem_digest)),
    };
    let durations = [
        ("ttl", &args.ttl),
        ("lease", &args.lease),
        ("wait", &args.wait),
    ]
    .into_iter()
    .filter_map(|(name, value)| {
        let method = format_ident!("{name}");
        Some(match value.as_ref()? {
            Duration::Literal { millis, .. } => {
                quote!(.#method(#private::Duration::from_millis(#millis)))
            }
            Duration::Expr(expr) => quote_spanned!(expr.span()=> .#method(#expr)),
        })
    });
    let (predicate, errors) = match &args.errors {
        None | Some(Errors::Release) => (quote!(), quote!()),
        Some(Errors::Replay(span)) => (
            quote!(),
            quote_spanned!(*span=> .errors(#private::replay_errors())),
        ),
        Some(Errors::Predicate(path)) => {
            let err_ty = &conv.err_ty;
            let range = SpanRange::of(path);
            let ty = quote_spanned!(range.first=> fn(&#err_ty) -> bool);
            (
                quote! { let __idem_predicate: #ty = #path; },
                quote!(.errors(#private::store_errors_if(__idem_predicate))),
            )
        }
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            let __idem_bail = |__idem_error: #private::Error| -> #ret {
                #ret_from(#private::Result::Err(#err_from_idem))
            };
            #digest
            #predicate
            let __idem_call = #private::Idempotency::call(#handle, #scope, #key)
                #fingerprint
                #(#durations)*
                #errors;
            let __idem_result = __idem_call
                .run(move || {
                    let __idem_body = async move {
                        let __idem_return: #ret = #block;
                        #[allow(unreachable_code)]
                        __idem_return
                    };
                    async move {
                        match #ret_into(__idem_body.await) {
                            #private::Result::Ok(__idem_value) => #private::Result::Ok(#ok_into),
                            #private::Result::Err(__idem_error) => #private::Result::Err(#err_into),
                        }
                    }
                })
                .await;
            #ret_from(match __idem_result {
                #private::Result::Ok(__idem_value) => #private::Result::Ok(#ok_from),
                #private::Result::Err(__idem_error) => #private::Result::Err(#err_from),
            })
        }
    }
}

/// `key = …` or `scope = …`, checked for `KeyPart` at the expression.
fn key_part(private: &TokenStream, expr: &syn::Expr) -> TokenStream {
    let range = SpanRange::of(expr);
    let call = quote_spanned!(range.first=> #private::key_part);
    let amp = quote_spanned!(range.first=> &);
    quote!(#call(#amp(#expr)))
}
