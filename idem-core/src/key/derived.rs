//! The key derived from a fn's parameters.

use super::{KeyHasher, KeyPart, hex};
use crate::fingerprint::Fingerprint;

/// The key `#[idempotent]` derives from a fn's parameters when no
/// `key = …` is given: the streaming SHA-256 of their serde form (the same
/// digest as the derived fingerprint, but a key, not a payload check).
/// It hashes into a [`RecordKey`](crate::key::RecordKey) as its 32 bytes: a
/// form pinned byte for byte, since a change would strand every live record
/// keyed by it.
///
/// ```
/// use idem::__private::ParamDigest;
/// let mut digest = ParamDigest::new();
/// digest.param(&"alice");
/// digest.param(&1200u32);
/// let derived = digest.finish().unwrap();
/// let key = idem::key::RecordKey::new(&"billing", &derived.key);
/// assert_eq!(key.to_hex(), "7de74dc23c574252ade2343eab2632dd21b0abeedd106f9b8e2c6d2ccf6b4b61");
/// // The key is the digest's 32 bytes, as a byte string.
/// let digest = derived.fingerprint.as_bytes();
/// assert_eq!(key, idem::key::RecordKey::new(&"billing", &digest[..]));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DerivedKey([u8; 32]);

/// Its first 8 hex digits, as `RecordKey`'s.
impl std::fmt::Debug for DerivedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DerivedKey({})", hex(&self.0[..4]))
    }
}

impl From<Fingerprint> for DerivedKey {
    fn from(digest: Fingerprint) -> Self {
        DerivedKey(*digest.as_bytes())
    }
}

impl KeyPart for DerivedKey {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bytes(&self.0);
    }
    fn describe(&self, out: &mut String) {
        out.push_str(&hex(&self.0[..4]));
    }
}
