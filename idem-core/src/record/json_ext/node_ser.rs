//! Any `Serialize` value to a [`Node`].

use std::borrow::Cow;

use serde::Serialize;
use serde::ser::{self, Serializer};

use super::Node;

type Error = serde_json::Error;
type Result<T> = std::result::Result<T, Error>;

/// Builds the tree of a value; `Some` is marked only around what would
/// otherwise read back as `None`.
pub(super) struct NodeSerializer;

fn node<T: Serialize + ?Sized>(value: &T) -> Result<Node<'static>> {
    value.serialize(NodeSerializer)
}

fn text(name: &'static str) -> Node<'static> {
    Node::Str(Cow::Borrowed(name))
}

impl Serializer for NodeSerializer {
    type Ok = Node<'static>;
    type Error = Error;
    type SerializeSeq = SeqNode;
    type SerializeTuple = SeqNode;
    type SerializeTupleStruct = SeqNode;
    type SerializeTupleVariant = VariantNode<SeqNode>;
    type SerializeMap = MapNode;
    type SerializeStruct = MapNode;
    type SerializeStructVariant = VariantNode<MapNode>;

    fn serialize_bool(self, v: bool) -> Result<Node<'static>> {
        Ok(Node::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Node<'static>> {
        Ok(Node::I64(v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<Node<'static>> {
        Ok(Node::I64(v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<Node<'static>> {
        Ok(Node::I64(v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<Node<'static>> {
        Ok(Node::I64(v))
    }
    fn serialize_i128(self, v: i128) -> Result<Node<'static>> {
        // Kept as 128-bit whatever its value, for `Shape::has_128`.
        Ok(Node::I128(v))
    }
    fn serialize_u8(self, v: u8) -> Result<Node<'static>> {
        Ok(Node::U64(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Node<'static>> {
        Ok(Node::U64(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Node<'static>> {
        Ok(Node::U64(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Node<'static>> {
        Ok(Node::U64(v))
    }
    fn serialize_u128(self, v: u128) -> Result<Node<'static>> {
        Ok(Node::U128(v))
    }
    fn serialize_f32(self, v: f32) -> Result<Node<'static>> {
        Ok(Node::F32(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Node<'static>> {
        Ok(Node::F64(v))
    }
    fn serialize_char(self, v: char) -> Result<Node<'static>> {
        Ok(Node::Str(Cow::Owned(v.to_string())))
    }
    fn serialize_str(self, v: &str) -> Result<Node<'static>> {
        Ok(Node::Str(Cow::Owned(v.to_owned())))
    }
    /// As serde_json writes them: an array of numbers.
    fn serialize_bytes(self, v: &[u8]) -> Result<Node<'static>> {
        Ok(Node::Seq(v.iter().map(|&b| Node::U64(b.into())).collect()))
    }
    fn serialize_none(self) -> Result<Node<'static>> {
        Ok(Node::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Node<'static>> {
        Ok(match node(value)? {
            inner @ (Node::Null | Node::Some(_)) => Node::Some(Box::new(inner)),
            inner => inner,
        })
    }
    fn serialize_unit(self) -> Result<Node<'static>> {
        Ok(Node::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Node<'static>> {
        Ok(Node::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Node<'static>> {
        Ok(text(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Node<'static>> {
        node(value)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Node<'static>> {
        Ok(Node::Map(vec![(text(variant), node(value)?)]))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqNode> {
        Ok(SeqNode(Vec::with_capacity(len.unwrap_or(0))))
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqNode> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<SeqNode> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantNode<SeqNode>> {
        Ok(VariantNode {
            variant,
            inner: self.serialize_seq(Some(len))?,
        })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<MapNode> {
        Ok(MapNode {
            entries: Vec::with_capacity(len.unwrap_or(0)),
            key: None,
        })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<MapNode> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantNode<MapNode>> {
        Ok(VariantNode {
            variant,
            inner: self.serialize_map(Some(len))?,
        })
    }
}

pub(super) struct SeqNode(Vec<Node<'static>>);

impl ser::SerializeSeq for SeqNode {
    type Ok = Node<'static>;
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.0.push(node(value)?);
        Ok(())
    }
    fn end(self) -> Result<Node<'static>> {
        Ok(Node::Seq(self.0))
    }
}

impl ser::SerializeTuple for SeqNode {
    type Ok = Node<'static>;
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Node<'static>> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for SeqNode {
    type Ok = Node<'static>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Node<'static>> {
        ser::SerializeSeq::end(self)
    }
}

pub(super) struct MapNode {
    entries: Vec<(Node<'static>, Node<'static>)>,
    key: Option<Node<'static>>,
}

impl ser::SerializeMap for MapNode {
    type Ok = Node<'static>;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.key = Some(node(key)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self
            .key
            .take()
            .ok_or_else(|| <Error as ser::Error>::custom("a map value came without its key"))?;
        self.entries.push((key, node(value)?));
        Ok(())
    }
    fn end(self) -> Result<Node<'static>> {
        Ok(Node::Map(self.entries))
    }
}

impl ser::SerializeStruct for MapNode {
    type Ok = Node<'static>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<()> {
        self.entries.push((text(name), node(value)?));
        Ok(())
    }
    fn end(self) -> Result<Node<'static>> {
        Ok(Node::Map(self.entries))
    }
}

/// `{"Variant": …}`, as serde_json writes enum variants with content.
pub(super) struct VariantNode<I> {
    variant: &'static str,
    inner: I,
}

impl VariantNode<SeqNode> {
    fn finish(self) -> Node<'static> {
        Node::Map(vec![(text(self.variant), Node::Seq(self.inner.0))])
    }
}

impl ser::SerializeTupleVariant for VariantNode<SeqNode> {
    type Ok = Node<'static>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        ser::SerializeSeq::serialize_element(&mut self.inner, value)
    }
    fn end(self) -> Result<Node<'static>> {
        Ok(self.finish())
    }
}

impl ser::SerializeStructVariant for VariantNode<MapNode> {
    type Ok = Node<'static>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<()> {
        ser::SerializeStruct::serialize_field(&mut self.inner, name, value)
    }
    fn end(self) -> Result<Node<'static>> {
        Ok(Node::Map(vec![(
            text(self.variant),
            Node::Map(self.inner.entries),
        )]))
    }
}
