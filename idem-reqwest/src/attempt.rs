//! The `idem.client.attempt` span of each attempt, and the one event that
//! says how it ended and what comes next.

use std::error::Error as _;
use std::fmt;
use std::time::Duration;

use reqwest::{Request, Response};
use tracing::field::Empty;

use crate::retry::Retry;

/// What follows an attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Then {
    /// Its outcome is the caller's answer: not a retried one.
    Answer,
    /// Another attempt after `wait`.
    Retry(Retry, Duration),
    /// A retried outcome handed to the caller all the same, because of
    /// what the `&str` says.
    GiveUp(Retry, &'static str),
}

/// The span of attempt `attempt` of the request whose key hashes to
/// `key_hash`.
pub(crate) fn span(key_hash: &str, attempt: u32, request: &Request) -> tracing::Span {
    tracing::info_span!(
        "idem.client.attempt",
        key_hash = %key_hash,
        attempt,
        method = %request.method(),
        status = Empty,
        error = Empty,
        retry = Empty,
    )
}

/// Records the attempt's outcome and what follows in its span, and says it
/// in one event.
pub(crate) fn ended(
    span: &tracing::Span,
    outcome: &reqwest_middleware::Result<Response>,
    then: Then,
) {
    match outcome {
        Ok(response) => span.record("status", response.status().as_u16()),
        Err(err) => span.record("error", tracing::field::display(Chain(err))),
    };
    match then {
        Then::Answer => tracing::debug!(parent: span, "answered"),
        Then::Retry(retry, wait) => {
            span.record("retry", tracing::field::display(retry.reason));
            tracing::debug!(parent: span, wait_ms = wait.as_millis() as u64, "retrying");
        }
        Then::GiveUp(retry, why) => {
            tracing::debug!(parent: span, reason = %retry.reason, why, "not retried");
        }
    }
}

/// An error with its sources, `: `-separated: reqwest's own message
/// ("error sending request") says little without them.
struct Chain<'a>(&'a reqwest_middleware::Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(err) = source {
            write!(f, ": {err}")?;
            source = err.source();
        }
        Ok(())
    }
}
