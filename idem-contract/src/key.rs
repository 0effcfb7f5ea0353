//! Idempotency keys and scopes, hashed: [`RecordKey`] (what a store is
//! given), [`ShortKey`] (what logs and errors show) and [`KeyHasher`] (what
//! a [`KeyPart`] writes into).

use std::fmt;

use sha2::{Digest as _, Sha256};

pub(crate) mod part;

pub(crate) use part::KeyPart;

/// The streaming hasher a [`KeyPart`] writes into.
///
/// ```
/// use idem_contract::KeyPart;
/// use idem_contract::key::KeyHasher;
///
/// struct OrderId(u64);
/// impl KeyPart for OrderId {
///     fn write_key(&self, hasher: &mut KeyHasher) {
///         hasher.write_u128(u128::from(self.0));
///     }
///     fn describe(&self, out: &mut String) {
///         out.push_str(&self.0.to_string());
///     }
/// }
/// ```
pub struct KeyHasher {
    sha: Sha256,
    // Whether any part carried a value: an empty key is refused.
    filled: bool,
}

/// Shows whether a part carried a value, never what was hashed.
impl fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyHasher")
            .field("filled", &self.filled)
            .finish_non_exhaustive()
    }
}

const TAG_BYTES: u8 = 1;
const TAG_UINT: u8 = 2;
const TAG_INT: u8 = 3;
const TAG_TUPLE: u8 = 4;
const TAG_BOOL: u8 = 5;

impl KeyHasher {
    fn new(domain: &[u8]) -> Self {
        let mut sha = Sha256::new();
        sha.update(domain);
        Self { sha, filled: false }
    }

    /// Writes a length-prefixed byte string (strings are written as UTF-8).
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.filled |= !bytes.is_empty();
        self.sha.update([TAG_BYTES]);
        self.sha.update((bytes.len() as u64).to_le_bytes());
        self.sha.update(bytes);
    }

    /// Writes an unsigned integer, widened so its width does not matter.
    pub fn write_u128(&mut self, value: u128) {
        self.filled = true;
        self.sha.update([TAG_UINT]);
        self.sha.update(value.to_le_bytes());
    }

    /// Writes a signed integer, widened so its width does not matter.
    /// Non-negative values hash as the unsigned integer of the same value.
    pub fn write_i128(&mut self, value: i128) {
        match u128::try_from(value) {
            Ok(unsigned) => self.write_u128(unsigned),
            Err(_) => {
                self.filled = true;
                self.sha.update([TAG_INT]);
                self.sha.update(value.to_le_bytes());
            }
        }
    }

    /// Writes a boolean.
    pub fn write_bool(&mut self, value: bool) {
        self.filled = true;
        self.sha.update([TAG_BOOL, u8::from(value)]);
    }

    pub(crate) fn write_tuple_header(&mut self, len: usize) {
        self.sha.update([TAG_TUPLE, len as u8]);
    }
}

/// The hashed, fixed-length identity of one record: scope and key together.
///
/// Stores keep only this, so any key bytes are safe and no raw key is
/// stored.
///
/// ```
/// use idem_contract::key::RecordKey;
///
/// let key = RecordKey::new(&"payments", &"order-1");
/// assert_eq!(key.as_bytes().len(), 32);
/// assert_eq!(key.to_hex().len(), 64);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordKey([u8; 32]);

/// Hashes the first 8 of the 32 bytes: they are a SHA-256 digest's, as
/// uniform as all of them, and one `write_u64` costs a seeded hasher a
/// fraction of hashing 32 bytes. Equal keys still hash equal.
impl std::hash::Hash for RecordKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let [a, b, c, d, e, f, g, h, ..] = self.0;
        state.write_u64(u64::from_le_bytes([a, b, c, d, e, f, g, h]));
    }
}

impl RecordKey {
    /// Hashes a scope and a key into a record key.
    pub fn new<S: KeyPart + ?Sized, K: KeyPart + ?Sized>(scope: &S, key: &K) -> Self {
        Self::checked(scope, key).0
    }

    /// The record key, and whether `key` carried any value at all (the
    /// runtime refuses an empty key). For `idem-core`; not API.
    #[doc(hidden)]
    pub fn checked<S: KeyPart + ?Sized, K: KeyPart + ?Sized>(scope: &S, key: &K) -> (Self, bool) {
        let mut hasher = KeyHasher::new(b"idem/record-key/v1\0");
        scope.write_key(&mut hasher);
        hasher.write_tuple_header(0xFF);
        hasher.filled = false;
        key.write_key(&mut hasher);
        (Self(hasher.sha.finalize().into()), hasher.filled)
    }

    /// Rebuilds a record key from the 32 bytes a store kept.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 32 bytes of the key.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// The first 8 hex digits: enough to tell keys apart in logs, too few to
    /// recover anything.
    pub fn short(&self) -> ShortKey {
        ShortKey(*self)
    }

    /// The identity of a step of this key's call, from its name (the call
    /// itself is the store's key; this only tells its steps apart).
    pub(crate) fn step_id<N: KeyPart + ?Sized>(name: &N) -> [u8; 16] {
        let mut hasher = KeyHasher::new(b"idem/step/v1\0");
        name.write_key(&mut hasher);
        let digest: [u8; 32] = hasher.sha.finalize().into();
        let mut id = [0; 16];
        id.copy_from_slice(&digest[..16]);
        id
    }

    /// A key derived from this one and a name, for a downstream call
    /// (`idem::child_key`). For `idem-core`; not API.
    #[doc(hidden)]
    pub fn child(&self, name: &str) -> String {
        let mut hasher = KeyHasher::new(b"idem/child-key/v1\0");
        hasher.write_bytes(&self.0);
        hasher.write_bytes(name.as_bytes());
        hex(&hasher.sha.finalize())
    }
}

impl fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordKey({})", self.short())
    }
}

/// The short, displayable form of a [`RecordKey`] (8 hex digits).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ShortKey(RecordKey);

impl fmt::Display for ShortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0.0[..4]))
    }
}

impl fmt::Debug for ShortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xF)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_length_prefixed() {
        assert_ne!(
            RecordKey::new(&"s", &("ab", "c")),
            RecordKey::new(&"s", &("a", "bc"))
        );
    }

    #[test]
    fn scope_and_key_do_not_run_together() {
        assert_ne!(RecordKey::new(&"ab", &"c"), RecordKey::new(&"a", &"bc"));
        assert_ne!(RecordKey::new(&"a", &"b"), RecordKey::new(&"b", &"a"));
    }

    #[test]
    fn integer_width_does_not_matter_but_sign_does() {
        assert_eq!(RecordKey::new(&"s", &7u8), RecordKey::new(&"s", &7i64));
        assert_ne!(RecordKey::new(&"s", &-7i64), RecordKey::new(&"s", &7u64));
        assert_ne!(RecordKey::new(&"s", &7u64), RecordKey::new(&"s", &"7"));
    }

    #[test]
    fn empty_keys_are_detected() {
        assert!(!RecordKey::checked(&"s", &"").1);
        assert!(!RecordKey::checked(&"s", &("", "")).1);
        assert!(RecordKey::checked(&"", &0u8).1);
        assert!(RecordKey::checked(&"s", &("", "x")).1);
    }

    #[test]
    fn scope_description_joins_tuple_parts() {
        let mut out = String::new();
        ("payments", 42u64).describe(&mut out);
        assert_eq!(out, "payments/42");
    }
}
