//! What `#[idempotent]` expands to. Not public API: names here may change
//! in any release.

pub use core::concat;
pub use core::convert::From;
pub use core::module_path;
pub use core::result::Result;
pub use core::time::Duration;

use serde::Serialize;

use crate::{Digester, Error, Fingerprint, FingerprintError, KeyPart};
pub use crate::{Idempotency, installed, replay_errors, store_errors_if};

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
/// one.
#[diagnostic::on_unimplemented(
    message = "`store = …` must name an `idem::Idempotency`, not `{Self}`",
    label = "not an idempotency handle",
    note = "pass an `idem::Idempotency`, or something that derefs to one: `Arc<Idempotency>`, `LazyLock<Idempotency>`, `&Idempotency`"
)]
pub trait AsHandle {
    fn as_handle(&self) -> &Idempotency;
}

impl AsHandle for Idempotency {
    fn as_handle(&self) -> &Idempotency {
        self
    }
}

impl<T: core::ops::Deref<Target = Idempotency>> AsHandle for T {
    fn as_handle(&self) -> &Idempotency {
        self
    }
}

pub fn handle<H: AsHandle + ?Sized>(handle: &H) -> &Idempotency {
    handle.as_handle()
}

pub fn key_part<K: KeyPart + ?Sized>(key: &K) -> &K {
    key
}

pub fn fingerprint_of<T: Serialize + ?Sized>(payload: &T) -> &T {
    payload
}

/// The return type of an `#[idempotent]` fn.
#[diagnostic::on_unimplemented(
    message = "an `#[idempotent]` fn must return `Result<T, E>`, not `{Self}`",
    label = "not a `Result`",
    note = "the `Ok` value is stored and replayed to duplicates; `E: From<idem::Error>` carries idem's own errors"
)]
pub trait IdempotentReturn {}

impl<T, E> IdempotentReturn for Result<T, E> {}

pub fn assert_return<R: IdempotentReturn>() {}
