//! Rewrites the annotated `async fn`: the signature is re-emitted as is,
//! the body is wrapped in a call on the runtime (`__private`).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType};

use crate::args::{Args, Diagnostics, Duration, Errors, Fingerprint};

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
        return Err(syn::Error::new_spanned(
            parsed,
            "`#[idempotent]` goes on an `async fn` that returns a `Result`",
        ));
    };
    if func.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            func.sig.fn_token.span,
            "`#[idempotent]` needs an `async fn`: a duplicate may have to wait for the store, so the function must be able to await",
        ));
    }
    Ok(func)
}

/// What the expansion needs from the signature, checked.
struct Model {
    /// Parameters hashed into the derived key and fingerprint.
    hashed: Vec<Ident>,
    /// Whether the derived digest is needed (no `key`, or no `fingerprint`).
    digest: bool,
}

impl Model {
    fn new(args: &Args, func: &ItemFn, diagnostics: &mut Diagnostics) -> Self {
        let digest = args.key.is_none() || args.fingerprint.is_none();
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
                other if digest => diagnostics.push(syn::Error::new_spanned(
                    other,
                    "a destructured parameter cannot be hashed into the derived key; bind it to a name, or give both `key = …` and `fingerprint = …` (or `fingerprint = false`)",
                )),
                _ => {}
            }
        }
        for skip in &args.skip {
            if !names.contains(skip) {
                diagnostics.push(syn::Error::new(
                    skip.span(),
                    format!("`skip({skip})` names no parameter of this function"),
                ));
            }
        }
        if matches!(func.sig.output, ReturnType::Default) {
            diagnostics.push(syn::Error::new(
                func.sig.paren_token.span.close(),
                "an `#[idempotent]` fn must return `Result<T, E>`: the `Ok` value is stored and replayed, and `E: From<idem::Error>` carries idem's own errors",
            ));
        }
        Model { hashed, digest }
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

    let bail = quote! {
        return #private::Result::Err(#private::From::from(__idem_error))
    };

    let digest = model.digest.then(|| {
        let params = model.hashed.iter().map(|param| {
            quote_spanned!(param.span()=> #private::ParamDigest::param(&mut __idem_digest, &#param);)
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
        Some(store) => quote_spanned!(store.span()=> #private::handle(&(#store))),
        None => quote! {
            &match #private::installed() {
                #private::Result::Ok(__idem_handle) => __idem_handle,
                #private::Result::Err(__idem_error) => #bail,
            }
        },
    };
    let scope = match &args.scope {
        Some(scope) => quote!(&(#scope)),
        None => {
            let name = sig.ident.to_string();
            quote!(#private::concat!(#private::module_path!(), "::", #name))
        }
    };
    let key = match &args.key {
        Some(key) => quote_spanned!(key.span()=> #private::key_part(&(#key))),
        None => quote!(&__idem_digest),
    };
    let fingerprint = match &args.fingerprint {
        Some(Fingerprint::Disabled) => quote!(),
        Some(Fingerprint::Expr(expr)) => {
            quote_spanned!(expr.span()=> .fingerprint(#private::fingerprint_of(&(#expr))))
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
    let errors = match &args.errors {
        None | Some(Errors::Release) => quote!(),
        Some(Errors::Replay(span)) => quote_spanned!(*span=> .errors(#private::replay_errors())),
        Some(Errors::Predicate(path)) => {
            quote_spanned!(path.span()=> .errors(#private::store_errors_if(#path)))
        }
    };
    let ret_check = quote_spanned!(ret.span()=> #private::assert_return::<#ret>(););

    quote! {
        #(#attrs)*
        #vis #sig {
            #ret_check
            #digest
            let __idem_call = #private::Idempotency::call(#handle, #scope, #key)
                #fingerprint
                #(#durations)*
                #errors;
            __idem_call
                .run(move || async move {
                    let __idem_return: #ret = #block;
                    #[allow(unreachable_code)]
                    __idem_return
                })
                .await
        }
    }
}
