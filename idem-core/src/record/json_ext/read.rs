//! Reading a record's value: serde_json directly when the text holds no
//! escape, through a [`Node`] when it does, and without serde_json's depth
//! limit (under [`MAX_DEPTH`]) when the record nests deeper.

use serde::Deserialize;
use serde::de::{self, DeserializeOwned};

use super::{MAX_DEPTH, Node};

/// The most nested levels serde_json reads with its own limit on.
const SERDE_JSON_DEPTH: usize = 127;

/// Whether `bytes` holds a `$`: `memchr` reads words at a time, where
/// `<[u8]>::contains` scans a short slice byte by byte (a sixth of a
/// `u64` replay's decode, by callgrind).
pub(super) fn has_dollar(bytes: &[u8]) -> bool {
    memchr::memchr(b'$', bytes).is_some()
}

/// Decodes a value written by [`to_writer`](super::to_writer).
///
/// Text without a `$` holds no escape and no escaped key: it is exactly
/// what serde_json writes for the value, so serde_json reads it directly,
/// without the tree (most records: a replay then costs what plain
/// serde_json costs). serde_json's own leniencies apply there (a map key
/// `"1"` read into an integer-keyed map). A record
/// nested deeper than serde_json reads is read again without its limit,
/// under [`MAX_DEPTH`]: only then is the text scanned for its depth.
pub(crate) fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    match read(&mut json, bytes) {
        Err(err) if err.is_syntax() && nesting(bytes) > SERDE_JSON_DEPTH => from_deep_slice(bytes),
        read => read,
    }
}

/// [`from_slice`] for a record deeper than serde_json's own limit.
fn from_deep_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    let depth = nesting(bytes);
    if depth > MAX_DEPTH {
        return Err(de::Error::custom(format_args!(
            "the record nests {depth} levels deep, more than the {MAX_DEPTH} a record may"
        )));
    }
    let mut json = serde_json::Deserializer::from_slice(bytes);
    json.disable_recursion_limit();
    read(&mut json, bytes)
}

fn read<'de, T: DeserializeOwned>(
    json: &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
    bytes: &[u8],
) -> Result<T, serde_json::Error> {
    if !has_dollar(bytes) {
        let value = T::deserialize(&mut *json)?;
        json.end()?;
        return Ok(value);
    }
    let node = Node::deserialize(&mut *json)?;
    json.end()?;
    T::deserialize(node)
}

/// How deeply JSON text nests: arrays and objects inside each other,
/// brackets inside strings not counted.
pub(super) fn nesting(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}
