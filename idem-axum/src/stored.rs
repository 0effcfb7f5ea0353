//! The value the layer stores for replay: status, chosen headers, body.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header, response};
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::idempotency_key::IDEMPOTENT_REPLAYED;

/// A response as stored. Bodies and header values are written as text when
/// that is no longer than base64 (readable JSON bodies stay readable in
/// `idem inspect`), and as base64 otherwise, so a body never grows by more
/// than a third in the record, whatever its bytes.
///
/// Records are read by shape, not by this type's path, so it may move; its
/// fields are the stored format (golden records in
/// `integration/tests/golden/` pin them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredResponse {
    status: u16,
    headers: Vec<(String, Blob)>,
    body: Blob,
}

/// A response's status and kept headers, before its body is known.
pub(crate) struct Head {
    status: u16,
    headers: Vec<(String, Blob)>,
}

impl Head {
    /// The status and the headers named in `keep`, plus `Content-Encoding`,
    /// which always travels with the body it describes.
    pub(crate) fn capture(parts: &response::Parts, keep: &[HeaderName]) -> Self {
        let encoding =
            (!keep.contains(&header::CONTENT_ENCODING)).then_some(&header::CONTENT_ENCODING);
        let headers = keep
            .iter()
            .chain(encoding)
            .flat_map(|name| {
                parts.headers.get_all(name).iter().map(|value| {
                    let value = Blob(Bytes::copy_from_slice(value.as_bytes()));
                    (name.as_str().to_owned(), value)
                })
            })
            .collect();
        Self {
            status: parts.status.as_u16(),
            headers,
        }
    }

    pub(crate) fn with_body(self, body: Bytes) -> StoredResponse {
        StoredResponse {
            status: self.status,
            headers: self.headers,
            body: Blob(body),
        }
    }
}

impl StoredResponse {
    /// The stored `Content-Encoding`, if the body is encoded.
    pub(crate) fn content_encoding(&self) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(name, _)| name.as_str() == header::CONTENT_ENCODING.as_str())
            .map(|(_, Blob(value))| value.as_ref())
    }

    /// The replayed answer, marked `Idempotent-Replayed: true`.
    pub(crate) fn replay(&self) -> Response {
        let mut headers = HeaderMap::with_capacity(self.headers.len() + 1);
        for (name, Blob(value)) in &self.headers {
            match (
                HeaderName::try_from(name.as_str()),
                HeaderValue::from_bytes(value),
            ) {
                (Ok(name), Ok(value)) => {
                    headers.append(name, value);
                }
                _ => tracing::warn!("idem: a stored header is malformed; left out of the replay"),
            }
        }
        headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        let mut response = Response::new(Body::from(self.body.0.clone()));
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        *response.headers_mut() = headers;
        response
    }
}

/// What the layer hands its call to store: a response, or why there is
/// none to store. The second fails to encode on purpose: the call then
/// settles the key with a not-stored record (as for any result that cannot
/// be stored), so duplicates get the `not-stored` problem and the handler
/// never runs twice.
#[derive(Debug)]
pub(crate) enum Kept {
    Response(StoredResponse),
    Unstorable(String),
}

impl Serialize for Kept {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Kept::Response(response) => response.serialize(serializer),
            Kept::Unstorable(reason) => Err(serde::ser::Error::custom(reason)),
        }
    }
}

impl<'de> Deserialize<'de> for Kept {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        StoredResponse::deserialize(deserializer).map(Kept::Response)
    }
}

/// Bytes that serialize as `{"t": "…"}` (text) or `{"b64": "…"}`, whichever
/// is shorter as JSON.
#[derive(Debug, Clone)]
struct Blob(Bytes);

#[derive(Serialize, Deserialize)]
enum BlobForm<S> {
    #[serde(rename = "t")]
    Text(S),
    #[serde(rename = "b64")]
    Base64(S),
}

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) if escaped_len(text) <= self.0.len().div_ceil(3) * 4 => {
                BlobForm::Text(text).serialize(serializer)
            }
            _ => BlobForm::Base64(STANDARD.encode(&self.0)).serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match BlobForm::<String>::deserialize(deserializer)? {
            BlobForm::Text(text) => Ok(Blob(Bytes::from(text))),
            BlobForm::Base64(encoded) => STANDARD
                .decode(encoded)
                .map(|bytes| Blob(Bytes::from(bytes)))
                .map_err(|_| serde::de::Error::custom("malformed base64 in a stored response")),
        }
    }
}

/// The length of `text` as a JSON string's contents: serde_json escapes
/// quotes, backslashes and control characters (`\n` in two bytes, most
/// others as `\u00XX` in six).
fn escaped_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// Decodes stored record bytes as a replayed response, for the fuzzer
/// (`fuzz/`): any input is an answer or a `CodecError`, never a panic.
/// Only in a fuzzing build (cargo-fuzz sets `--cfg fuzzing`).
#[cfg(fuzzing)]
pub fn fuzz_stored_response(bytes: &[u8]) -> Result<Response, idem_core::CodecError> {
    idem_core::admin::decode_record::<StoredResponse>(bytes).map(|stored| stored.replay())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(body: &[u8]) -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: vec![(
                "content-type".into(),
                Blob(Bytes::from_static(b"application/json")),
            )],
            body: Blob(Bytes::copy_from_slice(body)),
        }
    }

    #[test]
    fn text_stays_text_and_the_rest_is_base64() {
        let json = serde_json::to_string(&stored(&[0xff, 0x00])).unwrap();
        assert!(json.contains(r#"{"t":"application/json"}"#), "{json}");
        assert!(json.contains(r#"{"b64":"/wA="}"#), "{json}");
        let back: StoredResponse = serde_json::from_str(&json).unwrap();
        let response = back.replay();
        assert_eq!(response.status(), 201);
        assert_eq!(response.headers()["idempotent-replayed"], "true");
        assert_eq!(response.headers()["content-type"], "application/json");
    }

    #[test]
    fn no_body_grows_by_more_than_a_third() {
        // Control bytes are valid UTF-8 but six bytes each as JSON text.
        let controls = vec![0x01u8; 3000];
        let json = serde_json::to_vec(&stored(&controls)).unwrap();
        assert!(json.len() < 4100, "{} bytes", json.len());
        let back: StoredResponse = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.body.0, controls);
        // Plain JSON text stays text.
        let text = serde_json::to_string(&stored(br#"{"id":1}"#)).unwrap();
        assert!(text.contains(r#"{"t":"{\"id\":1}"}"#), "{text}");
    }

    #[test]
    fn an_unstorable_response_fails_to_encode() {
        let err = serde_json::to_vec(&Kept::Unstorable("too large".into())).unwrap_err();
        assert!(err.to_string().contains("too large"));
    }
}
