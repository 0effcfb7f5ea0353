//! The stored record: format version, outcome, the value's version, its
//! type's name, the value.
//!
//! Layout (format 3, the only one): `[3, outcome, version: u32 BE,
//! name_len, name…, value…]`, the value in the extended JSON of
//! [`json_ext`]. Formats 1 and 2 were written only by builds before 0.1
//! and are refused (`CodecError::Format`), never guessed at.
//!
//! Why extended JSON: plain JSON writes `Some(None)` as `None`, NaN and
//! infinities as `null` (which then fails to decode as a float on every
//! duplicate), and refuses maps with non-string keys after the body ran.
//! Format 3 escapes exactly those cases (`{"$some":…}`, `{"$f64":"NaN"}`,
//! `{"$map":[[k,v],…]}`, and a user key starting with `$` gets one more)
//! and is serde_json's output everywhere else, so a record still reads as
//! JSON and every serde form still decodes, including through
//! `deserialize_any` (untagged and internally tagged enums, `flatten`).
//! RON would keep these values but breaks `flatten` and `untagged`; CBOR
//! and MessagePack lose `Some(None)` as JSON does.
//!
//! What decides whether a stored value is still readable is the decoder's
//! own verdict (serde, on the self-describing (extended) JSON), not the
//! type's name:
//! `std::any::type_name` changes with the compiler version, a moved module
//! or a renamed crate, none of which changes the data, so keying on it
//! turned every live record into an error after such a deploy. A shape
//! that no longer decodes (a field's type changed, a required field added)
//! is `CodecError::ShapeChanged` naming the type expected and the one
//! stored (the name is kept for that message and for inspection only). A
//! change the decoder cannot see (same shape, new meaning) is what the
//! explicit `version` is for: the function's author bumps it, and a record
//! of another version is `CodecError::VersionChanged`, never a silent
//! misreading.

mod json_ext;

use serde::{Serialize, de::DeserializeOwned};

use crate::CodecError;

const FORMAT: u8 = 3;
const OK: u8 = 0;
const ERR: u8 = 1;
const NOT_STORED: u8 = 2;
/// Format, outcome, version, name length.
const HEADER: usize = 7;

/// Whether a record holds the function's `Ok` value, a stored `Err`, or
/// says that the body ran but its result could not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Err,
    NotStored,
}

pub(crate) fn encode<T: Serialize>(
    outcome: Outcome,
    value: &T,
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    encode_shaped(outcome, value, limit).map(|(record, _)| record)
}

/// [`encode`], refusing a value that encodes but would not decode as its
/// own type, so that it is never stored to fail every replay. The one such
/// value serde makes: a `u128` or `i128` (of any value) inside
/// `#[serde(flatten)]` or an untagged or internally tagged enum, which
/// serde reads through a buffer without 128-bit integers. Only a value
/// holding a 128-bit integer is decoded here.
pub(crate) fn encode_replayable<T: Serialize + DeserializeOwned>(
    outcome: Outcome,
    value: &T,
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    let (record, shape) = encode_shaped(outcome, value, limit)?;
    if shape.has_128 {
        let parsed = parse(&record)?;
        if let Err(source) = json_ext::from_slice::<T>(parsed.payload) {
            return Err(CodecError::Unreplayable {
                type_name: std::any::type_name::<T>(),
                source,
            });
        }
    }
    Ok(record)
}

fn encode_shaped<T: Serialize>(
    outcome: Outcome,
    value: &T,
    limit: usize,
) -> Result<(Vec<u8>, json_ext::Shape), CodecError> {
    let name = type_name::<T>();
    let mut out = Vec::with_capacity(64);
    out.push(FORMAT);
    out.push(outcome.byte());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
    let shape = json_ext::to_writer(&mut out, value).map_err(|err| match err {
        json_ext::EncodeError::Json(source) => CodecError::Json {
            action: "encode",
            type_name: std::any::type_name::<T>(),
            source,
        },
        json_ext::EncodeError::TooDeep(depth) => CodecError::TooDeep {
            depth,
            limit: json_ext::MAX_DEPTH,
        },
    })?;
    if out.len() > limit {
        return Err(CodecError::TooLarge {
            size: out.len(),
            limit,
        });
    }
    Ok((out, shape))
}

/// Whether `limit` leaves room for any record of `T` at all: its header
/// and type name come before the value's first byte. A check that needs
/// no value, so a step can make it before its effect.
pub(crate) fn has_room<T: ?Sized>(limit: usize) -> bool {
    HEADER + type_name::<T>().len() < limit
}

/// Writes the value's version into an encoded record (the error policies
/// encode without knowing the call's version).
pub(crate) fn set_version(record: &mut [u8], version: u32) {
    if record.first() == Some(&FORMAT) && record.len() >= HEADER {
        record[2..6].copy_from_slice(&version.to_be_bytes());
    }
}

impl Outcome {
    fn byte(self) -> u8 {
        match self {
            Outcome::Ok => OK,
            Outcome::Err => ERR,
            Outcome::NotStored => NOT_STORED,
        }
    }
}

/// The record that settles a key whose body ran but whose result could not
/// be stored (too large, or not encodable): duplicates get
/// `CodecError::NotStored` with `reason` instead of running the body again.
pub(crate) fn not_stored(reason: &str) -> Vec<u8> {
    let mut out = vec![FORMAT, NOT_STORED, 0, 0, 0, 0, 0];
    out.extend_from_slice(reason.as_bytes());
    out
}

/// A record split into its parts, before the value is decoded.
pub(crate) struct Parsed<'a> {
    pub outcome: Outcome,
    /// The value's version (0 unless the function sets one).
    pub version: u32,
    pub type_name: &'a str,
    payload: &'a [u8],
}

pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed<'_>, CodecError> {
    // No `ok_or(error)`: an error built eagerly is dropped again on every
    // replay that succeeds.
    let short = || CodecError::Corrupt("record shorter than its header");
    let Some(&format) = bytes.first() else {
        return Err(CodecError::Corrupt("empty record"));
    };
    if format != FORMAT {
        return Err(CodecError::Format(format));
    }
    let version: [u8; 4] = bytes
        .get(2..6)
        .and_then(|v| v.try_into().ok())
        .ok_or_else(short)?;
    let version = u32::from_be_bytes(version);
    // The name's length is the header's last byte.
    let name_at = HEADER - 1;
    let outcome = match bytes.get(1) {
        Some(&OK) => Outcome::Ok,
        Some(&ERR) => Outcome::Err,
        Some(&NOT_STORED) => Outcome::NotStored,
        Some(_) => return Err(CodecError::Corrupt("unknown outcome byte")),
        None => return Err(short()),
    };
    let name_len = usize::from(*bytes.get(name_at).ok_or_else(short)?);
    let Some(name) = bytes.get(name_at + 1..name_at + 1 + name_len) else {
        return Err(CodecError::Corrupt("type name cut short"));
    };
    let type_name =
        std::str::from_utf8(name).map_err(|_| CodecError::Corrupt("type name is not UTF-8"))?;
    Ok(Parsed {
        outcome,
        version,
        type_name,
        payload: &bytes[name_at + 1 + name_len..],
    })
}

impl Parsed<'_> {
    /// Why a `NotStored` record's result was not stored.
    pub(crate) fn not_stored(&self) -> CodecError {
        CodecError::NotStored(self.not_stored_reason())
    }

    /// The reason a `NotStored` record gives.
    pub(crate) fn not_stored_reason(&self) -> String {
        String::from_utf8_lossy(self.payload).into_owned()
    }

    pub(crate) fn decode<T: DeserializeOwned>(&self) -> Result<T, CodecError> {
        json_ext::from_slice(self.payload).map_err(|source| CodecError::ShapeChanged {
            stored: self.type_name.to_owned(),
            expected: std::any::type_name::<T>(),
            source,
        })
    }

    /// The value as the record holds it, read as plain JSON: the format's
    /// escapes (`{"$u128":…}`, `{"$f64":"NaN"}`, …) stay as written, so
    /// any record reads without knowing its type and nothing is lost.
    pub(crate) fn raw_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(self.payload)
    }

    /// Refuses a record of another version than the call's.
    pub(crate) fn check_version(&self, expected: u32) -> Result<(), CodecError> {
        if self.version == expected {
            return Ok(());
        }
        Err(CodecError::VersionChanged {
            stored: self.version,
            expected,
            type_name: self.type_name.to_owned(),
        })
    }
}

/// The type's name, cut to what the one-byte length can carry (on a char
/// boundary).
fn type_name<T: ?Sized>() -> &'static str {
    let name = std::any::type_name::<T>();
    let mut end = name.len().min(usize::from(u8::MAX));
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = encode(Outcome::Ok, &vec![1u8, 2], 1024).unwrap();
        let parsed = parse(&bytes).unwrap();
        assert_eq!(parsed.outcome, Outcome::Ok);
        assert_eq!(parsed.decode::<Vec<u8>>().unwrap(), vec![1, 2]);
    }

    #[test]
    fn the_same_shape_under_another_name_decodes() {
        let bytes = encode(Outcome::Ok, &7u32, 1024).unwrap();
        assert_eq!(parse(&bytes).unwrap().decode::<u64>().unwrap(), 7);
    }

    #[test]
    fn another_shape_is_refused_with_both_names() {
        let bytes = encode(Outcome::Ok, &"seven", 1024).unwrap();
        let err = parse(&bytes).unwrap().decode::<u64>().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("str") && text.contains("u64"), "{text}");
    }

    #[test]
    fn versions_are_kept_and_checked() {
        let mut bytes = encode(Outcome::Ok, &7u32, 1024).unwrap();
        set_version(&mut bytes, 3);
        let parsed = parse(&bytes).unwrap();
        assert_eq!(parsed.version, 3);
        assert!(parsed.check_version(3).is_ok());
        assert!(matches!(
            parsed.check_version(4),
            Err(CodecError::VersionChanged {
                stored: 3,
                expected: 4,
                ..
            })
        ));
    }

    #[test]
    fn pre_release_formats_are_refused() {
        // Format 1 had no version; format 2 held plain serde_json.
        let mut v1 = vec![1, OK, 3];
        v1.extend_from_slice(b"u327");
        let mut v2 = vec![2, OK, 0, 0, 0, 1, 3];
        v2.extend_from_slice(b"u327");
        for (old, format) in [(v1, 1), (v2, 2)] {
            let err = parse(&old).err().expect("a pre-release record parsed");
            assert!(matches!(err, CodecError::Format(f) if f == format), "{err}");
            assert!(err.to_string().contains("reads only format 3"), "{err}");
        }
    }

    #[test]
    fn format_3_keeps_what_json_loses() {
        let bytes = encode(Outcome::Ok, &Some(None::<u8>), 1024).unwrap();
        assert_eq!(bytes[0], 3);
        let parsed = parse(&bytes).unwrap();
        assert_eq!(parsed.decode::<Option<Option<u8>>>().unwrap(), Some(None));
        let bytes = encode(Outcome::Err, &f64::NAN, 1024).unwrap();
        assert!(parse(&bytes).unwrap().decode::<f64>().unwrap().is_nan());
    }

    #[test]
    fn corrupt_records_are_errors() {
        assert!(matches!(parse(&[]), Err(CodecError::Corrupt(_))));
        assert!(matches!(parse(&[9, 0, 0]), Err(CodecError::Format(9))));
        assert!(matches!(
            parse(&[3, 0, 0, 0, 0, 0, 200, b'x']),
            Err(CodecError::Corrupt(_))
        ));
        assert!(matches!(parse(&[3, 0, 0, 0]), Err(CodecError::Corrupt(_))));
        assert!(matches!(
            parse(&[3, 7, 0, 0, 0, 0, 0]),
            Err(CodecError::Corrupt(_))
        ));
        let mut bytes = encode(Outcome::Ok, &String::from("hello"), 1024).unwrap();
        bytes.truncate(bytes.len() - 2);
        assert!(matches!(
            parse(&bytes).unwrap().decode::<String>(),
            Err(CodecError::ShapeChanged { .. })
        ));
    }

    #[test]
    fn values_that_would_not_replay_are_refused() {
        #[derive(serde::Serialize, serde::Deserialize)]
        #[serde(untagged)]
        enum Untagged {
            Cents { n: u128 },
        }
        for n in [7, u128::MAX] {
            let err = encode_replayable(Outcome::Ok, &Untagged::Cents { n }, 1024).unwrap_err();
            assert!(matches!(err, CodecError::Unreplayable { .. }), "{err}");
            // Without the check it would be stored, and never replay.
            let stored = encode(Outcome::Ok, &Untagged::Cents { n }, 1024).unwrap();
            assert!(parse(&stored).unwrap().decode::<Untagged>().is_err());
        }
        let plain = encode_replayable(Outcome::Ok, &(u128::MAX, -7i128), 1024).unwrap();
        let back: (u128, i128) = parse(&plain).unwrap().decode().unwrap();
        assert_eq!(back, (u128::MAX, -7));
        let deep =
            (0..=json_ext::MAX_DEPTH).fold(serde_json::json!(1), |v, _| serde_json::json!([v]));
        let err = encode_replayable(Outcome::Ok, &deep, usize::MAX).unwrap_err();
        assert!(
            matches!(err, CodecError::TooDeep { depth, limit } if depth == limit + 1),
            "{err}"
        );
    }

    #[test]
    fn oversized_values_are_refused() {
        let err = encode(Outcome::Ok, &"x".repeat(100), 50).unwrap_err();
        assert!(matches!(err, CodecError::TooLarge { limit: 50, .. }));
    }

    #[test]
    fn has_room_is_exactly_the_smallest_record() {
        // `u8`: 7 header bytes, 2 of name, at least 1 of value.
        assert!(!has_room::<u8>(9));
        assert!(has_room::<u8>(10));
        assert!(encode(Outcome::Ok, &7u8, 10).is_ok());
        assert!(encode(Outcome::Ok, &7u8, 9).is_err());
    }
}
