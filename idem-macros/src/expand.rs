//! Rewrites the annotated `async fn` in small generators, as
//! tracing-attributes does: the signature is re-emitted as is, the body
//! is wrapped in a call on the runtime (`__private`), and every
//! requirement on the user's types is checked at the user's own token.

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::args::{Args, Duration, Errors, Fingerprint, Mismatch};
use crate::diagnostics::Diagnostics;
use crate::digest;
use crate::model::Model;
use crate::parse;
use crate::spans::{self, SpanRange};

pub(crate) fn idempotent(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut diagnostics = Diagnostics::default();
    let args = syn::parse2::<Args>(args)
        .map_err(|e| diagnostics.push(e))
        .ok();
    let annotated = parse::async_fn(item).map_err(|e| diagnostics.push(e)).ok();
    let model = match (&args, &annotated) {
        (Some(args), Some(annotated)) => Model::new(args, &annotated.func, &mut diagnostics),
        _ => None,
    };
    diagnostics.finish()?;
    let model = model.expect("a model is missing only when an error was collected");
    match annotated.as_ref().and_then(|a| a.boxed.as_ref()) {
        Some(boxed) => gen_boxed(&model, boxed),
        None => Ok(gen_function(&model)),
    }
}

/// The fn as `#[async_trait]` rewrote it, with the block inside its
/// `Box::pin(async move { … })` replaced by the call: the signature, the
/// lifetimes and the boxing stay async-trait's.
fn gen_boxed(model: &Model<'_>, boxed: &syn::ItemFn) -> syn::Result<TokenStream> {
    let mut boxed = boxed.clone();
    let inner = parse::boxed_async_mut(&mut boxed.block)
        .expect("the boxed future was found when the fn was parsed");
    let body = gen_body(model);
    let mut block: syn::Block = syn::parse2(quote!({ #body }))?;
    block.brace_token = inner.block.brace_token;
    inner.block = block;
    Ok(boxed.into_token_stream())
}

/// The fn as written, with its body replaced. The body's braces keep the
/// user's span, so the fn stays the user's item for lints (an unused fn
/// still warns `dead_code`).
fn gen_function(model: &Model<'_>) -> TokenStream {
    let syn::ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = model.func;
    let mut body = Group::new(Delimiter::Brace, gen_body(model));
    body.set_span(block.brace_token.span.join());
    quote! {
        #(#attrs)*
        #vis #sig #body
    }
}

fn gen_body(model: &Model<'_>) -> TokenStream {
    let private = &model.private;
    let err_ty = &model.types.err;
    let error_type = spans::respan(quote!(#private::error_type), SpanRange::of(err_ty).first);
    let digest = gen_digest(model);
    let (predicate, errors) = gen_error_policy(model);
    let run = gen_run(model, errors);
    let site = crate::site::gen_site(model);
    let run = crate::grpc::answered(model, run);
    quote! {
        #site
        let __idem_errors = #error_type::<#err_ty>();
        #digest
        #predicate
        #run
    }
}

/// `return` of idem's own error before the call (a missing store, a value
/// that cannot be hashed), converted into the fn's error type. Spanned like
/// the runtime's call, so a return type that is not a `Result` is reported
/// once.
fn gen_bail(model: &Model<'_>) -> TokenStream {
    let private = &model.private;
    let ret = &model.types.ret;
    let bail = spans::respan(
        quote!(#private::bail::<#ret>(__idem_errors, __idem_error)),
        model.types.ok_span,
    );
    let bail = crate::grpc::answered(model, bail);
    quote!(return #bail)
}

/// The derived digest of every parameter not skipped, if the key or the
/// fingerprint is derived.
fn gen_digest(model: &Model<'_>) -> Option<TokenStream> {
    let derived = model.derived?;
    let private = &model.private;
    let bail = gen_bail(model);
    let params = model.hashed.iter().map(|(param, cfgs)| {
        let hash = digest::hashed_param(private, param, derived);
        quote!(#(#cfgs)* #hash)
    });
    Some(quote! {
        let __idem_digest = {
            let mut __idem_digest = #private::ParamDigest::new();
            #(#params)*
            match #private::ParamDigest::finish(__idem_digest) {
                #private::Result::Ok(__idem_digest) => __idem_digest,
                #private::Result::Err(__idem_error) => #bail,
            }
        };
    })
}

/// The `Idempotency` the call runs on: `store = …`, or the installed one.
fn gen_store(model: &Model<'_>) -> TokenStream {
    let private = &model.private;
    match &model.args.store {
        Some(store) => {
            let call = spans::respan(quote!(#private::idempotency), SpanRange::of(store).first);
            let store = spans::parenthesized(store);
            quote!(#call(#store))
        }
        None => {
            let bail = gen_bail(model);
            quote! {
                &match #private::installed() {
                    #private::Result::Ok(__idem_handle) => __idem_handle,
                    #private::Result::Err(__idem_error) => #bail,
                }
            }
        }
    }
}

/// `Idempotency::call(store, &scope, &key)` and its settings, built in the
/// runtime's argument rather than bound first (a binding is one more copy
/// of it per call).
fn gen_call(model: &Model<'_>, errors: TokenStream) -> TokenStream {
    let private = &model.private;
    let args = model.args;
    let store = gen_store(model);
    // The function's path names its metrics (a bounded label), whatever
    // its scope expression (which may carry a tenant).
    let fn_path = {
        let name = model.func.sig.ident.to_string();
        quote!(#private::concat!(#private::module_path!(), "::", #name))
    };
    let scope = match &args.scope {
        Some(scope) => key_part(private, scope),
        None => fn_path.clone(),
    };
    let key = match &args.key {
        Some(key) => key_part(private, key),
        None => quote!(__idem_digest.key),
    };
    let fingerprint = gen_fingerprint(model);
    let durations = gen_durations(private, args);
    let version = args.version.as_ref().map(|version| {
        let span = SpanRange::of(version).first;
        quote_spanned!(span=> .version(#version))
    });
    // `reconcile = …` and `detach`: the call's public settings; the body
    // asks the reconcile itself, with the parameters it owns.
    let reconcile = args
        .reconcile
        .as_ref()
        .map(|_| quote!(.reconcile(#private::ReconcileInBody)));
    let detach = args.detach.as_ref().map(|_| quote!(.detach()));
    let mismatch = match &args.mismatch {
        Some(Mismatch::Rerun(span)) => {
            quote_spanned!(*span=> .mismatch(#private::Mismatch::Rerun))
        }
        Some(Mismatch::Refuse) | None => quote!(),
    };
    quote! {
        #private::Idempotency::call(#store, &#scope, &#key)
            .site(#private::call_site!(#fn_path))
            #fingerprint
            #(#durations)*
            #version
            #errors
            #mismatch
            #reconcile
            #detach
    }
}

fn gen_fingerprint(model: &Model<'_>) -> TokenStream {
    let private = &model.private;
    match &model.args.fingerprint {
        Some(Fingerprint::Disabled) => quote!(),
        Some(Fingerprint::Expr(expr)) => {
            let call = spans::respan(quote!(#private::fingerprint_of), SpanRange::of(expr).first);
            let expr = spans::parenthesized(&by_reference(expr));
            let bail = gen_bail(model);
            quote! {
                .fingerprint_digest(match #call(#expr) {
                    #private::Result::Ok(__idem_fingerprint) => __idem_fingerprint,
                    #private::Result::Err(__idem_error) => #bail,
                })
            }
        }
        None => quote!(.fingerprint_digest(__idem_digest.fingerprint)),
    }
}

/// `.ttl(…)`, `.lease(…)`, `.wait(…)`, `.tombstone(…)`: literals as milliseconds parsed at
/// compile time, expressions as written (checked by the runtime).
fn gen_durations<'a>(
    private: &'a TokenStream,
    args: &'a Args,
) -> impl Iterator<Item = TokenStream> + 'a {
    [
        ("ttl", &args.ttl),
        ("lease", &args.lease),
        ("wait", &args.wait),
        ("tombstone", &args.tombstone),
    ]
    .into_iter()
    .filter_map(move |(name, value)| {
        let method = format_ident!("{name}");
        Some(match value.as_ref()? {
            Duration::Literal { millis, .. } => {
                quote!(.#method(#private::Duration::from_millis(#millis)))
            }
            Duration::Expr(expr) => quote_spanned!(expr.span()=> .#method(#expr)),
        })
    })
}

/// The `errors = …` policy: a local holding the predicate (typed at the
/// user's path) and the builder call that installs the policy.
fn gen_error_policy(model: &Model<'_>) -> (TokenStream, TokenStream) {
    let private = &model.private;
    let err_ty = &model.types.err;
    if let Some(grpc) = &model.grpc {
        return crate::grpc::error_policy(model, grpc);
    }
    match &model.args.errors {
        None | Some(Errors::Release) => (quote!(), quote!()),
        Some(Errors::Replay(span)) => {
            let err = spans::respan(err_ty.clone(), *span);
            let replay = spans::respan(quote!(#private::replay::<#err>()), *span);
            (quote!(), quote!(.errors(#replay)))
        }
        Some(Errors::Predicate(path)) => {
            let range = SpanRange::of(path);
            let err = spans::respan(err_ty.clone(), range.first);
            let ty = quote_spanned!(range.first=> fn(&#err) -> bool);
            let store_if = spans::respan(quote!(#private::store_if::<#err>), range.first);
            (
                quote! { let __idem_predicate: #ty = #path; },
                quote!(.errors(#store_if(__idem_predicate))),
            )
        }
    }
}

/// The runtime's one runner, awaited: `__private::run`, which runs the
/// call where its settings say (`.detach()`), as `Call::run_apart` does. The future and every token of the call
/// are spanned at the first token of the `Ok` type: an async fn's future
/// carries its where-clauses, and rustc reports an unmet one at the call
/// and at `.await` too; at the same span as the check, it is reported
/// once.
fn gen_run(model: &Model<'_>, errors: TokenStream) -> TokenStream {
    let private = &model.private;
    let types = &model.types;
    let ok_span = types.ok_span;
    let run_ok = spans::respan(types.ok.clone(), ok_span);
    let run_ret = if model.spelled_ok {
        types.ret.clone()
    } else {
        spans::respan(types.ret.clone(), ok_span)
    };
    let err_ty = &types.err;
    let run_path = spans::respan(
        quote!(#private::run::<#run_ret, #run_ok, #err_ty, _, _, _, _, _>),
        ok_span,
    );
    let call = gen_call(model, errors);
    let ret = model.ret;
    let block = &model.func.block;
    // The body is handed the takeover to reconcile; without `reconcile`
    // it is always `None`.
    let body = match (&model.grpc, gen_reconcile(model)) {
        // The user's block in an async block of its own, so its `return`
        // and `?` answer the method's own type.
        (Some(grpc), _) => {
            let runtime = &grpc.private;
            quote! {
                move |_: ::core::option::Option<#private::Takeover>| async move {
                    let __idem_return: #ret = async move {
                        let __idem_return: #ret = #block;
                        #[allow(unreachable_code)]
                        __idem_return
                    }
                    .await;
                    #runtime::record(__idem_return)
                }
            }
        }
        (None, None) => quote! {
            move |_: ::core::option::Option<#private::Takeover>| async move {
                let __idem_return: #ret = #block;
                #[allow(unreachable_code)]
                __idem_return
            }
        },
        (None, Some(reconcile)) => quote! {
            move |__idem_takeover: ::core::option::Option<#private::Takeover>| async move {
                if let ::core::option::Option::Some(__idem_takeover) = __idem_takeover {
                    #reconcile
                }
                let __idem_return: #ret = #block;
                #[allow(unreachable_code)]
                __idem_return
            }
        },
    };
    let mut run_args = Group::new(
        Delimiter::Parenthesis,
        quote! {
            #call,
            __idem_errors,
            #body
        },
    );
    run_args.set_span(ok_span);
    let await_ = quote_spanned!(ok_span=> .await);
    quote!(#run_path #run_args #await_)
}

/// On a takeover, `reconcile = path` is asked first with every parameter
/// by reference (and `self`); its `Some` or `Err` is the fn's answer.
/// The call is spanned at the path, so a signature that does not fit is
/// reported there.
fn gen_reconcile(model: &Model<'_>) -> Option<TokenStream> {
    let path = model.args.reconcile.as_ref()?;
    let private = &model.private;
    let (ok, err, ret) = (&model.types.ok, &model.types.err, &model.types.ret);
    let span = SpanRange::of(path).first;
    let params = model.func.sig.inputs.iter().map(|input| match input {
        syn::FnArg::Receiver(receiver) if receiver.reference.is_some() => quote!(self),
        syn::FnArg::Receiver(_) => quote!(&self),
        syn::FnArg::Typed(typed) => {
            // A destructured parameter was refused in the model.
            match &*typed.pat {
                syn::Pat::Ident(pat) => {
                    let name = &pat.ident;
                    quote!(&#name)
                }
                other => quote!(&#other),
            }
        }
    });
    let check = quote_spanned!(span=> #private::reconcile_answer::<#ok, #err, _>);
    let call = quote_spanned!(span=> #check(#path(#(#params),*)));
    let from = quote!(<#ret as #private::IdempotentReturn>::from_result);
    Some(quote! {
        match __idem_takeover.ask(#call).await {
            #private::Result::Ok(::core::option::Option::Some(__idem_value)) => {
                return #from(#private::Result::Ok(__idem_value));
            }
            #private::Result::Ok(::core::option::Option::None) => {}
            #private::Result::Err(__idem_error) => {
                return #from(#private::Result::Err(__idem_error));
            }
        }
    })
}

/// `key = …` or `scope = …`, checked for `KeyPart` at the expression.
fn key_part(private: &TokenStream, expr: &syn::Expr) -> TokenStream {
    let call = spans::respan(quote!(#private::key_part), SpanRange::of(expr).first);
    let expr = spans::parenthesized(&by_reference(expr));
    quote!(#call(#expr))
}

/// A tuple expression with every element borrowed, so `(tenant, order_id)`
/// sees the parameters by reference instead of moving them into the
/// tuple. A reference hashes and serializes as its referent, so keys and
/// fingerprints are unchanged.
fn by_reference(expr: &syn::Expr) -> TokenStream {
    match expr {
        syn::Expr::Tuple(tuple) => {
            let elems = tuple.elems.iter().map(|elem| {
                let inner = by_reference(elem);
                let span = SpanRange::of(elem).first;
                quote_spanned!(span=> &#inner)
            });
            let mut group = Group::new(Delimiter::Parenthesis, quote!(#(#elems,)*));
            group.set_span(tuple.paren_token.span.join());
            group.into_token_stream()
        }
        syn::Expr::Paren(paren) if matches!(*paren.expr, syn::Expr::Tuple(_)) => {
            by_reference(&paren.expr)
        }
        other => other.to_token_stream(),
    }
}
