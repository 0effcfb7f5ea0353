//! The function's entry in `idem::testing::sites()`: a static built from
//! the options as written. `register_site!` expands to it only when the
//! runtime has its `testing` feature (this crate cannot see the facade's
//! features), and to nothing otherwise; either way a call does no work.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::spanned::Spanned;

use crate::args::{Duration, Errors, Fingerprint};
use crate::model::Model;

pub(crate) fn gen_site(model: &Model<'_>) -> TokenStream {
    let private = &model.private;
    let args = model.args;
    let name = model.func.sig.ident.to_string();
    let scope = optional(private, args.scope.as_ref().map(written));
    let key = optional(private, args.key.as_ref().map(written));
    let fingerprint = optional(
        private,
        args.fingerprint
            .as_ref()
            .map(|fingerprint| match fingerprint {
                Fingerprint::Disabled => "false".to_owned(),
                Fingerprint::Expr(expr) => written(expr),
            }),
    );
    let [ttl, lease, wait, tombstone] = [&args.ttl, &args.lease, &args.wait, &args.tombstone]
        .map(|value| setting(private, value.as_ref()));
    let errors = match &args.errors {
        None | Some(Errors::Release) => "release".to_owned(),
        Some(Errors::Replay(_)) => "replay".to_owned(),
        Some(Errors::Predicate(path)) => written(path),
    };
    let detach = args.detach.is_some();
    quote! {
        #private::register_site! {
            path: #private::concat!(#private::module_path!(), "::", #name),
            scope: #scope,
            key: #key,
            fingerprint: #fingerprint,
            ttl: #ttl,
            lease: #lease,
            wait: #wait,
            tombstone: #tombstone,
            errors: #errors,
            detach: #detach,
        }
    }
}

/// An option's source text: as written when the compiler keeps it,
/// otherwise its tokens.
fn written(tokens: &(impl ToTokens + Spanned)) -> String {
    tokens
        .span()
        .source_text()
        .unwrap_or_else(|| tokens.to_token_stream().to_string())
}

fn optional(private: &TokenStream, text: Option<String>) -> TokenStream {
    match text {
        Some(text) => quote!(#private::Option::Some(#text)),
        None => quote!(#private::Option::None),
    }
}

fn setting(private: &TokenStream, value: Option<&Duration>) -> TokenStream {
    match value {
        None => quote!(#private::SiteSetting::Absent),
        Some(Duration::Literal { millis, .. }) => {
            quote!(#private::SiteSetting::Literal(#private::Duration::from_millis(#millis)))
        }
        Some(Duration::Expr(expr)) => {
            let text = written(expr);
            quote!(#private::SiteSetting::Expr(#text))
        }
    }
}
