//! Why a token was refused, and the 400 problem that says so.

use std::fmt;

use axum::response::{IntoResponse, Response};

use crate::Problem;

/// Why a token was refused.
///
/// ```
/// use idem::http::{TokenError, Problem};
///
/// let problem = Problem::from(TokenError::Expired);
/// assert_eq!(problem.status(), 400);
/// assert!(problem.type_uri().ends_with("#token-expired"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a token this issuer made for this caller: malformed, altered,
    /// signed with a secret no longer accepted, issued to another caller,
    /// or made by the client.
    Invalid,
    /// A genuine token for this caller, past its expiry.
    Expired,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenError::Invalid => "not a token issued for this caller",
            TokenError::Expired => "the token has expired",
        })
    }
}

impl std::error::Error for TokenError {}

/// 400 `invalid-token` or `token-expired`.
impl From<TokenError> for Problem {
    fn from(err: TokenError) -> Self {
        match err {
            TokenError::Invalid => Problem::new(
                400,
                "invalid-token",
                "Invalid idempotency token",
                "The Idempotency-Key is not a token this server issued to you (it is malformed, altered, issued to another caller, or signed with a retired secret); nothing was processed. Ask for a new token.",
            ),
            TokenError::Expired => Problem::new(
                400,
                "token-expired",
                "Idempotency token expired",
                "The Idempotency-Key is a token that has expired; this request was not processed (an earlier one with this token may have been). Ask for a new token.",
            ),
        }
    }
}

/// The 400 problem+json answer.
impl IntoResponse for TokenError {
    fn into_response(self) -> Response {
        Problem::from(self).into_response()
    }
}
