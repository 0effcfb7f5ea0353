//! The value the layer stores for replay: status, chosen headers, body.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, response};
use axum::response::Response;
use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::http::key::IDEMPOTENT_REPLAYED;

/// A response as stored: kept small in the record's JSON by writing bodies
/// and header values as text when they are UTF-8 and as base64 otherwise.
///
/// Records are read by shape, not by this type's path, so it may move; its
/// fields are the stored format (golden records in
/// `integration/tests/golden/` pin them).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StoredResponse {
    status: u16,
    headers: Vec<(String, Blob)>,
    body: Blob,
}

impl StoredResponse {
    /// Captures the status, the headers named in `keep` and the body.
    pub(crate) fn capture(parts: &response::Parts, body: &Bytes, keep: &[HeaderName]) -> Self {
        let headers = keep
            .iter()
            .flat_map(|name| {
                parts
                    .headers
                    .get_all(name)
                    .iter()
                    .map(|value| (name.as_str().to_owned(), Blob(value.as_bytes().to_vec())))
            })
            .collect();
        Self {
            status: parts.status.as_u16(),
            headers,
            body: Blob(body.to_vec()),
        }
    }

    /// The replayed answer, marked `Idempotent-Replayed: true`.
    pub(crate) fn into_replay(self) -> Response {
        let mut headers = HeaderMap::with_capacity(self.headers.len() + 1);
        for (name, Blob(value)) in self.headers {
            match (HeaderName::try_from(name), HeaderValue::from_bytes(&value)) {
                (Ok(name), Ok(value)) => {
                    headers.append(name, value);
                }
                _ => tracing::warn!("idem: a stored header is malformed; left out of the replay"),
            }
        }
        headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        let mut response = Response::new(Body::from(self.body.0));
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        *response.headers_mut() = headers;
        response
    }
}

/// Bytes that serialize as `{"t": "…"}` when they are UTF-8, else
/// `{"b64": "…"}`: JSON would otherwise write one number per byte.
#[derive(Debug)]
struct Blob(Vec<u8>);

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
            Ok(text) => BlobForm::Text(text).serialize(serializer),
            Err(_) => BlobForm::Base64(base64::encode(&self.0)).serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match BlobForm::<String>::deserialize(deserializer)? {
            BlobForm::Text(text) => Ok(Blob(text.into_bytes())),
            BlobForm::Base64(encoded) => base64::decode(&encoded)
                .map(Blob)
                .ok_or_else(|| serde::de::Error::custom("malformed base64 in a stored response")),
        }
    }
}

/// Standard base64 with padding: enough for stored bodies, no dependency.
mod base64 {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub(super) fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    pub(super) fn decode(text: &str) -> Option<Vec<u8>> {
        let chunks = text.as_bytes().chunks_exact(4);
        if !chunks.remainder().is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(text.len() / 4 * 3);
        for chunk in chunks {
            let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
            if pad > 2 {
                return None;
            }
            let mut n = 0u32;
            for (i, &c) in chunk[..4 - pad].iter().enumerate() {
                let value = ALPHABET.iter().position(|&a| a == c)? as u32;
                n |= value << (18 - 6 * i);
            }
            out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
        }
        Some(out)
    }
}

/// Decodes stored record bytes as a replayed response, for the fuzzer
/// (`fuzz/`): any input is an answer or a `CodecError`, never a panic.
#[doc(hidden)]
pub fn fuzz_stored_response(bytes: &[u8]) -> Result<Response, crate::CodecError> {
    crate::__private::decode_record::<StoredResponse>(bytes).map(StoredResponse::into_replay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 200) as u8).collect();
            let encoded = base64::encode(&bytes);
            assert_eq!(base64::decode(&encoded).unwrap(), bytes, "{encoded}");
        }
        assert_eq!(base64::encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64::encode(b"fo"), "Zm8=");
        assert_eq!(base64::decode("Zm8"), None);
        assert_eq!(base64::decode("Z!8="), None);
    }

    #[test]
    fn text_stays_text_and_binary_is_base64() {
        let stored = StoredResponse {
            status: 201,
            headers: vec![("content-type".into(), Blob(b"application/json".to_vec()))],
            body: Blob(vec![0xff, 0x00]),
        };
        let json = serde_json::to_string(&stored).unwrap();
        assert!(json.contains(r#"{"t":"application/json"}"#), "{json}");
        assert!(json.contains(r#"{"b64":"/wA="}"#), "{json}");
        let back: StoredResponse = serde_json::from_str(&json).unwrap();
        let response = back.into_replay();
        assert_eq!(response.status(), 201);
        assert_eq!(response.headers()["idempotent-replayed"], "true");
        assert_eq!(response.headers()["content-type"], "application/json");
    }
}
