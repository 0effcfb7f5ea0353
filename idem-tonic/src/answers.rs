//! idem's own answers as gRPC statuses, each with a `google.rpc.ErrorInfo`
//! detail (domain `idemkit`) and, for a call in progress, a
//! `google.rpc.RetryInfo` delay.

use std::collections::HashMap;
use std::time::Duration;

use http::Response;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use idem_core::Error;

use crate::scope::BadKey;

/// The `ErrorInfo` domain of idem's answers: the published crate's name.
pub const DOMAIN: &str = "idemkit";

/// A status with its `ErrorInfo` (and `RetryInfo` when `retry` is set).
pub(crate) fn status(code: Code, reason: &str, message: String, retry: Option<Duration>) -> Status {
    let mut details = ErrorDetails::new();
    details.set_error_info(reason, DOMAIN, HashMap::<String, String>::new());
    if retry.is_some() {
        details.set_retry_info(retry);
    }
    Status::with_error_details(code, message, details)
}

pub(crate) fn respond(status: Status) -> Response<tonic::body::Body> {
    status.into_http()
}

/// A missing key on a method that requires one, or a malformed key.
pub(crate) fn bad_key(bad: BadKey) -> Status {
    match bad {
        BadKey::Missing => status(
            Code::InvalidArgument,
            "IDEMPOTENCY_KEY_MISSING",
            "this method requires an `idempotency-key` metadata entry".into(),
            None,
        ),
        BadKey::Malformed => status(
            Code::InvalidArgument,
            "IDEMPOTENCY_KEY_INVALID",
            "the `idempotency-key` metadata must be one value of 1 to 255 visible ASCII characters"
                .into(),
            None,
        ),
    }
}

/// idem's error for a call as a status.
pub(crate) fn of_error(error: &Error) -> Status {
    let message = error.to_string();
    match error {
        Error::InProgress { retry_after, .. } => status(
            Code::Aborted,
            "IDEMPOTENCY_IN_PROGRESS",
            message,
            Some(*retry_after),
        ),
        Error::LeaseLost { .. } => status(
            Code::Aborted,
            "IDEMPOTENCY_LEASE_LOST",
            message,
            Some(Duration::from_secs(1)),
        ),
        Error::FingerprintMismatch { .. } => status(
            Code::InvalidArgument,
            "IDEMPOTENCY_KEY_REUSED",
            message,
            None,
        ),
        Error::Expired { .. } => status(
            Code::FailedPrecondition,
            "IDEMPOTENCY_KEY_EXPIRED",
            message,
            None,
        ),
        Error::Store(_) => status(
            Code::Unavailable,
            "IDEMPOTENCY_STORE_UNAVAILABLE",
            message,
            Some(Duration::from_secs(1)),
        ),
        Error::InvalidKey(_) => status(
            Code::InvalidArgument,
            "IDEMPOTENCY_KEY_INVALID",
            message,
            None,
        ),
        _ => status(Code::Internal, "IDEMPOTENCY_INTERNAL", message, None),
    }
}
