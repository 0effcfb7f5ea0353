//! The derived key and fingerprint of the parameters not skipped.

use serde::Serialize;

use crate::key::DerivedKey;
use crate::{Digester, Error, Fingerprint, FingerprintError};

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

impl std::fmt::Debug for ParamDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamDigest")
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
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
#[derive(Debug)]
pub struct Derived {
    pub key: DerivedKey,
    pub fingerprint: Fingerprint,
}
