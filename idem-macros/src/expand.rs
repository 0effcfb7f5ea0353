//! Rewrites the annotated `async fn`: the signature is re-emitted as is,
//! the body is wrapped in a call on the runtime (`__private`), and every
//! requirement on the user's types is checked at the user's own token
//! (see `checks`).

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType};

use crate::args::{Args, Duration, Errors, Fingerprint};
use crate::checks::{self, Derived, ReturnShape, SpanRange};
use crate::detach;
use crate::diagnostics::Diagnostics;

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
fn rewritten_by_async_trait(sig: &syn::Signature) -> bool {
    sig.generics.lifetimes().any(|def| {
        let name = def.lifetime.ident.to_string();
        name == "async_trait" || name.starts_with("life")
    })
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
    /// Parameters hashed into the derived key and fingerprint, each with
    /// its `#[cfg]` attributes.
    hashed: Vec<(Ident, Vec<syn::Attribute>)>,
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
                        let cfgs = typed
                            .attrs
                            .iter()
                            .filter(|attr| attr.path().is_ident("cfg"))
                            .cloned()
                            .collect();
                        hashed.push((pat.ident.clone(), cfgs));
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
        if hashed.is_empty() && matches!(derived, Some(Derived::KeyAndFingerprint | Derived::Key)) {
            diagnostics.push(syn::Error::new(
                func.sig.ident.span(),
                "the derived key would be the same for every call: this fn has no parameter to hash (`self` and skipped parameters are left out), so every call would replay the first call's result; give the key with `key = …` (for a method, what identifies the object, e.g. `key = self.id`), or, if one result for all calls is really meant, say so with a constant such as `key = \"singleton\"`",
            ));
        }
        if args.detach.is_some() {
            detach::owned_params(&func.sig, diagnostics);
        }
        Model { hashed, derived }
    }
}

/// The return type, and its `Ok` and error types named with the user's
/// tokens (or through `IdempotentReturn` at the return type, for an alias),
/// for the turbofish of `run` and `bail`.
struct Types {
    ret: TokenStream,
    ok: TokenStream,
    err: TokenStream,
}

impl Types {
    fn new(private: &TokenStream, ret: &syn::Type) -> Self {
        let shape = ReturnShape::of(ret);
        let range = SpanRange::of(ret);
        let ret = ret.to_token_stream();
        let trait_path = quote!(#private::IdempotentReturn);
        let ok = match shape.ok {
            Some(ok) => ok.to_token_stream(),
            None => checks::qualified(range, &ret, &trait_path, "Ok"),
        };
        let err = match shape.err {
            Some(err) => err.to_token_stream(),
            None => checks::qualified(range, &ret, &trait_path, "Err"),
        };
        Types { ret, ok, err }
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
    let Types {
        ret: ret_ty,
        ok: ok_ty,
        err: err_ty,
    } = Types::new(&private, ret);

    // Spanned like the runtime's call below, so a return type that is not
    // a `Result` is reported once.
    let bail = checks::respan(
        quote!(#private::bail::<#ret_ty>(__idem_errors, __idem_error)),
        SpanRange::of(&ok_ty).first,
    );
    let bail = quote!(return #bail);

    let digest = model.derived.map(|derived| {
        let params = model.hashed.iter().map(|(param, cfgs)| {
            let hash = checks::hashed_param(&private, param, derived);
            quote!(#(#cfgs)* #hash)
        });
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
            let call = checks::respan(quote!(#private::handle), SpanRange::of(store).first);
            let store = checks::parenthesized(store);
            quote!(#call(#store))
        }
        None => quote! {
            &match #private::installed() {
                #private::Result::Ok(__idem_handle) => __idem_handle,
                #private::Result::Err(__idem_error) => #bail,
            }
        },
    };
    // The function's path names its metrics (a bounded label), whatever
    // its scope expression (which may carry a tenant).
    let fn_path = {
        let name = sig.ident.to_string();
        quote!(#private::concat!(#private::module_path!(), "::", #name))
    };
    let site = quote!(.site(#private::call_site!(#fn_path)));
    let scope = match &args.scope {
        Some(scope) => key_part(&private, scope),
        None => fn_path.clone(),
    };
    let key = match &args.key {
        Some(key) => key_part(&private, key),
        None => quote!(__idem_digest),
    };
    let fingerprint = match &args.fingerprint {
        Some(Fingerprint::Disabled) => quote!(),
        Some(Fingerprint::Expr(expr)) => {
            let call = checks::respan(quote!(#private::fingerprint_of), SpanRange::of(expr).first);
            let expr = checks::parenthesized(&by_reference(expr));
            quote! {
                .fingerprint_digest(match #call(#expr) {
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
    let version = args.version.as_ref().map(|version| {
        let span = SpanRange::of(version).first;
        quote_spanned!(span=> .version(#version))
    });
    let (predicate, errors) = match &args.errors {
        None | Some(Errors::Release) => (quote!(), quote!()),
        Some(Errors::Replay(span)) => {
            let err = checks::respan(err_ty.clone(), *span);
            let replay = checks::respan(quote!(#private::replay::<#err>()), *span);
            (quote!(), quote!(.errors(#replay)))
        }
        Some(Errors::Predicate(path)) => {
            let range = SpanRange::of(path);
            let err = checks::respan(err_ty.clone(), range.first);
            let ty = quote_spanned!(range.first=> fn(&#err) -> bool);
            let store_if = checks::respan(quote!(#private::store_if::<#err>), range.first);
            (
                quote! { let __idem_predicate: #ty = #path; },
                quote!(.errors(#store_if(__idem_predicate))),
            )
        }
    };

    // The runtime's future and every token of its call are spanned at
    // the first token of the `Ok` type: an async fn's future carries its
    // where-clauses, and rustc reports an unmet one at the call and at
    // `.await` too; at the same span as the check, it is reported once.
    let ok_span = SpanRange::of(&ok_ty).first;
    let run_ok = checks::respan(ok_ty.clone(), ok_span);
    let run_ret = if ReturnShape::of(ret).ok.is_some() {
        ret_ty.clone()
    } else {
        checks::respan(ret_ty.clone(), ok_span)
    };
    let runner = if args.detach.is_some() {
        format_ident!("run_detached")
    } else {
        format_ident!("run")
    };
    let run_path = checks::respan(
        quote!(#private::#runner::<#run_ret, #run_ok, #err_ty, _, _, _>),
        ok_span,
    );
    let mut run_args = Group::new(
        Delimiter::Parenthesis,
        quote! {
            // The call is built in the argument, not bound first: a
            // binding is one more copy of it per call.
            #private::Idempotency::call(#handle, &#scope, &#key)
                #site
                #fingerprint
                #(#durations)*
                #version
                #errors,
            __idem_errors,
            move || async move {
                let __idem_return: #ret = #block;
                #[allow(unreachable_code)]
                __idem_return
            }
        },
    );
    run_args.set_span(ok_span);
    let await_ = quote_spanned!(ok_span=> .await);
    let error_type = checks::respan(quote!(#private::error_type), SpanRange::of(&err_ty).first);
    let error_type = quote!(#error_type::<#err_ty>);

    // The body's braces keep the user's span, so the fn stays the user's
    // item for lints (an unused fn still warns `dead_code`).
    let mut body = Group::new(
        Delimiter::Brace,
        quote! {
            let __idem_errors = #error_type();
            #digest
            #predicate
            #run_path #run_args #await_
        },
    );
    body.set_span(block.brace_token.span.join());
    quote! {
        #(#attrs)*
        #vis #sig #body
    }
}

/// `key = …` or `scope = …`, checked for `KeyPart` at the expression.
fn key_part(private: &TokenStream, expr: &syn::Expr) -> TokenStream {
    let call = checks::respan(quote!(#private::key_part), SpanRange::of(expr).first);
    let expr = checks::parenthesized(&by_reference(expr));
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
