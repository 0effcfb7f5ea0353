//! Streaming SHA-256 over the serde form of values.
//!
//! No intermediate JSON: the serializer feeds the hash directly. Every part
//! is tagged and length-prefixed, and map entries are hashed one by one and
//! combined in sorted order, so a `HashMap`'s iteration order cannot change
//! the result.

use std::fmt;

use serde::ser::{self, Serialize};
use sha2::{Digest as _, Sha256};

/// The SHA-256 of a payload's serde form: what must match when a key is
/// reused.
///
/// ```
/// use std::collections::HashMap;
/// use idem::fingerprint::Fingerprint;
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
/// use idem::fingerprint::{Digester, Fingerprint};
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

mod tag {
    pub const BOOL: u8 = 1;
    pub const I64: u8 = 2;
    pub const U64: u8 = 3;
    pub const I128: u8 = 4;
    pub const U128: u8 = 5;
    pub const F32: u8 = 6;
    pub const F64: u8 = 7;
    pub const CHAR: u8 = 8;
    pub const STR: u8 = 9;
    pub const BYTES: u8 = 10;
    pub const NONE: u8 = 11;
    pub const SOME: u8 = 12;
    pub const UNIT: u8 = 13;
    pub const VARIANT: u8 = 14;
    pub const SEQ: u8 = 15;
    pub const MAP: u8 = 16;
    pub const STRUCT: u8 = 17;
    pub const NEWTYPE: u8 = 18;
    pub const END: u8 = 19;
}

struct HashSerializer<'a> {
    sha: &'a mut Sha256,
}

impl HashSerializer<'_> {
    fn tagged(&mut self, tag: u8, bytes: &[u8]) {
        self.sha.update([tag]);
        self.sha.update(bytes);
    }

    fn str(&mut self, tag: u8, s: &[u8]) {
        self.sha.update([tag]);
        self.sha.update((s.len() as u64).to_le_bytes());
        self.sha.update(s);
    }

    fn variant(&mut self, index: u32, name: &str) {
        self.tagged(tag::VARIANT, &index.to_le_bytes());
        self.str(tag::STR, name.as_bytes());
    }

    fn reborrow(&mut self) -> HashSerializer<'_> {
        HashSerializer { sha: self.sha }
    }
}

type Res = Result<(), FingerprintError>;

impl<'a> ser::Serializer for HashSerializer<'a> {
    type Ok = ();
    type Error = FingerprintError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = MapHasher<'a>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(mut self, v: bool) -> Res {
        self.tagged(tag::BOOL, &[u8::from(v)]);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Res {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Res {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Res {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(mut self, v: i64) -> Res {
        self.tagged(tag::I64, &v.to_le_bytes());
        Ok(())
    }
    fn serialize_i128(mut self, v: i128) -> Res {
        self.tagged(tag::I128, &v.to_le_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Res {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Res {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Res {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(mut self, v: u64) -> Res {
        self.tagged(tag::U64, &v.to_le_bytes());
        Ok(())
    }
    fn serialize_u128(mut self, v: u128) -> Res {
        self.tagged(tag::U128, &v.to_le_bytes());
        Ok(())
    }
    fn serialize_f32(mut self, v: f32) -> Res {
        self.tagged(tag::F32, &v.to_le_bytes());
        Ok(())
    }
    fn serialize_f64(mut self, v: f64) -> Res {
        self.tagged(tag::F64, &v.to_le_bytes());
        Ok(())
    }
    fn serialize_char(mut self, v: char) -> Res {
        self.tagged(tag::CHAR, &u32::from(v).to_le_bytes());
        Ok(())
    }
    fn serialize_str(mut self, v: &str) -> Res {
        self.str(tag::STR, v.as_bytes());
        Ok(())
    }
    fn serialize_bytes(mut self, v: &[u8]) -> Res {
        self.str(tag::BYTES, v);
        Ok(())
    }
    fn serialize_none(mut self) -> Res {
        self.tagged(tag::NONE, &[]);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(mut self, value: &T) -> Res {
        self.tagged(tag::SOME, &[]);
        value.serialize(self)
    }
    fn serialize_unit(mut self) -> Res {
        self.tagged(tag::UNIT, &[]);
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Res {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Res {
        self.variant(index, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        value: &T,
    ) -> Res {
        self.tagged(tag::NEWTYPE, &[]);
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Res {
        self.variant(index, variant);
        value.serialize(self)
    }
    fn serialize_seq(mut self, len: Option<usize>) -> Result<Self, FingerprintError> {
        // The length may be unknown up front; an END tag closes every
        // sequence, so nesting stays unambiguous either way.
        let _ = len;
        self.tagged(tag::SEQ, &[]);
        Ok(self)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self, FingerprintError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Self, FingerprintError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self, FingerprintError> {
        self.variant(index, variant);
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<MapHasher<'a>, FingerprintError> {
        Ok(MapHasher {
            sha: self.sha,
            entries: Vec::new(),
            key: None,
        })
    }
    fn serialize_struct(
        mut self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self, FingerprintError> {
        self.tagged(tag::STRUCT, &[]);
        Ok(self)
    }
    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self, FingerprintError> {
        self.variant(index, variant);
        self.tagged(tag::STRUCT, &[]);
        Ok(self)
    }
}

macro_rules! seq_like {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for HashSerializer<'_> {
            type Ok = ();
            type Error = FingerprintError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Res {
                value.serialize(self.reborrow())
            }
            fn end(mut self) -> Res {
                self.tagged(tag::END, &[]);
                Ok(())
            }
        }
    )*};
}

seq_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

macro_rules! struct_like {
    ($($trait:ident),*) => {$(
        impl ser::$trait for HashSerializer<'_> {
            type Ok = ();
            type Error = FingerprintError;
            fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Res {
                self.str(tag::STR, key.as_bytes());
                value.serialize(self.reborrow())
            }
            fn skip_field(&mut self, key: &'static str) -> Res {
                // A skipped field hashes like an absent one.
                let _ = key;
                Ok(())
            }
            fn end(mut self) -> Res {
                self.tagged(tag::END, &[]);
                Ok(())
            }
        }
    )*};
}

struct_like!(SerializeStruct, SerializeStructVariant);

/// Hashes each entry on its own, then combines the sorted entry digests.
struct MapHasher<'a> {
    sha: &'a mut Sha256,
    entries: Vec<[u8; 32]>,
    key: Option<Sha256>,
}

impl ser::SerializeMap for MapHasher<'_> {
    type Ok = ();
    type Error = FingerprintError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Res {
        let mut entry = Sha256::new();
        key.serialize(HashSerializer { sha: &mut entry })?;
        self.key = Some(entry);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Res {
        let mut entry = self
            .key
            .take()
            .ok_or_else(|| <FingerprintError as ser::Error>::custom("map value without a key"))?;
        value.serialize(HashSerializer { sha: &mut entry })?;
        self.entries.push(entry.finalize().into());
        Ok(())
    }

    fn end(mut self) -> Res {
        self.entries.sort_unstable();
        self.sha.update([tag::MAP]);
        self.sha.update((self.entries.len() as u64).to_le_bytes());
        for entry in &self.entries {
            self.sha.update(entry);
        }
        Ok(())
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
