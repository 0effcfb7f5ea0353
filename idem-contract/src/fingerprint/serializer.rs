//! The serde `Serializer` that feeds a value's parts into the hash, each
//! tagged and length-prefixed; maps are hashed entry by entry and combined
//! in sorted order.

use serde::ser::{self, Serialize};
use sha2::{Digest as _, Sha256};

use super::FingerprintError;

mod tag {
    pub(super) const BOOL: u8 = 1;
    pub(super) const I64: u8 = 2;
    pub(super) const U64: u8 = 3;
    pub(super) const I128: u8 = 4;
    pub(super) const U128: u8 = 5;
    pub(super) const F32: u8 = 6;
    pub(super) const F64: u8 = 7;
    pub(super) const CHAR: u8 = 8;
    pub(super) const STR: u8 = 9;
    pub(super) const BYTES: u8 = 10;
    pub(super) const NONE: u8 = 11;
    pub(super) const SOME: u8 = 12;
    pub(super) const UNIT: u8 = 13;
    pub(super) const VARIANT: u8 = 14;
    pub(super) const SEQ: u8 = 15;
    pub(super) const MAP: u8 = 16;
    pub(super) const STRUCT: u8 = 17;
    pub(super) const NEWTYPE: u8 = 18;
    pub(super) const END: u8 = 19;
}

pub(super) struct HashSerializer<'a> {
    pub(super) sha: &'a mut Sha256,
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
pub(super) struct MapHasher<'a> {
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
