//! The answer the layer stores for replay: status code and message, the
//! response message, allow-listed metadata and trailers.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use http_body::Frame;
use serde::{Deserialize, Serialize};

use crate::IDEMPOTENT_REPLAYED;

/// A unary call's answer as stored. Records are read by shape, so this
/// type may move; its fields are the stored format.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredCall {
    /// The `grpc-status` code.
    pub(crate) code: i32,
    /// The `grpc-message`, as sent (percent-encoded).
    message: Vec<u8>,
    /// Allow-listed response metadata.
    headers: Vec<(String, Vec<u8>)>,
    /// The response body: the framed response message, if any.
    body: Vec<u8>,
    /// Allow-listed trailers (always `grpc-status-details-bin`).
    trailers: Vec<(String, Vec<u8>)>,
}

/// Metadata that always travels with the answer it describes.
const ALWAYS: &[&str] = &["grpc-status-details-bin", "content-type", "grpc-encoding"];

impl StoredCall {
    /// The answer's code from its trailers, or from its headers for a
    /// trailers-only answer; `UNKNOWN` (2) when neither says.
    pub(crate) fn capture(
        headers: &HeaderMap,
        body: Bytes,
        trailers: Option<&HeaderMap>,
        keep: &[HeaderName],
    ) -> Self {
        let status_map = match trailers {
            Some(trailers) if trailers.contains_key("grpc-status") => trailers,
            _ => headers,
        };
        let code = status_map
            .get("grpc-status")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(2);
        let message = status_map
            .get("grpc-message")
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default();
        let pick = |map: &HeaderMap| -> Vec<(String, Vec<u8>)> {
            map.iter()
                .filter(|(name, _)| keep.contains(name) || ALWAYS.contains(&name.as_str()))
                .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
                .collect()
        };
        StoredCall {
            code,
            message,
            headers: pick(headers),
            body: body.to_vec(),
            trailers: trailers.map(pick).unwrap_or_default(),
        }
    }

    /// The answer as a response: the stored metadata, the body, and the
    /// trailers with the code and message; `replayed` adds
    /// `idempotent-replayed: true`.
    pub(crate) fn response(&self, replayed: bool) -> Response<tonic::body::Body> {
        let mut headers = to_map(&self.headers);
        if replayed {
            headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        }
        let mut trailers = to_map(&self.trailers);
        trailers.insert("grpc-status", HeaderValue::from(self.code));
        if let Ok(message) = HeaderValue::from_bytes(&self.message)
            && !self.message.is_empty()
        {
            trailers.insert("grpc-message", message);
        }
        let body = Replayed::new(Bytes::from(self.body.clone()), Some(trailers));
        let mut response = Response::new(tonic::body::Body::new(body));
        *response.headers_mut() = headers;
        response
    }
}

fn to_map(pairs: &[(String, Vec<u8>)]) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::from_bytes(value),
        ) {
            map.append(name, value);
        }
    }
    map
}

/// A body of one data frame and the trailers.
pub(crate) struct Replayed {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Replayed {
    pub(crate) fn new(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        Replayed {
            data: Some(data).filter(|data| !data.is_empty()),
            trailers,
        }
    }
}

impl http_body::Body for Replayed {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }
}
