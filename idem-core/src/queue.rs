//! Queue consumers: what to tell the broker after an idempotent handler.
//!
//! Brokers deliver at least once. Key the handler by the message's
//! business id (an order id, never the broker's delivery or message id),
//! and answer the broker with the [`Disposition`] of its outcome:
//!
//! | outcome | disposition |
//! | --- | --- |
//! | `Ok`, first run or replay | `Ack` |
//! | a stored `Err` (`errors = "replay"` or a predicate that says so), first run or replay | `Ack`: the answer is final |
//! | `Error::Codec(CodecError::NotStored(_))`: the first delivery's body ran, its result could not be stored | `Ack`: running it again would repeat its effect |
//! | `Error::Expired`: a redelivery after the record's TTL, within its tombstone (the first delivery completed) | `Ack`: running it again would repeat its effect |
//! | a released `Err`, `Error::Store` of a [transient](crate::StoreErrorKind::is_transient) kind, `Error::InProgress`, `Error::LeaseLost`, `Error::NotConfigured`, `Error::InvalidOption`, `Error::InvalidStep` | `Retry { after }`: negative ack with a delay |
//! | `Error::FingerprintMismatch` (same id, other payload), any other `Error::Codec`, `Error::InvalidKey`, `Error::Store` of a kind that does not pass by itself (a misconfigured or unsupported store) | `Reject`: dead-lettered, never retried; re-drive it once the cause is fixed |
//!
//! Three ways in:
//!
//! - a call run through the builder: [`process`] runs it and tells stored
//!   errors from released ones itself; or, for an error type that
//!   implements [`AsIdemError`], [`Disposition::of`] the
//!   [`Reported`] result of
//!   [`run_reported`](crate::Call::run_reported);
//! - an `#[idempotent]` handler whose error type implements
//!   [`AsIdemError`]: [`Disposition::of_result`] its result, given its
//!   `errors` policy (the fn returns only the result);
//! - idem's own error alone: [`Disposition::of_error`].
//!
//! While a long handler runs, its call renews the claim's lease;
//! [`with_heartbeat`] extends the broker's ack deadline too (JetStream
//! "in progress" acks), in the same task, so the handler keeps both its
//! claim and its message.
//!
//! ```
//! use idem::queue::{AsIdemError, Disposition, with_heartbeat};
//! use idem::idempotent;
//! use std::time::Duration;
//!
//! #[derive(Debug)]
//! enum BillingError { Idem(idem::Error), GatewayDown }
//! impl From<idem::Error> for BillingError {
//!     fn from(err: idem::Error) -> Self { BillingError::Idem(err) }
//! }
//! impl AsIdemError for BillingError {
//!     fn as_idem_error(&self) -> Option<&idem::Error> {
//!         match self { BillingError::Idem(err) => Some(err), _ => None }
//!     }
//! }
//!
//! #[idempotent(key = order_id, scope = "billing", store = IDEM)]
//! async fn bill(order_id: &str, amount_cents: u64) -> Result<u64, BillingError> {
//!     Ok(amount_cents)
//! }
//! # static IDEM: std::sync::LazyLock<idem::Idempotency> =
//! #     std::sync::LazyLock::new(|| idem::Idempotency::new(idem::MemoryStore::new()));
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! // For each message: run the handler, extending the ack deadline every
//! // 10 s (`message.ack_with(AckKind::Progress)` on JetStream) meanwhile.
//! let out = with_heartbeat(bill("order-42", 1200), Duration::from_secs(10), || async {}).await;
//! // `errors = "release"` (the default) stores no error: `|_| false`.
//! assert_eq!(Disposition::of_result(&out, |_| false), Disposition::Ack);
//! let dup = bill("order-42", 999).await; // same id, other payload
//! assert_eq!(Disposition::of_result(&dup, |_| false), Disposition::Reject);
//! # }
//! ```

use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};

use crate::call::Failed;
use crate::place::Place;
use crate::{Body, Call, CodecError, Error, ErrorPolicy, Reconcile, Reported};

/// How long a released error or a store failure waits before redelivery.
///
/// ```
/// use idem::queue::{DEFAULT_RETRY_AFTER, Disposition};
/// let down = idem::Error::NotConfigured;
/// assert_eq!(Disposition::of_error(&down), Disposition::Retry { after: DEFAULT_RETRY_AFTER });
/// ```
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// What the consumer tells the broker about a message (see the
/// [module](self)'s table).
///
/// ```
/// use idem::queue::Disposition;
/// # struct Message;
/// # impl Message { fn ack(&self) {} fn nak(&self, _: std::time::Duration) {} fn term(&self) {} }
/// # let (message, disposition) = (Message, Disposition::Ack);
/// match disposition {
///     Disposition::Ack => message.ack(),
///     Disposition::Retry { after } => message.nak(after), // JetStream: AckKind::Nak(Some(after))
///     Disposition::Reject => message.term(),              // JetStream: AckKind::Term
/// }
/// ```
///
/// Exhaustive on purpose: every consumer maps each disposition to a broker
/// action, so a new one must be a compile error there, not a wildcard arm
/// that tells the broker something nobody chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Done (now, or by an earlier delivery): acknowledge.
    Ack,
    /// Not done: negative-acknowledge so it is redelivered after `after`.
    Retry {
        /// The delay before redelivery.
        after: Duration,
    },
    /// Never going to succeed (poison): terminate / dead-letter it.
    Reject,
}

impl Disposition {
    /// The disposition of a call's reported result: a body's error is
    /// acked when it is [stored](Reported::stored) (a final answer), and
    /// retried when it is released; idem's own errors (found through
    /// [`AsIdemError`]) as [`of_error`](Disposition::of_error).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use idem::queue::Disposition;
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let out = idem
    ///     .call("billing", "order-7")
    ///     .fingerprint(&"payload")
    ///     .run_reported(|| async { Ok::<_, idem::Error>(7u8) })
    ///     .await;
    /// assert_eq!(Disposition::of(&out), Disposition::Ack);
    /// let dup = idem
    ///     .call("billing", "order-7")
    ///     .fingerprint(&"other payload")
    ///     .run_reported(|| async { Ok::<_, idem::Error>(8u8) })
    ///     .await;
    /// assert_eq!(Disposition::of(&dup), Disposition::Reject);
    /// # }
    /// ```
    pub fn of<T, E: AsIdemError>(reported: &Reported<Result<T, E>>) -> Disposition {
        Disposition::of_result(&reported.result, |_| reported.stored)
    }

    /// The disposition of an `#[idempotent]` handler's result, which
    /// carries no report: `stored` is the handler's `errors` policy,
    /// `|_| false` for `"release"` (the default), `|_| true` for
    /// `"replay"`, or the predicate given as `errors = path`; a stored
    /// error is a final answer, so it is acked.
    ///
    /// ```
    /// use idem::{Error, queue::Disposition};
    /// let busy: Result<(), Error> = Err(Error::NotConfigured);
    /// assert!(matches!(Disposition::of_result(&busy, |_| false), Disposition::Retry { .. }));
    /// assert_eq!(Disposition::of_result(&Ok::<_, Error>(1), |_| false), Disposition::Ack);
    /// ```
    pub fn of_result<T, E: AsIdemError>(
        result: &Result<T, E>,
        stored: impl FnOnce(&E) -> bool,
    ) -> Disposition {
        match result {
            Ok(_) => Disposition::Ack,
            Err(err) => match err.as_idem_error() {
                Some(err) => Disposition::of_error(err),
                None => Disposition::of_body_error(stored(err)),
            },
        }
    }

    /// A handler's own error: final when stored, retried when released.
    fn of_body_error(stored: bool) -> Disposition {
        if stored {
            Disposition::Ack
        } else {
            Disposition::Retry {
                after: DEFAULT_RETRY_AFTER,
            }
        }
    }

    /// The disposition of a message whose call failed with idem's own
    /// error.
    ///
    /// ```
    /// use idem::queue::{DEFAULT_RETRY_AFTER, Disposition};
    /// assert_eq!(Disposition::of_error(&idem::Error::NotConfigured),
    ///            Disposition::Retry { after: DEFAULT_RETRY_AFTER });
    /// let down = idem::StoreError::new("redis", "connection refused");
    /// assert_eq!(Disposition::of_error(&down.into()),
    ///            Disposition::Retry { after: DEFAULT_RETRY_AFTER });
    /// let evicting = idem::StoreError::misconfigured("redis", "maxmemory-policy allkeys-lru");
    /// assert_eq!(Disposition::of_error(&evicting.into()), Disposition::Reject);
    /// ```
    pub fn of_error(error: &Error) -> Disposition {
        match error {
            Error::InProgress { retry_after, .. } => Disposition::Retry {
                after: *retry_after,
            },
            // The first delivery's body ran; only its result is missing
            // (not stored, or expired behind a tombstone).
            Error::Codec(CodecError::NotStored(_)) | Error::Expired { .. } => Disposition::Ack,
            Error::FingerprintMismatch { .. } | Error::Codec(_) | Error::InvalidKey(_) => {
                Disposition::Reject
            }
            // Redelivery cannot fix a store an operator must fix first.
            Error::Store(err) if !err.kind().is_transient() => Disposition::Reject,
            _ => Disposition::Retry {
                after: DEFAULT_RETRY_AFTER,
            },
        }
    }
}

/// An error type that may carry idem's own [`Error`] (which it takes in
/// through `From<idem::Error>`), so [`Disposition::of`] can tell a poison
/// message or a busy key from the handler's own failures.
///
/// ```
/// use idem::{Error, queue::AsIdemError};
/// enum AppError { Idem(Error), Declined }
/// impl AsIdemError for AppError {
///     fn as_idem_error(&self) -> Option<&Error> {
///         match self { AppError::Idem(err) => Some(err), AppError::Declined => None }
///     }
/// }
/// assert!(AppError::Declined.as_idem_error().is_none());
/// ```
pub trait AsIdemError {
    /// idem's error, if this is one.
    fn as_idem_error(&self) -> Option<&Error>;
}

/// ```
/// use idem::queue::AsIdemError;
/// assert!(idem::Error::NotConfigured.as_idem_error().is_some());
/// ```
impl AsIdemError for Error {
    fn as_idem_error(&self) -> Option<&Error> {
        Some(self)
    }
}

/// ```
/// use idem::queue::AsIdemError;
/// let err: Box<dyn std::error::Error + Send + Sync> = idem::Error::NotConfigured.into();
/// assert!(err.as_idem_error().is_some());
/// ```
impl AsIdemError for Box<dyn std::error::Error + Send + Sync> {
    fn as_idem_error(&self) -> Option<&Error> {
        self.downcast_ref()
    }
}

/// A handler's result and what to tell the broker. Made by [`process`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let processed = idem::queue::process(idem.call("billing", "order-7"), || async {
///     Ok::<_, idem::Error>(7)
/// })
/// .await;
/// assert_eq!(processed.result.unwrap(), 7);
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Processed<T, E> {
    /// The handler's result, its own or replayed.
    pub result: Result<T, E>,
    /// What to tell the broker.
    pub disposition: Disposition,
}

/// Runs `body` as `call` would and maps the outcome to a [`Disposition`],
/// telling a stored error (replayed or not: `Ack`) from a released one
/// (`Retry`) by what the call did with it; `E` need not implement
/// [`AsIdemError`]. Built on [`Call::run_apart`], so any call runs here
/// with its settings: a reconcile, [detached](Call::detach), or
/// [on a borrowed store](Call::on) such as a transaction's. Wrap the body
/// in [`with_heartbeat`] to extend the broker's ack deadline while it
/// runs.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use idem::queue::{Disposition, process, with_heartbeat};
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let charge = || async { Ok::<_, idem::Error>(String::from("charged")) };
/// let processed = process(idem.call("billing", "order-42"), || {
///     with_heartbeat(charge(), Duration::from_secs(10), || async { /* in-progress ack */ })
/// })
/// .await;
/// assert_eq!(processed.disposition, Disposition::Ack);
/// # }
/// ```
pub async fn process<P, R, W, T, E, F>(call: Call<P, R, W>, body: F) -> Processed<T, E>
where
    P: ErrorPolicy<E>,
    R: Reconcile<T, E>,
    T: Serialize + DeserializeOwned,
    E: From<Error>,
    F: Body<T, E>,
    W: Place<P, R, T, E, F>,
{
    let ran = call.run_apart(body).await;
    let disposition = match &ran.result {
        Ok(_) => Disposition::Ack,
        Err(Failed::Idem(err)) => Disposition::of_error(err),
        Err(Failed::Body { stored, .. }) => Disposition::of_body_error(*stored),
    };
    Processed {
        result: ran.converted(E::from).result,
        disposition,
    }
}

/// Awaits `body`, awaiting `beat()` every `every` until it finishes, in
/// the same task (no spawn, so `body` may borrow): the hook that extends a
/// broker's ack deadline while a long handler runs. Keep `every` well
/// under the ack deadline (a third of it, say).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// let mut beats = 0;
/// let out = idem::queue::with_heartbeat(
///     async { tokio::time::sleep(Duration::from_secs(25)).await; 7 },
///     Duration::from_secs(10),
///     || { beats += 1; std::future::ready(()) },
/// )
/// .await;
/// assert_eq!((out, beats), (7, 2));
/// # }
/// ```
pub async fn with_heartbeat<O, H, HFut>(
    body: impl Future<Output = O>,
    every: Duration,
    mut beat: H,
) -> O
where
    H: FnMut() -> HFut,
    HFut: Future<Output = ()>,
{
    let mut body = std::pin::pin!(body);
    loop {
        tokio::select! {
            biased;
            out = &mut body => return out,
            () = tokio::time::sleep(every) => beat().await,
        }
    }
}
