//! Queue consumers: what to tell the broker after an idempotent handler.
//!
//! Brokers deliver at least once. Key the handler by the message's
//! business id (an order id, not the broker's delivery id), run it with
//! [`handle`], and answer the broker with the [`Disposition`]:
//!
//! | outcome | disposition |
//! | --- | --- |
//! | `Ok`, first run or replay | `Ack` |
//! | a stored `Err` (policy `replay_errors` / `store_errors_if`), first run or replay | `Ack` |
//! | a released `Err`, `Error::Store`, `Error::InProgress`, `Error::LeaseLost`, `Error::NotConfigured` | `Retry { after }` |
//! | `Error::FingerprintMismatch` (same id, other payload), `Error::Codec`, `Error::InvalidKey` | `Reject`: a poison message, dead-lettered, never retried |

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};

use crate::{Call, CodecError, Error, ErrorPolicy};

/// How long a released error or a store failure waits before redelivery.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// What the consumer tells the broker about a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Done (ran now, or earlier): acknowledge.
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
    /// What to do with a message whose call failed with idem's own error:
    /// for handlers that run a call themselves (for instance in
    /// PostgreSQL's transactional mode) and map the outcome.
    ///
    /// ```
    /// use idem_core::queue::Disposition;
    /// assert_eq!(Disposition::of_error(&idem_core::Error::NotConfigured),
    ///            Disposition::Retry { after: idem_core::queue::DEFAULT_RETRY_AFTER });
    /// ```
    pub fn of_error(error: &Error) -> Disposition {
        match error {
            Error::InProgress { retry_after, .. } => Disposition::Retry {
                after: *retry_after,
            },
            Error::FingerprintMismatch { .. } | Error::Codec(_) | Error::InvalidKey(_) => {
                Disposition::Reject
            }
            _ => Disposition::Retry {
                after: DEFAULT_RETRY_AFTER,
            },
        }
    }
}

/// A handler's result and what to tell the broker.
#[derive(Debug)]
pub struct Handled<T, E> {
    /// The handler's result, its own or replayed.
    pub result: Result<T, E>,
    /// What to tell the broker.
    pub disposition: Disposition,
}

/// Runs `body` as `call` would and maps the outcome to a [`Disposition`]
/// (SPEC §8). `heartbeat`, if given, is awaited every `every` while the
/// body runs, in the same task, to extend the broker's ack deadline
/// (JetStream "in progress" acks); the lease of the claim is renewed by the
/// call itself.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use idem_core::queue::{Disposition, handle};
/// # let idem = idem_core::Idempotency::new(idem_store::MemoryStore::new());
/// type NoHeartbeat = fn() -> std::future::Ready<()>;
/// let handled = handle(
///     idem.call("billing", "order-42"),
///     None::<(std::time::Duration, NoHeartbeat)>,
///     || async { Ok::<_, idem_core::Error>(String::from("charged")) },
/// )
/// .await;
/// assert_eq!(handled.disposition, Disposition::Ack);
/// # }
/// ```
pub async fn handle<P, T, E, F, Fut, H, HFut>(
    call: Call<P>,
    heartbeat: Option<(Duration, H)>,
    body: F,
) -> Handled<T, E>
where
    P: ErrorPolicy<E>,
    T: Serialize + DeserializeOwned,
    E: From<Error>,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    H: FnMut() -> HFut,
    HFut: Future<Output = ()>,
{
    let call = call.map_policy(|policy| QueuePolicy(Arc::new(policy)));
    let policy = Arc::clone(&call.policy().0);
    let reported = call
        .run_reported(|| async move {
            let body = body();
            let out = match heartbeat {
                None => body.await,
                Some((every, beat)) => with_heartbeat(body, every, beat).await,
            };
            out.map_err(Failure::App)
        })
        .await;
    let replayed = reported.replayed;
    match reported.result {
        Ok(value) => Handled {
            result: Ok(value),
            disposition: Disposition::Ack,
        },
        Err(Failure::Idem(err)) => {
            let disposition = match &err {
                Error::InProgress { retry_after, .. } => Disposition::Retry {
                    after: *retry_after,
                },
                Error::FingerprintMismatch { .. } | Error::Codec(_) | Error::InvalidKey(_) => {
                    Disposition::Reject
                }
                _ => Disposition::Retry {
                    after: DEFAULT_RETRY_AFTER,
                },
            };
            Handled {
                result: Err(E::from(err)),
                disposition,
            }
        }
        Err(Failure::App { error, stored }) => {
            let disposition = if stored || replayed || policy.stores(&error) {
                Disposition::Ack
            } else {
                Disposition::Retry {
                    after: DEFAULT_RETRY_AFTER,
                }
            };
            Handled {
                result: Err(error),
                disposition,
            }
        }
    }
}

/// Awaits `body`, calling `beat` every `every` until it finishes, in the
/// same task (no spawn, so `body` may borrow). For handlers that run a call
/// themselves and still want to extend the broker's ack deadline.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// let mut beats = 0;
/// let out = idem_core::queue::with_heartbeat(
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
