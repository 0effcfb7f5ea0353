//! The `#[idempotent]` attribute of [idem](https://docs.rs/idemkit).
//!
//! Use it through the facade, `idemkit` (`idem::idempotent` in code). This
//! crate parses the attribute's options (`args`) and the item (`parse`),
//! resolves and checks them into a `Model` (`model`, with `return_type`,
//! `detach` and `digest`), collecting every error (`diagnostics`), and
//! expands the model in small generators (`expand`) into calls on
//! `::idem::__private`, spanned at the user's tokens (`spans`).

mod args;
mod detach;
mod diagnostics;
mod digest;
mod duration;
mod expand;
mod grpc;
mod model;
mod parse;
mod return_type;
mod site;
mod spans;

use proc_macro::TokenStream;

/// Makes an `async fn` idempotent: each call derives or extracts a key,
/// claims it in a store, runs the body only if the claim was won, stores
/// the `Ok` value and replays it to every duplicate until its TTL ends.
///
/// ```
/// use std::sync::LazyLock;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use idem::{Idempotency, MemoryStore, idempotent};
/// use serde::{Deserialize, Serialize};
///
/// static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
/// static CHARGES: AtomicU64 = AtomicU64::new(0);
///
/// #[derive(Serialize, Deserialize)]
/// struct ChargeRequest {
///     idempotency_key: String,
///     tenant: u64,
///     amount_cents: u64,
/// }
///
/// #[idempotent(
///     key = req.idempotency_key,        // else: a hash of the parameters not skipped
///     scope = ("payments", req.tenant), // else: module path and fn name
///     ttl = "24h",                      // how long the result is replayed
///     lease = "30s",                    // how long a crashed caller's claim blocks the key
///     wait = "2s",                      // how long a duplicate waits for a call in progress
///     store = IDEM,                     // else: the handle given to `idem::install`
///     errors = "release",               // or "replay", or a `fn(&E) -> bool`
/// )]
/// async fn charge(req: ChargeRequest) -> Result<u64, idem::Error> {
///     // Runs once per key: the charge id is stored and replayed.
///     Ok(CHARGES.fetch_add(req.amount_cents, Ordering::SeqCst))
/// }
///
/// #[tokio::main]
/// async fn main() {
///     let req = || ChargeRequest {
///         idempotency_key: "order-1".into(),
///         tenant: 7,
///         amount_cents: 1200,
///     };
///     let first = charge(req()).await.unwrap();
///     assert_eq!(charge(req()).await.unwrap(), first); // replayed
///     assert_eq!(CHARGES.load(Ordering::SeqCst), 1200); // charged once
/// }
/// ```
///
/// # Options
///
/// All optional, in any order, each at most once.
///
/// | option | form | default |
/// | --- | --- | --- |
/// | `key` | an expression of a type implementing `idem::KeyPart` (strings, integers, byte slices, `uuid::Uuid`, references and tuples of these), evaluated before the body with the parameters in scope | a SHA-256 of every parameter not skipped |
/// | `scope` | an expression implementing `KeyPart`, often a literal or a tuple (`("payments", req.tenant)`): the same key in two scopes is two records | `module_path!()::fn_name` |
/// | `ttl` | a duration literal (`"500ms"`, `"30s"`, `"15m"`, `"24h"`, `"7d"`, `"1h30m"`) or a `std::time::Duration` expression: how long a completed result is replayed | `"24h"` |
/// | `lease` | as `ttl`: how long an in-progress claim is held before another caller may take over; renewed while the body runs from a task the handle keeps on the call's runtime (one per runtime; see `Call::lease`), and a renewal that fails says so at once (a `WARN` in the call's span, `idem_renewal_failures_total`) | `"30s"`, or the `ttl` if shorter |
/// | `wait` | as `ttl`: how long a duplicate waits for a call in progress before `idem::Error::InProgress` | `"0s"` |
/// | `tombstone` | as `ttl`: how long a marker of the completed call (its fingerprint, no value) outlives the record, so a very late duplicate gets `idem::Error::Expired` (HTTP 410, queue `Ack`) instead of running again (see `Call::tombstone`) | none: after the `ttl` a duplicate runs as new |
/// | `store` | an `idem::Idempotency`, or something that derefs to one (`self.idem`, a `static` `LazyLock<Idempotency>`, an `Arc<Idempotency>`) | the handle set by `idem::install` |
/// | `fingerprint` | a `serde::Serialize` expression that must match when a key is reused, or `false` | a SHA-256 of every parameter not skipped |
/// | `skip(a, b)` | parameters left out of the derived key and fingerprint (pools, clients, handles); `self` is always left out | none |
/// | `errors` | `"release"` (an `Err` releases the key, a retry runs again), `"replay"` (the `Err` is stored and replayed; `E` must be serializable), or the path of a `fn(&E) -> bool` that says which errors to store | `"release"` |
/// | `mismatch` | `"refuse"`: another payload under a used key is `idem::Error::FingerprintMismatch` (a key names one request); or `"rerun"`, for a key that names a *resource* (an order's status, a user's profile): the payload of the key's last completed call replays without running, another runs and its record replaces the old one, atomically at the store. Either way calls for one key run one at a time (the claim is the lock). See `idem::Mismatch` and the guide `idem::guide::state_updates` | `"refuse"` |
/// | `detach` | a flag: the body runs on to completion on the runtime when the caller's future is dropped (client gone, timeout), and its result is stored; parameters must then be owned and `Send + 'static` (a borrowed one is a compile error at that parameter) | off |
/// | `version` | a `u32` (literal or constant) written into the fn's records; bump it when the `Ok` type keeps its shape but changes its meaning, so older records are refused (`CodecError::VersionChanged`) instead of misread. A change of shape needs no bump: the decoder refuses it | `0` |
/// | `reconcile` | the path of a fn taking the parameters by reference and returning `Result<Option<T>, E>`, asked on a takeover of a vanished holder (and only then) whether its effect happened: `Ok(Some(v))` is stored and returned without running the body, `Ok(None)` runs it | none: a takeover runs the body again |
/// | `crate` | the path of the `idem` crate, for crates that re-export it | `::idem` |
///
/// # Errors
///
/// idem's own errors reach the caller through `E: From<idem::Error>`; each
/// variant, when it happens and its HTTP status are listed on
/// [`idem::Error`](https://docs.rs/idemkit/latest/idem/enum.Error.html).
///
/// Works on free `async fn`s, methods taking `&self`, `&mut self` or
/// `self: Arc<Self>`, generic fns and fns in trait impls, including impls
/// written with `#[async_trait]` or `#[tonic::async_trait]` (a tonic
/// service's methods: the boxed future async-trait made of the method is
/// recognised, and its inner block wrapped); the signature the caller sees
/// is unchanged. The return type is `Result<T, E>` (or an
/// alias such as `anyhow::Result<T>`) with `T: Serialize +
/// DeserializeOwned` and `E: From<idem::Error>`.
///
/// Key and fingerprint are computed before the body runs. Every mistake
/// the types can show is a compile error at the offending token: a
/// non-async fn, a return type that is not a `Result`, an `Ok` type that is
/// not serializable or borrows, an error type without
/// `From<idem::Error>`, an unknown or repeated option, a malformed
/// duration, a `lease` longer than the `ttl`, a hashed parameter that is
/// not `Serialize`, a `skip` naming no parameter, a `key` that is not a
/// `KeyPart`, a `fingerprint` that is not `Serialize`, a `store` that is
/// not an `Idempotency`.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    let original = proc_macro2::TokenStream::from(item.clone());
    match expand::idempotent(args.into(), item.into()) {
        Ok(expanded) => expanded.into(),
        // The item is kept as written, so a mistake in the attribute is
        // not followed by errors at every caller of a missing function.
        Err(error) => {
            let error = error.into_compile_error();
            quote::quote!(#error #original).into()
        }
    }
}
