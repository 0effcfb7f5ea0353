//! The stored record: format version, outcome, return type name, value.
//!
//! Layout (format 1): `[format, outcome, name_len, name…, json…]`. The type
//! name travels with the value so that a record written by an older deploy
//! whose type has changed is refused with both names instead of being
//! decoded into garbage.

use serde::{Serialize, de::DeserializeOwned};

use crate::CodecError;

const FORMAT: u8 = 1;
const OK: u8 = 0;
const ERR: u8 = 1;
const NOT_STORED: u8 = 2;
const HEADER: usize = 3;

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
    let name = type_name::<T>();
    let mut out = Vec::with_capacity(64);
    out.push(FORMAT);
    out.push(match outcome {
        Outcome::Ok => OK,
        Outcome::Err => ERR,
        Outcome::NotStored => NOT_STORED,
    });
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
    serde_json::to_writer(&mut out, value).map_err(|source| CodecError::Json {
        action: "encode",
        type_name: std::any::type_name::<T>(),
        source,
    })?;
    if out.len() > limit {
        return Err(CodecError::TooLarge {
            size: out.len(),
            limit,
        });
    }
    Ok(out)
}

/// The record that settles a key whose body ran but whose result could not
/// be stored (too large, or not encodable): duplicates get
/// `CodecError::NotStored` with `reason` instead of running the body again.
pub(crate) fn not_stored(reason: &str) -> Vec<u8> {
    let mut out = vec![FORMAT, NOT_STORED, 0];
    out.extend_from_slice(reason.as_bytes());
    out
}

/// A record split into its parts, before the value is decoded.
pub(crate) struct Parsed<'a> {
    pub outcome: Outcome,
    pub type_name: &'a str,
    payload: &'a [u8],
}

pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed<'_>, CodecError> {
    let (&format, rest) = bytes
        .split_first()
        .ok_or(CodecError::Corrupt("empty record"))?;
    if format != FORMAT {
        return Err(CodecError::Format(format));
    }
    if bytes.len() < HEADER {
        return Err(CodecError::Corrupt("record shorter than its header"));
    }
    let outcome = match rest[0] {
        OK => Outcome::Ok,
        ERR => Outcome::Err,
        NOT_STORED => Outcome::NotStored,
        _ => return Err(CodecError::Corrupt("unknown outcome byte")),
    };
    let name_len = usize::from(rest[1]);
    let name = bytes
        .get(HEADER..HEADER + name_len)
        .ok_or(CodecError::Corrupt("type name cut short"))?;
    let type_name =
        std::str::from_utf8(name).map_err(|_| CodecError::Corrupt("type name is not UTF-8"))?;
    Ok(Parsed {
        outcome,
        type_name,
        payload: &bytes[HEADER + name_len..],
    })
}

impl Parsed<'_> {
    /// Why a `NotStored` record's result was not stored.
    pub(crate) fn not_stored(&self) -> CodecError {
        CodecError::NotStored(String::from_utf8_lossy(self.payload).into_owned())
    }

    pub(crate) fn decode<T: DeserializeOwned>(&self) -> Result<T, CodecError> {
        let expected = type_name::<T>();
        if self.type_name != expected {
            return Err(CodecError::TypeChanged {
                stored: self.type_name.to_owned(),
                expected: std::any::type_name::<T>(),
            });
        }
        serde_json::from_slice(self.payload).map_err(|source| CodecError::Json {
            action: "decode",
            type_name: std::any::type_name::<T>(),
            source,
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
    fn another_type_is_refused_with_both_names() {
        let bytes = encode(Outcome::Ok, &7u32, 1024).unwrap();
        let err = parse(&bytes).unwrap().decode::<u64>().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("u32") && text.contains("u64"), "{text}");
    }

    #[test]
    fn corrupt_records_are_errors() {
        assert!(matches!(parse(&[]), Err(CodecError::Corrupt(_))));
        assert!(matches!(parse(&[9, 0, 0]), Err(CodecError::Format(9))));
        assert!(matches!(
            parse(&[1, 0, 200, b'x']),
            Err(CodecError::Corrupt(_))
        ));
        assert!(matches!(parse(&[1, 7, 0]), Err(CodecError::Corrupt(_))));
        let mut bytes = encode(Outcome::Ok, &String::from("hello"), 1024).unwrap();
        bytes.truncate(bytes.len() - 2);
        assert!(matches!(
            parse(&bytes).unwrap().decode::<String>(),
            Err(CodecError::Json { .. })
        ));
    }

    #[test]
    fn oversized_values_are_refused() {
        let err = encode(Outcome::Ok, &"x".repeat(100), 50).unwrap_err();
        assert!(matches!(err, CodecError::TooLarge { limit: 50, .. }));
    }
}
