//! Buffering a guarded request's body within the layer's limit, and typing
//! the call's body closure (what the attempt runs) as run once.

use axum::body::Body;
use axum::http::header;
use axum::http::request::Parts;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::Problem;
use crate::answers::too_large;

/// Buffers the request body, refusing one over `limit` (413) before reading
/// it when `Content-Length` tells.
pub(crate) async fn read_body(parts: &Parts, body: Body, limit: usize) -> Result<Bytes, Problem> {
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.is::<LengthLimitError>() => Err(too_large(limit)),
        Err(err) => Err(Problem::new(
            400,
            "body-unreadable",
            "Request body unreadable",
            format!("The request body could not be read: {err}."),
        )),
    }
}

/// `body`, typed as run once (a closure bound to a name is not).
pub(crate) fn once<F: FnOnce() -> R, R>(body: F) -> F {
    body
}
