//! The value encoding of record format 3: JSON, with a few escapes for what
//! plain JSON cannot carry.
//!
//! A value is first turned into a [`Node`] (its serde data model as a tree,
//! `ser`), written as JSON; read back, the JSON becomes a `Node` again,
//! which is itself a self-describing serde `Deserializer` (`node_de`). The
//! escapes are single-key objects whose key starts with `$`:
//!
//! | value | JSON |
//! | --- | --- |
//! | `Some(v)` where `v` would be `null` or `{"$some":…}` (`Some(None)`, `Some(())`) | `{"$some":v}` |
//! | a NaN or infinite `f64` / `f32` | `{"$f64":"NaN"}`, `"-NaN"`, `"Infinity"`, `"-Infinity"` (`$f32` alike); a NaN of other bits `"NaN:<bits in hex>"` |
//! | a `u128` / `i128` outside the 64-bit range | `{"$u128":"digits"}`, `{"$i128":"digits"}` |
//! | a map with any key that is not a string | `{"$map":[[k,v],…]}` |
//! | an object key of the value that starts with `$` | the key with one more `$` (`"$ref"` is `"$$ref"`) |
//!
//! Everything else is exactly what serde_json writes, so a record stays
//! readable as JSON. A `Some` of any other value is the value itself, as
//! in JSON: only the nesting JSON would flatten is marked. Integer, bool
//! and tuple keys all go to `$map`: object keys are then always the
//! value's own strings, so a map decodes the same through typed fields
//! and through `deserialize_any` (untagged enums, `flatten`), where
//! serde_json's `"1"` for an integer key would stay a string.
//!
//! Depth: serde_json reads at most 128 nested arrays and objects, and
//! `$map` costs three a level, so a 40-level tree keyed by integers was
//! stored and never read back. A record nested deeper than serde_json's
//! limit is read without it, under [`MAX_DEPTH`] of our own, which the
//! encoder refuses to exceed: whatever encodes decodes.

mod node_de;
mod node_ser;
mod non_finite;
mod read;

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Deserializer, Serialize};

use non_finite::{non_finite_f32, non_finite_f32_name, non_finite_f64, non_finite_f64_name};
pub(crate) use read::from_slice;

const SOME: &str = "$some";
const F32: &str = "$f32";
const F64: &str = "$f64";
const U128: &str = "$u128";
const I128: &str = "$i128";
const MAP: &str = "$map";

/// How deeply a record's JSON may nest (arrays and objects inside each
/// other, escapes included): the encoder refuses a deeper value and the
/// decoder a deeper record. Reading is recursive, a few KiB of stack a
/// level in a debug build: this depth reads in half of a tokio worker's
/// 2 MiB stack (`json_ext/tests.rs`), which 512 would not. It holds a
/// struct with an integer-keyed map of itself 63 levels deep.
pub(crate) const MAX_DEPTH: usize = 256;

/// A value in the serde data model, before it is written as JSON or after
/// it was read from it. A `u128` or `i128` is `U128`/`I128` whatever its
/// value when written (and JSON's plain number when it fits 64 bits); read
/// back, only an escaped one is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node<'a> {
    /// `None`, `()`, a unit struct.
    Null,
    /// A `Some` whose content would otherwise read back as `None`.
    Some(Box<Node<'a>>),
    Bool(bool),
    U64(u64),
    I64(i64),
    U128(u128),
    I128(i128),
    F32(f32),
    F64(f64),
    Str(Cow<'a, str>),
    Seq(Vec<Node<'a>>),
    Map(Vec<(Node<'a>, Node<'a>)>),
}

/// What the encoder learnt of a value's tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Shape {
    /// How deeply its JSON nests.
    pub depth: usize,
    /// Whether it holds a `u128` or `i128` (of any value).
    pub has_128: bool,
}

/// Why a value was not encoded.
#[derive(Debug)]
pub(crate) enum EncodeError {
    /// Its `Serialize` failed.
    Json(serde_json::Error),
    /// It nests deeper than [`MAX_DEPTH`].
    TooDeep(usize),
}

/// Appends `value`, encoded, to `out`; nothing is written for a value
/// nested deeper than [`MAX_DEPTH`].
pub(crate) fn to_writer<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<Shape, EncodeError> {
    let node = value
        .serialize(node_ser::NodeSerializer)
        .map_err(EncodeError::Json)?;
    let shape = node.shape();
    if shape.depth > MAX_DEPTH {
        return Err(EncodeError::TooDeep(shape.depth));
    }
    serde_json::to_writer(out, &node).map_err(EncodeError::Json)?;
    Ok(shape)
}

impl Node<'_> {
    /// The depth of its JSON as [`Serialize`] writes it, and whether it
    /// holds a 128-bit integer.
    fn shape(&self) -> Shape {
        let leaf = |depth, has_128| Shape { depth, has_128 };
        match self {
            // An escape only beyond the 64-bit range.
            Node::U128(n) => leaf(usize::from(u64::try_from(*n).is_err()), true),
            Node::I128(n) => leaf(usize::from(i64::try_from(*n).is_err()), true),
            Node::F32(x) if !x.is_finite() => leaf(1, false),
            Node::F64(x) if !x.is_finite() => leaf(1, false),
            Node::Some(inner) => inner.shape().nested(1),
            Node::Seq(items) => Shape::widest(items.iter().map(Node::shape)).nested(1),
            Node::Map(entries) if is_object(entries) => {
                Shape::widest(entries.iter().map(|(_, v)| v.shape())).nested(1)
            }
            // `{"$map":[[k,v],…]}`.
            Node::Map(entries) => {
                Shape::widest(entries.iter().flat_map(|(k, v)| [k.shape(), v.shape()])).nested(3)
            }
            _ => Shape::default(),
        }
    }
}

impl Shape {
    fn nested(self, levels: usize) -> Shape {
        Shape {
            depth: self.depth + levels,
            has_128: self.has_128,
        }
    }

    fn widest(shapes: impl Iterator<Item = Shape>) -> Shape {
        shapes.fold(Shape::default(), |a, b| Shape {
            depth: a.depth.max(b.depth),
            has_128: a.has_128 || b.has_128,
        })
    }
}

/// Whether a map is written as a JSON object of its own keys (else as
/// `$map`).
fn is_object(entries: &[(Node<'_>, Node<'_>)]) -> bool {
    entries.iter().all(|(key, _)| matches!(key, Node::Str(_)))
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => s.serialize_unit(),
            Node::Some(inner) => escape(s, SOME, inner),
            Node::Bool(b) => s.serialize_bool(*b),
            Node::U64(n) => s.serialize_u64(*n),
            Node::I64(n) => s.serialize_i64(*n),
            Node::U128(n) => match u64::try_from(*n) {
                Ok(n) => s.serialize_u64(n),
                Err(_) => escape(s, U128, &n.to_string()),
            },
            Node::I128(n) => match i64::try_from(*n) {
                Ok(n) => s.serialize_i64(n),
                Err(_) => escape(s, I128, &n.to_string()),
            },
            Node::F32(x) if x.is_finite() => s.serialize_f32(*x),
            Node::F32(x) => escape(s, F32, &non_finite_f32_name(*x)),
            Node::F64(x) if x.is_finite() => s.serialize_f64(*x),
            Node::F64(x) => escape(s, F64, &non_finite_f64_name(*x)),
            Node::Str(text) => s.serialize_str(text),
            Node::Seq(items) => s.collect_seq(items),
            Node::Map(entries) => {
                if !is_object(entries) {
                    let pairs = entries.iter().map(|(key, value)| (key, value));
                    return escape(s, MAP, &Pairs(pairs));
                }
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    if let Node::Str(key) = key {
                        map.serialize_entry(&ObjectKey(key), value)?;
                    }
                }
                map.end()
            }
        }
    }
}

fn escape<S: Serializer, T: Serialize + ?Sized>(
    s: S,
    tag: &'static str,
    value: &T,
) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(1))?;
    map.serialize_entry(tag, value)?;
    map.end()
}

/// The `[[k,v],…]` list of a `$map`, written without collecting it.
struct Pairs<I>(I);

impl<'n, 'a: 'n, I> Serialize for Pairs<I>
where
    I: Iterator<Item = (&'n Node<'a>, &'n Node<'a>)> + Clone,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.clone())
    }
}

/// A user's object key, with a leading `$` doubled so that it is never
/// read as an escape.
struct ObjectKey<'k>(&'k str);

impl Serialize for ObjectKey<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.starts_with('$') {
            s.serialize_str(&format!("${}", self.0))
        } else {
            s.serialize_str(self.0)
        }
    }
}

/// Text borrowed from the record when JSON had no escape in it.
struct Text<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        d.deserialize_str(TextVisitor)
    }
}

/// The key as the value had it: one leading `$` of a `$$…` key removed;
/// any other `$…` key is not one this format writes.
fn unescape_key<E: de::Error>(key: Cow<'_, str>) -> Result<Cow<'_, str>, E> {
    if key.starts_with("$$") {
        return Ok(match key {
            Cow::Borrowed(key) => Cow::Borrowed(&key[1..]),
            Cow::Owned(key) => Cow::Owned(key[1..].to_owned()),
        });
    }
    if key.starts_with('$') {
        return Err(E::custom(format_args!("unknown escape `{key}`")));
    }
    Ok(key)
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Node<'de>, E> {
        Ok(Node::U64(n))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Node<'de>, E> {
        Ok(Node::I64(n))
    }
    fn visit_f64<E>(self, x: f64) -> Result<Node<'de>, E> {
        Ok(Node::F64(x))
    }
    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Borrowed(text)))
    }
    fn visit_str<E>(self, text: &str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(text.to_owned())))
    }
    fn visit_string<E>(self, text: String) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(text)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let Some(Text(first)) = map.next_key()? else {
            return Ok(Node::Map(Vec::new()));
        };
        let node = match &*first {
            SOME => Node::Some(Box::new(map.next_value()?)),
            F32 => Node::F32(non_finite_f32::<A::Error>(&map.next_value::<Text>()?.0)?),
            F64 => Node::F64(non_finite_f64::<A::Error>(&map.next_value::<Text>()?.0)?),
            U128 => Node::U128(parse_int::<u128, A::Error>(map.next_value()?)?),
            I128 => Node::I128(parse_int::<i128, A::Error>(map.next_value()?)?),
            MAP => Node::Map(map.next_value()?),
            _ => return object(first, map),
        };
        if map.next_key::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(format_args!(
                "the escape `{first}` has other keys beside it"
            )));
        }
        Ok(node)
    }
}

fn parse_int<N: std::str::FromStr, E: de::Error>(text: Text<'_>) -> Result<N, E> {
    text.0
        .parse()
        .map_err(|_| E::custom(format_args!("`{}` is not a 128-bit integer", text.0)))
}

/// A JSON object of the value's own (string) keys.
fn object<'de, A: MapAccess<'de>>(first: Cow<'de, str>, mut map: A) -> Result<Node<'de>, A::Error> {
    let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64) + 1);
    entries.push((Node::Str(unescape_key(first)?), map.next_value()?));
    while let Some(Text(key)) = map.next_key()? {
        entries.push((Node::Str(unescape_key(key)?), map.next_value()?));
    }
    Ok(Node::Map(entries))
}

#[cfg(test)]
mod tests;
