//! The layer's own answers: a stored response replayed to a duplicate
//! (or refused for its encoding), and the problems the layer answers when
//! the inner service could not.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Response};
use axum::response::IntoResponse;

use crate::Problem;
use crate::stored::StoredResponse;

/// A stored answer for a duplicate, unless it is encoded in a way the
/// duplicate refuses (`Accept-Encoding`): then 406, since idem does not
/// re-encode bodies.
pub(crate) fn replay(
    stored: &StoredResponse,
    accept_encoding: Option<&HeaderValue>,
) -> Response<Body> {
    match (stored.content_encoding(), accept_encoding) {
        (Some(coding), Some(accepted)) if !accepts(accepted.as_bytes(), coding) => Problem::new(
            406,
            "encoding-not-acceptable",
            "Stored response encoding not acceptable",
            format!(
                "The response to this Idempotency-Key is stored with Content-Encoding {}, which this request's Accept-Encoding refuses; send Accept-Encoding: {0}.",
                String::from_utf8_lossy(coding)
            ),
        )
        .into_response(),
        _ => stored.replay(),
    }
}

/// Whether an `Accept-Encoding` value accepts `coding` (RFC 9110 §12.5.3:
/// listed or `*` with a q-value above zero).
fn accepts(accepted: &[u8], coding: &[u8]) -> bool {
    let mut wildcard = false;
    for item in accepted.split(|&b| b == b',') {
        let mut params = item.split(|&b| b == b';');
        let name = params.next().unwrap_or_default().trim_ascii();
        let refused = params.any(|param| {
            let param = param.trim_ascii();
            param.len() >= 2
                && param[..2].eq_ignore_ascii_case(b"q=")
                && std::str::from_utf8(&param[2..])
                    .ok()
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    == Some(0.0)
        });
        if name.eq_ignore_ascii_case(coding) {
            return !refused;
        }
        if name == b"*" {
            wildcard = !refused;
        }
    }
    wildcard
}

/// The answer for a duplicate that waited on an attempt that failed: that
/// attempt's answer, or 409 when it was not captured.
pub(crate) fn failed_attempt(
    answer: Option<Arc<StoredResponse>>,
    accept_encoding: Option<&HeaderValue>,
) -> Response<Body> {
    match answer {
        Some(stored) => replay(&stored, accept_encoding),
        None => Problem::new(
            409,
            "attempt-failed",
            "Request failed",
            "The request with this Idempotency-Key that this one waited for failed and nothing was stored; retry with the same Idempotency-Key to run it again.",
        )
        .retry_after(Duration::from_secs(1))
        .into_response(),
    }
}

/// 413: the request body is larger than the layer buffers.
pub(crate) fn too_large(limit: usize) -> Problem {
    Problem::new(
        413,
        "body-too-large",
        "Request body too large",
        format!("The request body is larger than {limit} bytes; nothing was processed."),
    )
}

/// The inner service panicked: its claim was released as the task
/// unwound, so a retry runs again.
pub(crate) fn handler_panicked() -> Response<Body> {
    tracing::error!("idem: the handler panicked; claim released");
    Problem::new(
        500,
        "handler-panicked",
        "Handler failed",
        "The request handler failed before answering; nothing was stored, so a retry with the same Idempotency-Key runs again.",
    )
    .into_response()
}

/// The runtime shut down while the request ran.
pub(crate) fn runtime_stopped() -> Response<Body> {
    Problem::new(
        503,
        "shutting-down",
        "Shutting down",
        "The server stopped before the request ended; retry with the same Idempotency-Key.",
    )
    .retry_after(Duration::from_secs(1))
    .into_response()
}

pub(crate) fn response_failed() -> Response<Body> {
    Problem::new(
        500,
        "response-failed",
        "Response failed",
        "The handler ran, but its response body failed before it could be sent; it will not run again for this Idempotency-Key.",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::accepts;

    #[test]
    fn accept_encoding_lists_wildcards_and_zero_q() {
        assert!(accepts(b"gzip, deflate, br", b"gzip"));
        assert!(accepts(b"GZIP;q=0.5", b"gzip"));
        assert!(!accepts(b"identity", b"gzip"));
        assert!(!accepts(b"gzip;q=0", b"gzip"));
        assert!(accepts(b"*", b"br"));
        assert!(!accepts(b"*;q=0", b"br"));
        assert!(!accepts(b"", b"gzip"));
    }
}
