//! A tonic service method (`Result<Response<M>, Status>`): its answer is
//! stored through `idem::grpc` as `Reply<M>` / `StatusRecord`, turned back
//! into the method's own type at each return.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use crate::args::Errors;
use crate::model::{Grpc, Model};
use crate::spans::{self, SpanRange};

/// The call's answer as the fn returns it: for a tonic method, the stored
/// `Reply`/`StatusRecord` turned back into `Response`/`Status`.
pub(crate) fn answered(model: &Model<'_>, answer: TokenStream) -> TokenStream {
    match &model.grpc {
        Some(grpc) => {
            let runtime = &grpc.private;
            quote!(#runtime::answer(#answer))
        }
        None => answer,
    }
}

/// A tonic method's policy, over its stored `StatusRecord`: by default
/// §14's stored codes; `errors = path` asks a `fn(&Status) -> bool`.
pub(crate) fn error_policy(model: &Model<'_>, grpc: &Grpc) -> (TokenStream, TokenStream) {
    let private = &model.private;
    let runtime = &grpc.private;
    let record = &model.types.err;
    match &model.args.errors {
        None => (
            quote!(),
            quote!(.errors(#private::store_if::<#record>(#runtime::stored_code))),
        ),
        Some(Errors::Release) => (quote!(), quote!()),
        Some(Errors::Replay(span)) => {
            let replay = spans::respan(quote!(#private::replay::<#record>()), *span);
            (quote!(), quote!(.errors(#replay)))
        }
        Some(Errors::Predicate(path)) => {
            let range = SpanRange::of(path);
            let status = spans::respan(grpc.status.clone(), range.first);
            let ty = quote_spanned!(range.first=> fn(&#status) -> bool);
            (
                quote! { let _: #ty = #path; },
                quote!(.errors(#private::store_if::<#record>(
                    |__idem_status: &#record| (#path)(#runtime::StatusRecord::status(__idem_status))
                ))),
            )
        }
    }
}
