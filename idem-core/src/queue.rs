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
//! | a released `Err`, `Error::Store`, `Error::InProgress`, `Error::LeaseLost`, `Error::NotConfigured`, `Error::InvalidOption`, `Error::InvalidStep` | `Retry { after }`: negative ack with a delay |
//! | `Error::FingerprintMismatch` (same id, other payload), `Error::Codec`, `Error::InvalidKey` | `Reject`: a poison message, dead-lettered, never retried |
//!
//! Three ways in:
//!
//! - an `#[idempotent]` handler whose error type implements [`AsIdemError`]:
//!   [`Disposition::of`] its result;
//! - a call run through the builder: [`handle`] runs it and tells stored
//!   errors from released ones itself;
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
//! assert_eq!(Disposition::of(&out, |_| false), Disposition::Ack);
//! let dup = bill("order-42", 999).await; // same id, other payload
//! assert_eq!(Disposition::of(&dup, |_| false), Disposition::Reject);
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};

use crate::{Call, CodecError, Error, ErrorPolicy};

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
    /// The disposition of an `#[idempotent]` handler's result. `stored`
    /// is the handler's `errors` policy: `|_| false` for `"release"` (the
    /// default), `|_| true` for `"replay"`, or the predicate given as
    /// `errors = path`; a stored error is a final answer, so it is acked.
    ///
    /// ```
    /// use idem::{Error, queue::Disposition};
    /// let busy: Result<(), Error> = Err(Error::NotConfigured);
    /// assert!(matches!(Disposition::of(&busy, |_| false), Disposition::Retry { .. }));
    /// assert_eq!(Disposition::of(&Ok::<_, Error>(1), |_| false), Disposition::Ack);
    /// ```
    pub fn of<T, E: AsIdemError>(
        result: &Result<T, E>,
        stored: impl FnOnce(&E) -> bool,
    ) -> Disposition {
        match result {
            Ok(_) => Disposition::Ack,
            Err(err) => match err.as_idem_error() {
                Some(err) => Disposition::of_error(err),
                None if stored(err) => Disposition::Ack,
                None => Disposition::Retry {
                    after: DEFAULT_RETRY_AFTER,
                },
            },
        }
    }

    /// The disposition of a message whose call failed with idem's own
    /// error.
    ///
    /// ```
    /// use idem::queue::{DEFAULT_RETRY_AFTER, Disposition};
    /// assert_eq!(Disposition::of_error(&idem::Error::NotConfigured),
    ///            Disposition::Retry { after: DEFAULT_RETRY_AFTER });
    /// ```
    pub fn of_error(error: &Error) -> Disposition {
        match error {
            Error::InProgress { retry_after, .. } => Disposition::Retry {
                after: *retry_after,
            },
            // The first delivery's body ran; only its result is missing.
            Error::Codec(CodecError::NotStored(_)) => Disposition::Ack,
            Error::FingerprintMismatch { .. } | Error::Codec(_) | Error::InvalidKey(_) => {
                Disposition::Reject
            }
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

/// A handler's result and what to tell the broker. Made by [`handle`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let handled = idem::queue::handle(idem.call("billing", "order-7"), || async {
///     Ok::<_, idem::Error>(7)
/// })
/// .await;
/// assert_eq!(handled.result.unwrap(), 7);
/// # }
/// ```
#[derive(Debug)]
pub struct Handled<T, E> {
    /// The handler's result, its own or replayed.
    pub result: Result<T, E>,
    /// What to tell the broker.
    pub disposition: Disposition,
}

/// Runs `body` as `call` would and maps the outcome to a [`Disposition`],
/// telling a stored error (replayed or not: `Ack`) from a released one
/// (`Retry`) by the call's own policy; `E` need not implement
/// [`AsIdemError`]. Wrap the body in [`with_heartbeat`] to extend the
/// broker's ack deadline while it runs.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use idem::queue::{Disposition, handle, with_heartbeat};
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let charge = || async { Ok::<_, idem::Error>(String::from("charged")) };
/// let handled = handle(idem.call("billing", "order-42"), || {
///     with_heartbeat(charge(), Duration::from_secs(10), || async { /* in-progress ack */ })
/// })
/// .await;
/// assert_eq!(handled.disposition, Disposition::Ack);
/// # }
/// ```
pub async fn handle<P, T, E, F, Fut>(call: Call<P>, body: F) -> Handled<T, E>
where
    P: ErrorPolicy<E>,
    T: Serialize + DeserializeOwned,
    E: From<Error>,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let call = call.map_policy(|policy| QueuePolicy(Arc::new(policy)));
    let policy = Arc::clone(&call.policy().0);
    let reported = call
        .run_reported(|| async move { body().await.map_err(Failure::App) })
        .await;
    let (result, disposition) = match reported.result {
        Ok(value) => (Ok(value), Disposition::Ack),
        Err(Failure::Idem(err)) => {
            let disposition = Disposition::of_error(&err);
            (Err(E::from(err)), disposition)
        }
        Err(Failure::App { error, stored }) => {
            let disposition = if stored || reported.replayed || policy.stores(&error) {
                Disposition::Ack
            } else {
                Disposition::Retry {
                    after: DEFAULT_RETRY_AFTER,
                }
            };
            (Err(error), disposition)
        }
    };
    Handled {
        result,
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

/// The handler's error, or idem's own, kept apart so the disposition can
/// tell them apart.
enum Failure<E> {
    Idem(Error),
    App { error: E, stored: bool },
}

impl<E> Failure<E> {
    #[allow(non_snake_case)]
    fn App(error: E) -> Self {
        Failure::App {
            error,
            stored: false,
        }
    }
}

impl<E> From<Error> for Failure<E> {
    fn from(err: Error) -> Self {
        Failure::Idem(err)
    }
}

/// The handler's policy, applied to its own errors; idem's are never
/// stored.
struct QueuePolicy<P>(Arc<P>);

impl<E, P: ErrorPolicy<E>> ErrorPolicy<Failure<E>> for QueuePolicy<P> {
    fn stores(&self, failure: &Failure<E>) -> bool {
        match failure {
            Failure::App { error, .. } => self.0.stores(error),
            Failure::Idem(_) => false,
        }
    }
    fn encode(&self, failure: &Failure<E>, limit: usize) -> Result<Vec<u8>, CodecError> {
        match failure {
            Failure::App { error, .. } => self.0.encode(error, limit),
            Failure::Idem(_) => Err(CodecError::Corrupt("idem's own errors are never stored")),
        }
    }
    fn decode(&self, record: &[u8]) -> Result<Failure<E>, CodecError> {
        self.0.decode(record).map(|error| Failure::App {
            error,
            stored: true,
        })
    }
}
