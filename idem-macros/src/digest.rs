//! The derived key and fingerprint: every parameter not skipped, hashed
//! into one digest, each checked for `Serialize` at the parameter.

use proc_macro2::TokenStream;
use quote::quote_spanned;
use syn::Ident;

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
