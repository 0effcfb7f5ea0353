//! What happens to an `Err`: released so a retry runs, or stored and
//! replayed.

use serde::{Serialize, de::DeserializeOwned};

use crate::CodecError;
use crate::record::{self, Kind};

/// Decides, per error, whether it is stored and replayed or released.
///
/// Chosen with [`Call::errors`](crate::Call::errors): [`ReleaseErrors`] (the
/// default), or [`ReplayErrors`] built by [`replay_errors`] or
/// [`replay_errors_if`]. Sealed: the runtime owns the stored record's
/// format, so only these policies implement it; what a policy decides is
/// [`stores`](ErrorPolicy::stores).
///
/// ```
/// use idem::ErrorPolicy;
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// enum PayError { Declined, Timeout }
/// let policy = idem::replay_errors_if(|e: &PayError| matches!(e, PayError::Declined));
/// assert!(policy.stores(&PayError::Declined));
/// assert!(!policy.stores(&PayError::Timeout));
/// assert!(!ErrorPolicy::<PayError>::stores(&idem::ReleaseErrors, &PayError::Declined));
/// ```
pub trait ErrorPolicy<E>: sealed::Sealed {
    /// Whether `error` is stored and replayed to duplicates (`true`) or
    /// released so that a retry runs the body again (`false`).
    fn stores(&self, error: &E) -> bool;
    /// The record that stores this error for duplicates (encoded within
    /// `limit` bytes, or why it cannot be), or `None` when it is released.
    #[doc(hidden)]
    fn record(&self, error: &E, limit: usize) -> Option<Result<Vec<u8>, CodecError>>;
    /// Decodes a stored error.
    #[doc(hidden)]
    fn decode(&self, record: &[u8]) -> Result<E, CodecError>;
}

mod sealed {
    /// Keeps [`ErrorPolicy`](super::ErrorPolicy) to the runtime's own
    /// policies: public in a private module, so nameable by no one else.
    #[allow(unreachable_pub)]
    pub trait Sealed {}
    impl Sealed for super::ReleaseErrors {}
    impl<F> Sealed for super::ReplayErrors<F> {}
    impl<E> Sealed for crate::__private::CheckedPolicy<E> {}
}

/// Every `Err` releases the claim, so the next call runs the body again.
///
/// ```
/// # async fn demo(idem: idem::Idempotency) {
/// let out: Result<u32, idem::Error> = idem
///     .call("jobs", "job-1")
///     .errors(idem::ReleaseErrors)
///     .run(|| async { Ok(1) })
///     .await;
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ReleaseErrors;

impl<E> ErrorPolicy<E> for ReleaseErrors {
    fn stores(&self, _: &E) -> bool {
        false
    }
    fn record(&self, _: &E, _: usize) -> Option<Result<Vec<u8>, CodecError>> {
        None
    }
    fn decode(&self, record: &[u8]) -> Result<E, CodecError> {
        Err(CodecError::ErrorNotReplayable(
            record::parse(record)?.type_name.to_owned(),
        ))
    }
}

/// Stores the errors for which the predicate answers `true`; the rest are
/// released. `E` must be serializable.
#[derive(Debug, Clone, Copy)]
pub struct ReplayErrors<F>(F);

/// Stores every `Err` and replays it to duplicates.
///
/// ```
/// # async fn demo(idem: idem::Idempotency) {
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// enum PayError { Declined, Idem(String) }
/// impl From<idem::Error> for PayError {
///     fn from(e: idem::Error) -> Self { PayError::Idem(e.to_string()) }
/// }
/// let out: Result<u32, PayError> = idem
///     .call("payments", "order-1")
///     .errors(idem::replay_errors())
///     .run(|| async { Err(PayError::Declined) })
///     .await;
/// # }
/// ```
pub fn replay_errors<E>() -> ReplayErrors<fn(&E) -> bool> {
    ReplayErrors(|_| true)
}

/// Asks `predicate`, per error, whether to store it: a declined card is
/// replayed, a timeout is retried.
///
/// ```
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// enum PayError { Declined, Timeout }
/// let policy = idem::replay_errors_if(|e: &PayError| matches!(e, PayError::Declined));
/// # let _ = policy;
/// ```
pub fn replay_errors_if<E, F: Fn(&E) -> bool>(predicate: F) -> ReplayErrors<F> {
    ReplayErrors(predicate)
}

impl<E, F> ErrorPolicy<E> for ReplayErrors<F>
where
    E: Serialize + DeserializeOwned,
    F: Fn(&E) -> bool,
{
    fn stores(&self, error: &E) -> bool {
        (self.0)(error)
    }
    fn record(&self, error: &E, limit: usize) -> Option<Result<Vec<u8>, CodecError>> {
        (self.0)(error).then(|| encode_error(error, limit))
    }
    fn decode(&self, record: &[u8]) -> Result<E, CodecError> {
        decode_error(record)
    }
}

/// A stored error's record.
pub(crate) fn encode_error<E: Serialize + DeserializeOwned>(
    error: &E,
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    record::encode_replayable(Kind::Err, error, limit)
}

/// A stored error, decoded from its record.
pub(crate) fn decode_error<E: DeserializeOwned>(record: &[u8]) -> Result<E, CodecError> {
    record::parse(record)?.decode()
}
