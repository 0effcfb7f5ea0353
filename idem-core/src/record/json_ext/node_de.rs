//! A [`Node`] as a self-describing `Deserializer`: what was written comes
//! back through typed fields and through `deserialize_any` alike.

use std::borrow::Cow;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, Unexpected, VariantAccess,
    Visitor,
};
use serde::forward_to_deserialize_any;

use super::Node;

type Error = serde_json::Error;

const RAW_VALUE: &str = "$serde_json::private::RawValue";
type Result<T> = std::result::Result<T, Error>;

impl<'de> IntoDeserializer<'de, Error> for Node<'de> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl Node<'_> {
    fn unexpected(&self) -> Unexpected<'_> {
        match self {
            Node::Null => Unexpected::Unit,
            Node::Some(_) => Unexpected::Option,
            Node::Bool(b) => Unexpected::Bool(*b),
            Node::U64(n) => Unexpected::Unsigned(*n),
            Node::I64(n) => Unexpected::Signed(*n),
            Node::U128(_) | Node::I128(_) => Unexpected::Other("128-bit integer"),
            Node::F32(x) => Unexpected::Float(f64::from(*x)),
            Node::F64(x) => Unexpected::Float(*x),
            Node::Str(text) => Unexpected::Str(text),
            Node::Seq(_) => Unexpected::Seq,
            Node::Map(_) => Unexpected::Map,
        }
    }
}

impl<'de> Deserializer<'de> for Node<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Null => visitor.visit_unit(),
            Node::Some(inner) => visitor.visit_some(*inner),
            Node::Bool(b) => visitor.visit_bool(b),
            Node::U64(n) => visitor.visit_u64(n),
            Node::I64(n) => visitor.visit_i64(n),
            Node::U128(n) => visitor.visit_u128(n),
            Node::I128(n) => visitor.visit_i128(n),
            Node::F32(x) => visitor.visit_f32(x),
            Node::F64(x) => visitor.visit_f64(x),
            Node::Str(Cow::Borrowed(text)) => visitor.visit_borrowed_str(text),
            Node::Str(Cow::Owned(text)) => visitor.visit_string(text),
            Node::Seq(items) => {
                let mut seq = SeqDeserializer::new(items.into_iter());
                let value = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
            Node::Map(entries) => {
                let mut map = MapDeserializer::new(entries.into_iter());
                let value = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(value)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Null => visitor.visit_none(),
            Node::Some(inner) => visitor.visit_some(*inner),
            other => visitor.visit_some(other),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        // serde_json's `RawValue` (feature `raw_value`, on with axum or
        // sqlx) serializes as a map of this one key and reads it back the
        // same way from any deserializer but its own.
        if name == RAW_VALUE {
            return self.deserialize_any(visitor);
        }
        visitor.visit_newtype_struct(self)
    }

    /// Bytes written as text by another encoder still read, as serde_json
    /// allows.
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Str(Cow::Borrowed(text)) => visitor.visit_borrowed_bytes(text.as_bytes()),
            Node::Str(Cow::Owned(text)) => visitor.visit_byte_buf(text.into_bytes()),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self {
            variant @ Node::Str(_) => visitor.visit_enum(Enum {
                variant,
                content: None,
            }),
            Node::Map(entries) => match <[_; 1]>::try_from(entries) {
                Ok([(variant, content)]) => visitor.visit_enum(Enum {
                    variant,
                    content: Some(content),
                }),
                Err(_) => Err(de::Error::invalid_value(
                    Unexpected::Map,
                    &"a map with a single key",
                )),
            },
            other => Err(de::Error::invalid_type(other.unexpected(), &"an enum")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// An enum variant: its name, and its content unless it is a unit variant.
struct Enum<'de> {
    variant: Node<'de>,
    content: Option<Node<'de>>,
}

impl<'de> EnumAccess<'de> for Enum<'de> {
    type Error = Error;
    type Variant = Content<'de>;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Content<'de>)> {
        let variant = seed.deserialize(self.variant)?;
        Ok((variant, Content(self.content)))
    }
}

struct Content<'de>(Option<Node<'de>>);

impl<'de> Content<'de> {
    fn expect(self, what: &'static str) -> Result<Node<'de>> {
        self.0
            .ok_or_else(|| de::Error::invalid_type(Unexpected::UnitVariant, &what))
    }
}

impl<'de> VariantAccess<'de> for Content<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        match self.0 {
            None | Some(Node::Null) => Ok(()),
            Some(other) => Err(de::Error::invalid_type(other.unexpected(), &"unit variant")),
        }
    }
    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value> {
        seed.deserialize(self.expect("newtype variant")?)
    }
    fn tuple_variant<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value> {
        match self.expect("tuple variant")? {
            seq @ Node::Seq(_) => seq.deserialize_any(visitor),
            other => Err(de::Error::invalid_type(
                other.unexpected(),
                &"tuple variant",
            )),
        }
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.expect("struct variant")? {
            fields @ (Node::Map(_) | Node::Seq(_)) => fields.deserialize_any(visitor),
            other => Err(de::Error::invalid_type(
                other.unexpected(),
                &"struct variant",
            )),
        }
    }
}
