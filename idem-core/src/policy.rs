//! What happens to an `Err`: released so a retry runs, or stored and
//! replayed.

use serde::{Serialize, de::DeserializeOwned};

use crate::CodecError;
use crate::record::{self, Outcome};

/// Decides, per error, whether it is stored and replayed or released.
///
/// Chosen with [`Call::errors`](crate::Call::errors): [`ReleaseErrors`] (the
/// default), or [`StoreErrorsIf`] built by [`replay_errors`] or
/// [`store_errors_if`].
///
/// ```
/// use idem::ErrorPolicy;
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// enum PayError { Declined, Timeout }
/// let policy = idem::store_errors_if(|e: &PayError| matches!(e, PayError::Declined));
/// assert!(policy.record(&PayError::Declined, 1 << 20).is_some());
/// assert!(policy.record(&PayError::Timeout, 1 << 20).is_none());
/// assert!(ErrorPolicy::<PayError>::record(&idem::ReleaseErrors, &PayError::Declined, 1 << 20).is_none());
/// ```
pub trait ErrorPolicy<E> {
    /// The record that stores this error for duplicates (encoded within
    /// `limit` bytes, or why it cannot be), or `None` when the error is
    /// released so that a retry runs the body again.
    fn record(&self, error: &E, limit: usize) -> Option<Result<Vec<u8>, CodecError>>;
    /// Decodes a stored error.
    fn decode(&self, record: &[u8]) -> Result<E, CodecError>;
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
pub struct StoreErrorsIf<F>(F);

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
pub fn replay_errors<E>() -> StoreErrorsIf<fn(&E) -> bool> {
    StoreErrorsIf(|_| true)
}

/// Asks `predicate`, per error, whether to store it: a declined card is
/// replayed, a timeout is retried.
///
/// ```
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// enum PayError { Declined, Timeout }
/// let policy = idem::store_errors_if(|e: &PayError| matches!(e, PayError::Declined));
/// # let _ = policy;
/// ```
pub fn store_errors_if<E, F: Fn(&E) -> bool>(predicate: F) -> StoreErrorsIf<F> {
    StoreErrorsIf(predicate)
}

impl<E, F> ErrorPolicy<E> for StoreErrorsIf<F>
where
    E: Serialize + DeserializeOwned,
    F: Fn(&E) -> bool,
{
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
    record::encode_replayable(Outcome::Err, error, limit)
}

/// A stored error, decoded from its record.
pub(crate) fn decode_error<E: DeserializeOwned>(record: &[u8]) -> Result<E, CodecError> {
    record::parse(record)?.decode()
}
