//! What `#[idempotent]` expands to. Not public API: names here may change
//! in any release.
//!
//! The checks are traits, each with a person-readable
//! `#[diagnostic::on_unimplemented]`, called from the generated body with
//! the span of the user's own token (the `Ok` type, the error type, a
//! parameter, an option's value), so each mistake is one error, in the
//! right place, and the checks work in generic fns and impl blocks.
//!
//! Each check trait also converts a value into its `Checked` type and back
//! (the identity when the check holds). The generated code hands the
//! runtime only `Checked` types: when a check fails, its `Checked` type is
//! unknown to the compiler, so the runtime's own bounds on it are not
//! reported a second time.

pub use core::concat;
pub use core::convert::From;
pub use core::module_path;
pub use core::result::Result;
pub use core::time::Duration;
pub use serde::Serialize;

use core::ops::Deref;

use serde::de::DeserializeOwned;

use crate::{Digester, Fingerprint, FingerprintError, KeyPart};
pub use crate::{Error, Idempotency, installed, replay_errors, store_errors_if};

/// The derived key and fingerprint: one digest part per parameter. The
/// first failure is kept and reported by `finish`, so each parameter is one
/// statement carrying its own span.
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

    pub fn finish(self) -> Result<Fingerprint, Error> {
        match self.failed {
            None => Ok(self.digester.finish()),
            Some(err) => Err(Error::Codec(err.into())),
        }
    }
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
    T: Deref,
    T::Target: AsHandle,
{
    fn as_handle(&self) -> &Idempotency {
        (**self).as_handle()
    }
}

pub fn handle<H: AsHandle + ?Sized>(handle: &H) -> &Idempotency {
    handle.as_handle()
}

/// `key = …` and `scope = …`: `KeyPart` carries its own message.
pub fn key_part<K: KeyPart + ?Sized>(key: &K) -> &K {
    key
}

/// What `fingerprint = …` accepts.
#[diagnostic::on_unimplemented(
    message = "`fingerprint = …` must be serializable, but `{Self}` does not implement `serde::Serialize`",
    label = "the fingerprint is a hash of this value's serde form",
    note = "fingerprint a serializable value (the request, a tuple of fields), derive `serde::Serialize` on this type, or write `fingerprint = false`"
)]
pub trait FingerprintPayload: Serialize {}

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

/// The conversion shared by the check traits below: the identity, from
/// `Self` to the checked type and back.
macro_rules! check_trait {
    (
        $(#[$attr:meta])*
        trait $name:ident: $($bound:tt)+
    ) => {
        $(#[$attr])*
        pub trait $name: Sized {
            type Checked;
            fn into_checked(self) -> Self::Checked;
            fn from_checked(checked: Self::Checked) -> Self;
        }

        impl<T: $($bound)+> $name for T {
            type Checked = T;
            fn into_checked(self) -> T {
                self
            }
            fn from_checked(checked: T) -> T {
                checked
            }
        }
    };
}

check_trait! {
    /// The `Ok` type is serialized into the store.
    #[diagnostic::on_unimplemented(
        message = "the `Ok` type `{Self}` cannot be stored: it does not implement `serde::Serialize`",
        label = "the `Ok` value of an `#[idempotent]` fn is serialized and stored for replay",
        note = "derive it: `#[derive(serde::Serialize, serde::Deserialize)]`, or return a type that is serializable"
    )]
    trait StoredOk: Serialize
}

check_trait! {
    /// The `Ok` type is decoded from the store for every duplicate.
    #[diagnostic::on_unimplemented(
        message = "the `Ok` type `{Self}` cannot be replayed: it does not implement `serde::de::DeserializeOwned`",
        label = "every duplicate call decodes the `Ok` value from the store",
        note = "derive `serde::Deserialize` on it; a type that borrows (`&str`, `Cow<'a, str>`) cannot be decoded from the store: return an owned type such as `String`"
    )]
    trait ReplayedOk: DeserializeOwned
}

check_trait! {
    /// The error type carries idem's own errors.
    #[diagnostic::on_unimplemented(
        message = "the error type `{Self}` cannot carry idem's errors: it does not implement `From<idem::Error>`",
        label = "an `#[idempotent]` fn returns idem's own errors (key in progress, store down, …) through this type",
        note = "add `impl From<idem::Error> for {Self}` (or a `#[from] idem::Error` variant with thiserror), or return `idem::Error` or `anyhow::Error`"
    )]
    trait IdempotentError: From<Error>
}

check_trait! {
    /// `errors = "replay"` or `errors = path` stores the error.
    #[diagnostic::on_unimplemented(
        message = "this error policy stores `{Self}` for replay, but it is not serializable",
        label = "stores the error and replays it to duplicates, so the error type must implement `serde::Serialize` and `serde::de::DeserializeOwned`",
        note = "derive `serde::Serialize` and `serde::Deserialize` on the error type, or leave `errors` out (\"release\": an `Err` releases the key, so a retry runs the body again)"
    )]
    trait ReplayedError: Serialize + DeserializeOwned
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
            _: Duration,
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
    }

    static STATIC: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(Memory));

    #[test]
    fn handles_through_deref() {
        let idem = Idempotency::new(Memory);
        let arc = Arc::new(idem.clone());
        let by_ref = &idem;
        let _: &Idempotency = handle(&idem);
        let _: &Idempotency = handle(&arc);
        let _: &Idempotency = handle(&by_ref);
        let _: &Idempotency = handle(&STATIC);
        let _: &Idempotency = handle(&Box::new(arc));
    }
}
