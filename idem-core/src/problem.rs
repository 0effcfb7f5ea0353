//! HTTP answers for idem's errors (feature `axum`): RFC 9457
//! `application/problem+json` bodies, and `IntoResponse` for [`Error`].
//!
//! The `idem` crate re-exports this as part of `idem::http`.

use std::borrow::Cow;
use std::time::Duration;

use axum_core::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

use crate::{CodecError, Error};

/// Where the problem types are documented; each type is this plus a
/// fragment such as `in-progress`.
pub const PROBLEM_TYPE_BASE: &str = "https://docs.rs/idemkit/latest/idem/http/index.html#";

/// An RFC 9457 problem: the body of every error answer of idem's HTTP
/// layer and extractor, sent as `application/problem+json` with `type`,
/// `title`, `status` and `detail`, and a `Retry-After` header when the
/// client should come back later.
///
/// Every [`Error`] converts into one, with the status of [`Error::status`].
///
/// ```
/// use std::time::Duration;
/// use axum_core::response::IntoResponse;
/// use idem::http::Problem;
///
/// let problem = Problem::new(413, "body-too-large", "Request body too large", "at most 1 MiB")
///     .retry_after(Duration::from_millis(1500));
/// assert_eq!(problem.status(), 413);
/// assert!(problem.type_uri().ends_with("#body-too-large"));
///
/// let response = problem.into_response();
/// assert_eq!(response.headers()["content-type"], "application/problem+json");
/// assert_eq!(response.headers()["retry-after"], "2"); // whole seconds, rounded up
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    type_uri: String,
    title: String,
    status: u16,
    detail: String,
    #[serde(skip)]
    retry_after: Option<Duration>,
}

impl Problem {
    /// A problem of type [`PROBLEM_TYPE_BASE`] + `slug`.
    ///
    /// ```
    /// let p = idem::http::Problem::new(400, "missing-key", "Missing Idempotency-Key", "send one");
    /// assert_eq!(p.type_uri(), "https://docs.rs/idemkit/latest/idem/http/index.html#missing-key");
    /// ```
    pub fn new(
        status: u16,
        slug: &str,
        title: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            type_uri: format!("{PROBLEM_TYPE_BASE}{slug}"),
            title: title.into(),
            status,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// Adds a `Retry-After` header (whole seconds, rounded up, at least 1).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let p = idem::http::Problem::new(409, "in-progress", "t", "d")
    ///     .retry_after(Duration::from_secs(3));
    /// assert_eq!(p.retry_after_secs(), Some(3));
    /// ```
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Replaces the problem type with an absolute URI of your own, for
    /// problems of your application rather than idem's.
    ///
    /// ```
    /// let p = idem::http::Problem::new(402, "declined", "Payment declined", "insufficient funds")
    ///     .with_type("https://payments.example/problems/declined");
    /// assert_eq!(p.type_uri(), "https://payments.example/problems/declined");
    /// ```
    pub fn with_type(mut self, type_uri: impl Into<String>) -> Self {
        self.type_uri = type_uri.into();
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The problem type: a URI naming the kind of problem.
    pub fn type_uri(&self) -> &str {
        &self.type_uri
    }

    /// A short summary of the kind of problem.
    pub fn title(&self) -> &str {
        &self.title
    }

    /// What happened to this request.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The `Retry-After` value in whole seconds, if any.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after.map(retry_after_secs)
    }
}

/// Whole seconds, rounded up, and at least one: `Retry-After: 0` would
/// invite a client to hammer the server.
fn retry_after_secs(after: Duration) -> u64 {
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    secs.max(1)
}

impl From<&Error> for Problem {
    fn from(err: &Error) -> Self {
        let (kind, title, detail) = words(err);
        let problem = Problem::new(err.status(), kind, title, detail);
        match err {
            Error::InProgress { retry_after, .. } => problem.retry_after(*retry_after),
            Error::LeaseLost { .. } => problem.retry_after(Duration::from_secs(1)),
            _ => problem,
        }
    }
}

/// An error's problem type, title and detail.
fn words(err: &Error) -> (&'static str, &'static str, Cow<'static, str>) {
    match err {
        Error::InProgress { .. } => (
            "in-progress",
            "Request in progress",
            "A request with this Idempotency-Key is still being processed; retry later to get its response.".into(),
        ),
        Error::FingerprintMismatch { .. } => (
            "fingerprint-mismatch",
            "Idempotency-Key reused",
            "This Idempotency-Key was already used with a different request; use a new key for a new request.".into(),
        ),
        Error::Expired { .. } => (
            "expired",
            "Request already processed",
            "The request with this Idempotency-Key was processed, and its stored response has expired; it will not be processed again. Use a new key for a new request.".into(),
        ),
        Error::LeaseLost { taken_over: true, .. } => (
            "lease-lost",
            "Lease lost",
            "This request ran longer than its lease and a retry took it over; its response was not stored.".into(),
        ),
        Error::LeaseLost { .. } => (
            "lease-lost",
            "Lease lost",
            "This request ran longer than its lease, which expired; its response was not stored, and a retry with the same Idempotency-Key runs it again.".into(),
        ),
        Error::Store(err) if !err.kind().is_transient() => (
            "store-misconfigured",
            "Idempotency store misconfigured",
            "The server's idempotency store cannot work as configured; retrying will not help until it is fixed.".into(),
        ),
        Error::Store(_) => (
            "store-unavailable",
            "Idempotency store unavailable",
            "The idempotency store could not be reached; retry later with the same Idempotency-Key.".into(),
        ),
        Error::Codec(CodecError::NotStored(_)) => (
            "not-stored",
            "Response not replayable",
            "The request with this Idempotency-Key was processed, but its response could not be stored, so it cannot be replayed; it will not be processed again. Use a new key for a new request.".into(),
        ),
        Error::Codec(_) => (
            "codec",
            "Stored response unreadable",
            "A stored response could not be read or written.".into(),
        ),
        Error::InvalidKey(reason) => (
            "invalid-key",
            "Invalid Idempotency-Key",
            Cow::Owned(format!("The Idempotency-Key is not acceptable: {reason}.")),
        ),
        Error::InvalidOption(_) => (
            "invalid-option",
            "Idempotency misconfigured",
            "The server's idempotency settings for this request cannot work.".into(),
        ),
        Error::InvalidStep { .. } => (
            "invalid-step",
            "Recovery point misused",
            "The server's handler used a recovery point (idem::step) where it cannot work.".into(),
        ),
        Error::NotConfigured => (
            "not-configured",
            "Idempotency not configured",
            "An idempotent function of the server ran without a store: the service must call idem::install at startup or name its store.".into(),
        ),
    }
}

impl From<Error> for Problem {
    fn from(err: Error) -> Self {
        Problem::from(&err)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after_secs() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// An [`Error`] answers with its [`Problem`]: 409 (with `Retry-After`) for
/// `InProgress` and `LeaseLost`, 422 for `FingerprintMismatch`, 400 for
/// `InvalidKey`, 503 for `Store`, 500 otherwise.
///
/// ```
/// use axum_core::response::IntoResponse;
///
/// let response = idem::Error::InvalidKey("empty".into()).into_response();
/// assert_eq!(response.status(), 400);
/// assert_eq!(response.headers()["content-type"], "application/problem+json");
/// ```
impl IntoResponse for Error {
    fn into_response(self) -> Response {
        Problem::from(&self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
    }

    #[test]
    fn every_error_has_its_status_and_a_problem_body() {
        let err = Error::InProgress {
            scope: "s".into(),
            key: crate::RecordKey::new(&"s", &"k").short(),
            retry_after: Duration::from_millis(29_500),
        };
        let problem = Problem::from(&err);
        assert_eq!(problem.status(), 409);
        assert_eq!(problem.retry_after_secs(), Some(30));
        let json = serde_json::to_value(&problem).unwrap();
        assert_eq!(json["status"], 409);
        assert_eq!(json["type"], format!("{PROBLEM_TYPE_BASE}in-progress"));
        assert!(json.get("retry_after").is_none());
    }
}
