//! Streaming SHA-256 over the serde form of values.
//!
//! No intermediate JSON: the serializer feeds the hash directly. Every part
//! is tagged and length-prefixed, and map entries are hashed one by one and
//! combined in sorted order, so a `HashMap`'s iteration order cannot change
//! the result.

use std::fmt;

use serde::ser::{self, Serialize};
use sha2::{Digest as _, Sha256};

mod serializer;

use serializer::HashSerializer;

/// The SHA-256 of a payload's serde form: what must match when a key is
/// reused.
///
/// ```
/// use std::collections::HashMap;
/// use idem_contract::fingerprint::Fingerprint;
///
/// let a: HashMap<&str, u32> = [("x", 1), ("y", 2)].into();
/// let b: HashMap<&str, u32> = [("y", 2), ("x", 1)].into();
/// assert_eq!(Fingerprint::of(&a).unwrap(), Fingerprint::of(&b).unwrap());
/// assert_ne!(
///     Fingerprint::of(&("ab", "c")).unwrap(),
///     Fingerprint::of(&("a", "bc")).unwrap(),
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a call made with `fingerprint = false`: it matches
    /// every other fingerprint.
    pub const NONE: Fingerprint = Fingerprint([0; 32]);

    /// Hashes one value.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Self, FingerprintError> {
        let mut digest = Digester::new();
        digest.part(value)?;
        Ok(digest.finish())
    }

    /// Rebuilds a fingerprint from the 32 bytes a store kept.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 32 bytes of the fingerprint.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Whether a call with this fingerprint may reuse a record made with
    /// `other`: equal, or either side disabled fingerprinting.
    pub fn matches(&self, other: &Fingerprint) -> bool {
        *self == Self::NONE || *other == Self::NONE || self == other
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", crate::key::hex(&self.0[..4]))
    }
}

/// Hashes several values in order, as one fingerprint. The derived key and
/// fingerprint of `#[idempotent]` are built this way, one part per
/// parameter.
///
/// ```
/// use idem_contract::fingerprint::{Digester, Fingerprint};
///
/// let mut d = Digester::new();
/// d.part(&"alice").unwrap();
/// d.part(&42u32).unwrap();
/// let two_parts = d.finish();
/// assert_ne!(two_parts, Fingerprint::of(&"alice").unwrap());
/// ```
pub struct Digester {
    sha: Sha256,
}

/// Shows nothing of the parts hashed so far.
impl fmt::Debug for Digester {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Digester").finish_non_exhaustive()
    }
}

impl Default for Digester {
    fn default() -> Self {
        Self::new()
    }
}

impl Digester {
    /// Starts an empty digest.
    pub fn new() -> Self {
        let mut sha = Sha256::new();
        sha.update(b"idem/fingerprint/v1\0");
        Self { sha }
    }

    /// Adds one value.
    pub fn part<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), FingerprintError> {
        value.serialize(HashSerializer { sha: &mut self.sha })
    }

    /// The fingerprint of all parts added.
    pub fn finish(self) -> Fingerprint {
        Fingerprint(self.sha.finalize().into())
    }
}

/// A value's `Serialize` implementation failed while it was being hashed.
#[derive(Debug, thiserror::Error)]
#[error("cannot fingerprint the value: {0}")]
pub struct FingerprintError(String);

impl ser::Error for FingerprintError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;

    use super::*;

    #[derive(Serialize)]
    struct Order {
        id: String,
        lines: Vec<(String, u32)>,
        meta: HashMap<String, Option<i64>>,
    }

    #[test]
    fn map_order_does_not_matter() {
        let mut a = HashMap::new();
        let mut b = HashMap::new();
        for i in 0..100 {
            a.insert(format!("k{i}"), Some(i));
        }
        for i in (0..100).rev() {
            b.insert(format!("k{i}"), Some(i));
        }
        let order = |meta| Order {
            id: "o".into(),
            lines: vec![("x".into(), 1)],
            meta,
        };
        assert_eq!(
            Fingerprint::of(&order(a)).unwrap(),
            Fingerprint::of(&order(b)).unwrap()
        );
    }

    #[test]
    fn hash_map_and_btree_map_agree() {
        let h: HashMap<u8, u8> = [(1, 2), (3, 4)].into();
        let b: BTreeMap<u8, u8> = [(1, 2), (3, 4)].into();
        assert_eq!(Fingerprint::of(&h).unwrap(), Fingerprint::of(&b).unwrap());
    }

    #[test]
    fn nesting_is_unambiguous() {
        let a: (Vec<u8>, Vec<u8>) = (vec![1, 2], vec![3]);
        let b: (Vec<u8>, Vec<u8>) = (vec![1], vec![2, 3]);
        assert_ne!(Fingerprint::of(&a).unwrap(), Fingerprint::of(&b).unwrap());
        assert_ne!(
            Fingerprint::of(&Some(())).unwrap(),
            Fingerprint::of(&()).unwrap()
        );
        assert_ne!(
            Fingerprint::of(&0u64).unwrap(),
            Fingerprint::of(&0i64).unwrap()
        );
    }

    #[test]
    fn none_matches_everything() {
        let f = Fingerprint::of(&1).unwrap();
        assert!(Fingerprint::NONE.matches(&f));
        assert!(f.matches(&Fingerprint::NONE));
        assert!(!f.matches(&Fingerprint::of(&2).unwrap()));
    }
}
