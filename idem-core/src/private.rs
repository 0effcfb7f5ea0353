//! What `#[idempotent]` expands to. Not public API: names here may change
//! in any release.
//!
//! The checks are traits, each with a person-readable
//! `#[diagnostic::on_unimplemented]`, called from the generated body with
//! the span of the user's own token (the `Ok` type, the error type, a
//! parameter, an option's value), so each mistake is one error, in the
//! right place, and the checks work in generic fns and impl blocks.
//!
//! The bounds on the user's types are where-clauses of [`run`] and [`bail`]
//! (not of a separate check, which rustc would report a second time at
//! the runtime's call), named with the user's tokens in the turbofish:
//! rustc points an unmet bound at the generic argument that fails it, and
//! reports one predicate at one span once. A trait with a blanket impl over
//! another trait shows its own message when the unmet bound is a
//! where-clause on the same type.

pub use core::concat;
pub use core::convert::From;
pub use core::module_path;
pub use core::option::Option;
pub use core::result::Result;
pub use core::time::Duration;

use core::ops::Deref;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::call::{Failed, Takeover};
pub use crate::call_site;
pub use crate::key::DerivedKey;
pub use crate::observe::SiteLabels;
use crate::{
    Call, CodecError, Digester, ErrorPolicy, Fingerprint, FingerprintError, KeyHasher, KeyPart,
};
pub use crate::{Error, Idempotency, installed, replay_errors};

// The attribute's registration in `testing::sites`: a static `Site` with
// the feature, nothing without it. The macro crate cannot see this crate's
// features, so it always emits `register_site!` and this chooses.
#[cfg(feature = "testing")]
pub use crate::__idem_register_site as register_site;
#[cfg(feature = "testing")]
pub use crate::testing::sites::{SITES, Setting as SiteSetting, Site, SiteParts};
#[cfg(feature = "testing")]
pub use linkme;

#[cfg(not(feature = "testing"))]
pub use crate::__idem_no_site as register_site;

/// Without the `testing` feature the attribute registers nothing.
#[cfg(not(feature = "testing"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __idem_no_site {
    ($($tokens:tt)*) => {};
}

/// The derived key and fingerprint: one digest part per parameter. The
/// first failure is kept and reported by `finish`, so each parameter is one
/// statement carrying its own span.
///
/// ```
/// use idem::__private::ParamDigest;
/// let mut digest = ParamDigest::new();
/// digest.param(&"alice");
/// let derived = digest.finish().unwrap();
/// assert_eq!(derived.fingerprint, idem::fingerprint::Fingerprint::of(&"alice").unwrap());
/// ```
pub struct ParamDigest {
    digester: Digester,
    failed: Option<FingerprintError>,
}

impl ParamDigest {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self {
            digester: Digester::new(),
            failed: None,
        }
    }

    pub fn param<T: Serialize + ?Sized>(&mut self, value: &T) {
        if self.failed.is_none() {
            self.failed = self.digester.part(value).err();
        }
    }

    pub fn finish(self) -> Result<Derived, Error> {
        match self.failed {
            None => {
                let fingerprint = self.digester.finish();
                Ok(Derived {
                    key: DerivedKey::from(fingerprint),
                    fingerprint,
                })
            }
            Some(err) => Err(Error::Codec(err.into())),
        }
    }
}

/// What `ParamDigest` derives from the parameters: the key when no
/// `key = …` is given, and the fingerprint when no `fingerprint = …` is.
pub struct Derived {
    pub key: DerivedKey,
    pub fingerprint: Fingerprint,
}

/// What `store = …` accepts: an `Idempotency`, or anything that derefs to
/// one (`&Idempotency`, `Arc<Idempotency>`, `LazyLock<Idempotency>`, …).
#[diagnostic::on_unimplemented(
    message = "`store = …` must name an `idem::Idempotency`, but this is `{Self}`",
    label = "not an `Idempotency` handle, nor something that derefs to one",
    note = "pass an `idem::Idempotency` (`store = self.idem`), or something that derefs to one: `&Idempotency`, `Arc<Idempotency>`, a `static` `LazyLock<Idempotency>`"
)]
pub trait AsHandle {
    fn as_handle(&self) -> &Idempotency;
}

impl AsHandle for Idempotency {
    fn as_handle(&self) -> &Idempotency {
        self
    }
}

impl<T> AsHandle for T
where
    T: Deref + ?Sized,
    T::Target: AsHandle,
{
    fn as_handle(&self) -> &Idempotency {
        (**self).as_handle()
    }
}

/// `store = …`, as the `Idempotency` the call runs on.
pub fn idempotency<H: AsHandle + ?Sized>(handle: &H) -> &Idempotency {
    handle.as_handle()
}

/// `key = …` and `scope = …`, checked where they are written (`KeyPart`
/// carries its own message). The runtime gets a `KeyRef`, which is always
/// a `KeyPart`, so the check is not reported again at the runtime's call.
pub fn key_part<K: KeyPart + ?Sized>(key: &K) -> KeyRef<'_, K> {
    KeyRef {
        key,
        write: K::write_key,
        describe: K::describe,
    }
}

pub struct KeyRef<'a, K: ?Sized> {
    key: &'a K,
    write: fn(&K, &mut KeyHasher),
    describe: fn(&K, &mut String),
}

impl<K: ?Sized> KeyPart for KeyRef<'_, K> {
    fn write_key(&self, hasher: &mut KeyHasher) {
        (self.write)(self.key, hasher)
    }
    fn describe(&self, out: &mut String) {
        (self.describe)(self.key, out)
    }
}

/// What `fingerprint = …` accepts.
#[diagnostic::on_unimplemented(
    message = "`fingerprint = …` must be serializable, but `{Self}` does not implement `serde::Serialize`",
    label = "the fingerprint is a hash of this value's serde form",
    note = "fingerprint a serializable value (the request, a tuple of fields), derive `serde::Serialize` on this type, or write `fingerprint = false`"
)]
pub trait FingerprintPayload: Serialize {}

#[diagnostic::do_not_recommend]
impl<T: Serialize + ?Sized> FingerprintPayload for T {}

/// The fingerprint of `fingerprint = …`, computed before the body runs.
pub fn fingerprint_of<T: FingerprintPayload + ?Sized>(payload: &T) -> Result<Fingerprint, Error> {
    Fingerprint::of(payload).map_err(|err| Error::Codec(err.into()))
}

/// The return type of an `#[idempotent]` fn: `Result<T, E>`, under any
/// alias (`anyhow::Result<T>`, `io::Result<T>`, a crate's own).
#[diagnostic::on_unimplemented(
    message = "an `#[idempotent]` fn must return `Result<T, E>`, not `{Self}`",
    label = "not a `Result`",
    note = "the `Ok` value is stored and replayed to duplicates, and `E: From<idem::Error>` carries idem's own errors; return e.g. `Result<{Self}, idem::Error>` or `anyhow::Result<{Self}>`"
)]
pub trait IdempotentReturn: Sized {
    type Ok;
    type Err;
    fn into_result(self) -> Result<Self::Ok, Self::Err>;
    fn from_result(result: Result<Self::Ok, Self::Err>) -> Self;
}

impl<T, E> IdempotentReturn for Result<T, E> {
    type Ok = T;
    type Err = E;
    fn into_result(self) -> Self {
        self
    }
    fn from_result(result: Self) -> Self {
        result
    }
}

/// The `Ok` type is serialized into the store.
#[diagnostic::on_unimplemented(
    message = "the `Ok` type `{Self}` cannot be stored: it does not implement `serde::Serialize`",
    label = "the `Ok` value of an `#[idempotent]` fn is serialized and stored for replay",
    note = "derive it: `#[derive(serde::Serialize, serde::Deserialize)]`, or return a type that is serializable"
)]
pub trait StoredOk: Serialize {}

#[diagnostic::do_not_recommend]
impl<T: Serialize> StoredOk for T {}

/// The `Ok` type is decoded from the store for every duplicate.
#[diagnostic::on_unimplemented(
    message = "the `Ok` type `{Self}` cannot be replayed: it does not implement `serde::de::DeserializeOwned`",
    label = "every duplicate call decodes the `Ok` value from the store",
    note = "derive `serde::Deserialize` on it; a type that borrows (`&str`, `Cow<'a, str>`) cannot be decoded from the store: return an owned type such as `String`"
)]
pub trait ReplayedOk: DeserializeOwned {}

#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned> ReplayedOk for T {}

/// The error type carries idem's own errors.
#[diagnostic::on_unimplemented(
    message = "the error type `{Self}` cannot carry idem's errors: it does not implement `From<idem::Error>`",
    label = "an `#[idempotent]` fn returns idem's own errors (key in progress, store down, …) through this type",
    note = "add `impl From<idem::Error> for {Self}` (or a `#[from] idem::Error` variant with thiserror), or return `idem::Error` or `anyhow::Error`"
)]
pub trait IdempotentError: From<Error> {}

#[diagnostic::do_not_recommend]
impl<E: From<Error>> IdempotentError for E {}

/// `errors = "replay"` or `errors = path` stores the error.
#[diagnostic::on_unimplemented(
    message = "this error policy stores `{Self}` for replay, but `{Self}` does not implement `serde::Serialize`",
    label = "stores the error and replays it to duplicates, so the error type must be serializable",
    note = "derive `serde::Serialize` and `serde::Deserialize` on the error type, or leave `errors` out (\"release\": an `Err` releases the key, so a retry runs the body again)"
)]
pub trait StoredError: Serialize {}

#[diagnostic::do_not_recommend]
impl<E: Serialize> StoredError for E {}

/// `errors = "replay"` or `errors = path` decodes the error for duplicates.
#[diagnostic::on_unimplemented(
    message = "this error policy replays `{Self}` to duplicates, but `{Self}` does not implement `serde::de::DeserializeOwned`",
    label = "stores the error and replays it to duplicates, so the error type must be deserializable",
    note = "derive `serde::Deserialize` on the error type, or leave `errors` out (\"release\": an `Err` releases the key, so a retry runs the body again)"
)]
pub trait ReplayedError: DeserializeOwned {}

#[diagnostic::do_not_recommend]
impl<E: DeserializeOwned> ReplayedError for E {}

/// A parameter hashed into the derived key or fingerprint. The macro
/// declares, per parameter, a trait with this one as supertrait, whose
/// message names the parameter.
pub trait Hashed: Serialize {}

#[diagnostic::do_not_recommend]
impl<T: Serialize + ?Sized> Hashed for T {}

/// The error type, checked where it is written (`E: From<idem::Error>`):
/// the conversion travels as a value, so the runtime's future asks nothing
/// of `E` and an unmet bound is not reported again where it is awaited.
pub struct ErrorType<E> {
    from_idem: fn(Error) -> E,
}

pub fn error_type<E: IdempotentError>() -> ErrorType<E> {
    ErrorType { from_idem: E::from }
}

/// Runs the body of an `#[idempotent]` fn. The macro names `R` and `T`
/// with the user's tokens and spans the call there, so an unmet bound is
/// reported at the user's type, once. An async fn's future carries its
/// where-clauses, so this one has none on `E` (see [`ErrorType`]).
pub async fn run<R, T, E, P, F, Fut>(call: Call<P>, errors: ErrorType<E>, body: F) -> R
where
    R: IdempotentReturn<Ok = T, Err = E>,
    T: StoredOk + ReplayedOk,
    P: ErrorPolicy<E>,
    F: FnOnce() -> Fut,
    Fut: Future<Output = R>,
{
    let ran = call
        .execute(move || async move { body().await.into_result() })
        .await;
    R::from_result(
        ran.result
            .map_err(|failed| failed.into_error(errors.from_idem)),
    )
}

/// As [`run`], for a fn with `reconcile = …`: the body is handed a
/// [`Takeover`] when the call takes over a vanished holder's claim, and
/// asks the reconcile first.
pub async fn run_reconciling<R, T, E, P, F, Fut>(call: Call<P>, errors: ErrorType<E>, body: F) -> R
where
    R: IdempotentReturn<Ok = T, Err = E>,
    T: StoredOk + ReplayedOk,
    P: ErrorPolicy<E>,
    F: FnOnce(Option<Takeover>) -> Fut,
    Fut: Future<Output = R>,
{
    let ran = call
        .execute_self_reconciling(move |takeover| async move { body(takeover).await.into_result() })
        .await;
    R::from_result(
        ran.result
            .map_err(|failed| failed.into_error(errors.from_idem)),
    )
}

/// As [`run_detached`], for a fn with `reconcile = …`.
pub async fn run_detached_reconciling<R, T, E, P, F, Fut>(
    call: Call<P>,
    errors: ErrorType<E>,
    body: F,
) -> R
where
    R: IdempotentReturn<Ok = T, Err = E> + Send + 'static,
    T: StoredOk + ReplayedOk + Send + 'static,
    E: Send + 'static,
    P: ErrorPolicy<E> + Send + 'static,
    F: FnOnce(Option<Takeover>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
{
    let from_idem = errors.from_idem;
    let idem = call.idem.clone();
    match idem.detached(run_reconciling(call, errors, body)).await {
        Ok(returned) => returned,
        Err(error) => R::from_result(Err(from_idem(error))),
    }
}

/// `reconcile = path`: what the path returns, called with the fn's
/// parameters by reference, must be a future of `Result<Option<T>, E>`.
#[diagnostic::on_unimplemented(
    message = "`reconcile = …` must name an async fn returning `Result<Option<{T}>, {E}>`, taking the fn's parameters by reference",
    label = "this reconcile does not answer `Result<Option<{T}>, {E}>`",
    note = "a reconcile says whether a vanished holder's effect happened: `Ok(Some(value))` (stored and returned), `Ok(None)` (run the body) or `Err(error)`; e.g. `async fn reconcile(order: &Order) -> Result<Option<{T}>, {E}>`"
)]
pub trait ReconcileAnswer<T, E>: Future<Output = Result<Option<T>, E>> {}

#[diagnostic::do_not_recommend]
impl<T, E, F: Future<Output = Result<Option<T>, E>>> ReconcileAnswer<T, E> for F {}

/// The reconcile's future, checked where the user wrote `reconcile = …`.
pub fn reconcile_answer<T, E, F: ReconcileAnswer<T, E>>(answer: F) -> F {
    answer
}

/// As [`run`], on a task of its own (`#[idempotent(detach)]`): the body
/// runs on to completion when the caller's future is dropped.
pub async fn run_detached<R, T, E, P, F, Fut>(call: Call<P>, errors: ErrorType<E>, body: F) -> R
where
    R: IdempotentReturn<Ok = T, Err = E> + Send + 'static,
    T: StoredOk + ReplayedOk + Send + 'static,
    E: Send + 'static,
    P: ErrorPolicy<E> + Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
{
    let from_idem = errors.from_idem;
    let idem = call.idem.clone();
    match idem.detached(run(call, errors, body)).await {
        Ok(returned) => returned,
        Err(error) => R::from_result(Err(from_idem(error))),
    }
}

/// idem's own error, before the body runs, as the fn's return type.
pub fn bail<R: IdempotentReturn>(errors: ErrorType<R::Err>, error: Error) -> R {
    R::from_result(Err((errors.from_idem)(error)))
}

/// An error policy that stores errors, made where `E: StoredError + ReplayedError` is
/// checked (at the user's `errors = …`), so the runtime asks nothing more
/// of `E` and a missing `Serialize` is reported once.
pub struct CheckedPolicy<E> {
    stores: fn(&E) -> bool,
    encode: fn(&E, usize) -> Result<Vec<u8>, CodecError>,
    decode: fn(&[u8]) -> Result<E, CodecError>,
}

impl<E> ErrorPolicy<E> for CheckedPolicy<E> {
    fn stores(&self, error: &E) -> bool {
        (self.stores)(error)
    }
    fn record(&self, error: &E, limit: usize) -> Option<Result<Vec<u8>, CodecError>> {
        (self.stores)(error).then(|| (self.encode)(error, limit))
    }
    fn decode(&self, record: &[u8]) -> Result<E, CodecError> {
        (self.decode)(record)
    }
}

/// `errors = "replay"`.
pub fn replay<E: StoredError + ReplayedError>() -> CheckedPolicy<E> {
    store_if(|_| true)
}

/// `errors = path`: `path` is a `fn(&E) -> bool`.
pub fn store_if<E: StoredError + ReplayedError>(predicate: fn(&E) -> bool) -> CheckedPolicy<E> {
    CheckedPolicy {
        stores: predicate,
        encode: crate::policy::encode_error::<E>,
        decode: crate::policy::decode_error::<E>,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, LazyLock};

    use super::*;

    struct Memory;

    #[async_trait::async_trait]
    impl crate::Store for Memory {
        async fn claim(
            &self,
            _: &crate::RecordKey,
            _: &crate::Claim,
        ) -> Result<crate::ClaimOutcome, crate::StoreError> {
            unimplemented!()
        }
        async fn complete(
            &self,
            _: &crate::RecordKey,
            _: crate::Token,
            _: &[u8],
            _: crate::store::Retention,
        ) -> Result<crate::Fence, crate::StoreError> {
            unimplemented!()
        }
        async fn release(
            &self,
            _: &crate::RecordKey,
            _: crate::Token,
        ) -> Result<crate::Fence, crate::StoreError> {
            unimplemented!()
        }
        async fn renew(
            &self,
            _: &crate::RecordKey,
            _: crate::Token,
            _: Duration,
        ) -> Result<crate::Fence, crate::StoreError> {
            unimplemented!()
        }
        async fn forget(&self, _: &crate::RecordKey) -> Result<(), crate::StoreError> {
            unimplemented!()
        }
    }

    static STATIC: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(Memory));

    #[test]
    fn handles_through_deref() {
        let idem = Idempotency::new(Memory);
        let arc = Arc::new(idem.clone());
        let by_ref = &idem;
        let _: &Idempotency = idempotency(&idem);
        let _: &Idempotency = idempotency(&arc);
        let _: &Idempotency = idempotency(&by_ref);
        let _: &Idempotency = idempotency(&STATIC);
        let _: &Idempotency = idempotency(&Box::new(arc));
    }
}
