//! Reading and writing records' bytes without a call: the part of
//! [`idem::admin`](crate::admin) that knows the record format, which the
//! store contract does not.

use crate::error::CodecError;
use crate::record::{self, Kind};

/// A stored record's parts, its value as the record's own JSON.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordParts {
    /// `ok` (the function's value), `err` (a stored error) or `not_stored`
    /// (the body ran; its result could not be stored).
    pub kind: &'static str,
    /// The value's version (0 unless the function sets one).
    pub version: u32,
    /// The name of the type stored, as written (for people, not checks).
    pub type_name: String,
    /// The value as stored: JSON, with format 3's escapes for what JSON
    /// cannot carry left as written (`{"$u128":"…"}`, `{"$f64":"NaN"}`,
    /// `{"$some":null}`, `{"$map":[[k,v],…]}`, a `$` key with one more
    /// `$`), so nothing is lost; [`display_value`](super::display_value) renders them for
    /// people. For `not_stored`, the reason as a string.
    pub value: serde_json::Value,
}

/// Reads a stored record without knowing its type, for inspection: any
/// record the library wrote reads, whatever its values (`u128::MAX`, NaN,
/// `Some(None)`), and a value is never mistaken for a changed shape.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use idem::admin::{Admin, decode_record_json};
/// # let dir = std::env::temp_dir().join(format!("idem-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let store = idem::SqliteStore::open(dir.join("inspect.db")).await.unwrap();
/// let idem = idem::Idempotency::new(store.clone());
/// let _: Result<(u32, String), idem::Error> =
///     idem.call("orders", "o-1").run(|| async { Ok((7, "ok".to_owned())) }).await;
/// let info = store.inspect(&idem::key::RecordKey::new("orders", "o-1")).await.unwrap().unwrap();
/// let parts = decode_record_json(&info.record.unwrap()).unwrap();
/// assert_eq!(parts.value, serde_json::json!([7, "ok"]));
/// # }
/// ```
pub fn decode_record_json(bytes: &[u8]) -> Result<RecordParts, CodecError> {
    let parsed = record::parse(bytes)?;
    let (kind, value) = match parsed.kind {
        Kind::Ok => ("ok", raw_json(&parsed)?),
        Kind::Err => ("err", raw_json(&parsed)?),
        Kind::NotStored => (
            "not_stored",
            serde_json::Value::String(parsed.not_stored().to_string()),
        ),
    };
    Ok(RecordParts {
        kind,
        version: parsed.version,
        type_name: parsed.type_name.to_owned(),
        value,
    })
}

fn raw_json(parsed: &record::Parsed<'_>) -> Result<serde_json::Value, CodecError> {
    parsed.raw_json().map_err(|source| CodecError::Json {
        action: "read",
        type_name: "serde_json::Value",
        source,
    })
}

/// Encodes `value` as the record a completed call stores for it, with no
/// size limit: for tools and tests that write records (a migration, a
/// fixture, a benchmark).
///
/// ```
/// let bytes = idem::admin::encode_record(&(7u32, "ok")).unwrap();
/// let back: (u32, String) = idem::admin::decode_record(&bytes).unwrap();
/// assert_eq!(back, (7, "ok".to_owned()));
/// ```
pub fn encode_record<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    record::encode(Kind::Ok, value, usize::MAX)
}

/// Decodes a stored record's `Ok` value as `T`, as a replay would; a
/// record of a result that could not be stored is
/// [`CodecError::NotStored`], a stored error is
/// [`CodecError::ErrorNotReplayable`].
///
/// ```
/// let bytes = idem::admin::encode_record(&u128::MAX).unwrap();
/// assert_eq!(idem::admin::decode_record::<u128>(&bytes).unwrap(), u128::MAX);
/// assert!(idem::admin::decode_record::<u128>(b"not a record").is_err());
/// ```
pub fn decode_record<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let parsed = record::parse(bytes)?;
    match parsed.kind {
        Kind::Ok => parsed.decode(),
        Kind::NotStored => Err(parsed.not_stored()),
        Kind::Err => Err(CodecError::ErrorNotReplayable(parsed.type_name.to_owned())),
    }
}
