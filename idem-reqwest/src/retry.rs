//! Which outcomes of an attempt are retried, and after how long the server
//! asked us to wait.

use std::fmt;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Response, StatusCode};

/// Why an attempt is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The attempt timed out (reqwest's timeout, the client's or the
    /// request's).
    Timeout,
    /// No connection could be made.
    Connect,
    /// The connection failed after the request was (perhaps) sent: the
    /// server may have run it, which is what the key is for.
    Transport,
    /// A status that says "later": 409 with `Retry-After` (the key's first
    /// request still runs), 429, or a 5xx.
    Status(StatusCode),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Timeout => f.write_str("timeout"),
            Reason::Connect => f.write_str("connect error"),
            Reason::Transport => f.write_str("connection lost"),
            Reason::Status(status) => write!(f, "status {}", status.as_u16()),
        }
    }
}

/// A retry: why, and the wait the server asked for, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry {
    pub(crate) reason: Reason,
    pub(crate) after: Option<Duration>,
}

/// Whether an attempt's outcome is retried with the same key and body.
/// Errors from other middleware, builder and redirect errors are not: the
/// next attempt would fail the same way.
pub(crate) fn classify(outcome: &reqwest_middleware::Result<Response>) -> Option<Retry> {
    match outcome {
        Ok(response) => retried_status(response.status(), response.headers()),
        Err(reqwest_middleware::Error::Reqwest(err)) => {
            let reason = if err.is_timeout() {
                Reason::Timeout
            } else if err.is_connect() {
                Reason::Connect
            } else if err.is_request() {
                Reason::Transport
            } else {
                return None;
            };
            Some(Retry {
                reason,
                after: None,
            })
        }
        Err(reqwest_middleware::Error::Middleware(_)) => None,
    }
}

/// 409 only with `Retry-After`: that is the idempotency draft's "your first
/// request still runs"; a 409 without it is the application's own conflict,
/// a final answer. 501 and 505 never change on a retry.
fn retried_status(status: StatusCode, headers: &HeaderMap) -> Option<Retry> {
    let after = retry_after(headers, SystemTime::now());
    let retried = match status {
        StatusCode::CONFLICT => after.is_some(),
        StatusCode::TOO_MANY_REQUESTS => true,
        StatusCode::NOT_IMPLEMENTED | StatusCode::HTTP_VERSION_NOT_SUPPORTED => false,
        status => status.is_server_error(),
    };
    retried.then_some(Retry {
        reason: Reason::Status(status),
        after,
    })
}

/// `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3); a
/// date in the past is no wait. `None` when absent or malformed.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(retry_after: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |value| retry_after(&headers(Some(value)), now);
        assert_eq!(at("3"), Some(Duration::from_secs(3)));
        assert_eq!(at(" 0 "), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(at(&later), Some(Duration::from_secs(7)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(at(&earlier), Some(Duration::ZERO));
        assert_eq!(at("soon"), None);
        assert_eq!(at("-1"), None);
        assert_eq!(retry_after(&headers(None), now), None);
    }

    #[test]
    fn only_statuses_that_say_later_are_retried() {
        let retried = |status: u16, after: Option<&str>| {
            retried_status(StatusCode::from_u16(status).unwrap(), &headers(after)).is_some()
        };
        for status in [500, 502, 503, 504, 429] {
            assert!(retried(status, None), "{status}");
        }
        assert!(retried(409, Some("1")));
        for status in [200, 201, 400, 402, 404, 409, 422, 501, 505] {
            assert!(!retried(status, None), "{status}");
        }
        assert!(!retried(422, Some("1")), "a 422 is final, whatever it says");
    }
}
