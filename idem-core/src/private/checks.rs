//! The checks on the user's tokens: one trait each, with a message
//! written for a person (`#[diagnostic::on_unimplemented]`), and the
//! functions the expansion calls at the user's span to apply them.

use core::ops::Deref;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Fingerprint, Idempotency, KeyHasher, KeyPart};

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

/// The key as the store would describe it; never its bytes.
impl<K: ?Sized> std::fmt::Debug for KeyRef<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut described = String::new();
        (self.describe)(self.key, &mut described);
        f.debug_tuple("KeyRef").field(&described).finish()
    }
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, LazyLock};

    use std::time::Duration;

    use super::*;
    use crate::Idempotency;

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
