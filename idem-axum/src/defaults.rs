//! The layer's defaults for which responses are stored and captured.

use axum::http::{StatusCode, header, response};

/// The 4xx answers that mean the request was refused before anything
/// happened (malformed, unauthenticated, forbidden, not found, not
/// acceptable, too large, unsupported media type, invalid, a failed
/// precondition), or that ask the client to try again (408, 409, 425,
/// 429): the key is released, so the corrected request or the retry runs.
const RELEASED_4XX: [u16; 25] = [
    400, 401, 403, 404, 405, 406, 407, 408, 409, 411, 412, 413, 414, 415, 416, 417, 421, 422, 424,
    425, 426, 428, 429, 431, 451,
];

/// The default of [`IdempotencyLayer::store_status`](crate::IdempotencyLayer::store_status): what says something
/// happened is stored; what says nothing happened releases the key.
///
/// Stored: every 2xx, `303 See Other` (the usual answer to a POST that
/// created something elsewhere), and the 4xx that are a final answer of
/// the business, such as `402 Payment Required` for a declined card, or
/// `410 Gone`, and any 4xx this list does not know. Released: the 4xx that
/// refuse a request before it is processed (400, 401, 403, 404, 405, 406,
/// 407, 411, 412, 413, 414, 415, 416, 417, 421, 422, 424, 426, 428, 431,
/// 451) or ask to try again (408, 409, 425, 429); other 1xx and 3xx; every
/// 5xx.
///
/// 422 is released because frameworks answer it for a body that does not
/// validate (axum's `Json` for a missing field); idem's own 422 (the key
/// reused with another body) is not a handler's answer and stores nothing.
///
/// ```
/// use axum::http::StatusCode;
/// use idem::http::stores_by_default;
///
/// assert!(stores_by_default(StatusCode::CREATED));
/// assert!(stores_by_default(StatusCode::PAYMENT_REQUIRED));
/// assert!(!stores_by_default(StatusCode::UNSUPPORTED_MEDIA_TYPE));
/// assert!(!stores_by_default(StatusCode::UNPROCESSABLE_ENTITY));
/// assert!(!stores_by_default(StatusCode::TOO_MANY_REQUESTS));
/// assert!(!stores_by_default(StatusCode::INTERNAL_SERVER_ERROR));
/// ```
pub fn stores_by_default(status: StatusCode) -> bool {
    status.is_success()
        || status == StatusCode::SEE_OTHER
        || (status.is_client_error() && !RELEASED_4XX.contains(&status.as_u16()))
}

/// The default of [`IdempotencyLayer::capture`](crate::IdempotencyLayer::capture): every response but a
/// `text/event-stream` (server-sent events), which may never end.
///
/// ```
/// use axum::http::{Response, header};
/// use idem::http::captured_by_default;
///
/// let (sse, _) = Response::builder().header(header::CONTENT_TYPE, "text/event-stream").body(()).unwrap().into_parts();
/// assert!(!captured_by_default("/events", &sse));
/// let (json, _) = Response::builder().header(header::CONTENT_TYPE, "application/json").body(()).unwrap().into_parts();
/// assert!(captured_by_default("/orders", &json));
/// ```
pub fn captured_by_default(_route: &str, response: &response::Parts) -> bool {
    let content_type = response.headers.get(header::CONTENT_TYPE);
    !content_type.is_some_and(|value| {
        value
            .as_bytes()
            .split(|&b| b == b';')
            .next()
            .is_some_and(|essence| {
                essence
                    .trim_ascii()
                    .eq_ignore_ascii_case(b"text/event-stream")
            })
    })
}
