//! The middleware's own error: the deadline ran out during an attempt.

use std::fmt;

/// The [`deadline`](crate::IdempotencyMiddleware::deadline) ran out
/// while an attempt was still waiting for its answer.
///
/// It reaches the caller as `reqwest_middleware::Error::Middleware`. The
/// server may have run the request (or still be running it): try again
/// later **with the same key**, which is why a caller that may do so sets
/// its own (see [`new_key`](crate::new_key)).
///
/// ```
/// use idem::client::DeadlineExceeded;
///
/// fn ran_out(err: &reqwest_middleware::Error) -> Option<u32> {
///     match err {
///         reqwest_middleware::Error::Middleware(err) => {
///             err.downcast_ref::<DeadlineExceeded>().map(DeadlineExceeded::attempts)
///         }
///         _ => None,
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadlineExceeded {
    attempts: u32,
}

impl DeadlineExceeded {
    pub(crate) fn new(attempts: u32) -> Self {
        Self { attempts }
    }

    /// How many attempts were sent, counting the one cut short.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the idempotent request's deadline ran out during attempt {}; \
             its outcome is unknown: retry later with the same Idempotency-Key",
            self.attempts
        )
    }
}

impl std::error::Error for DeadlineExceeded {}
