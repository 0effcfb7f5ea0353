//! Whose error a call ended with: the body's own (stored or released) or
//! idem's. The runtime keeps the two apart until the call's edge, where
//! idem's error becomes the caller's `E` through `From<idem::Error>`.

use crate::Error;

/// A call's result and whether it was replayed from the store.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let first: idem::Reported<Result<u8, idem::Error>> =
///     idem.call("demo", "k").run_reported(|| async { Ok(1) }).await;
/// let again = idem.call("demo", "k").run_reported(|| async { Ok::<u8, idem::Error>(2) }).await;
/// assert_eq!((first.replayed, again.replayed), (false, true));
/// assert_eq!(again.result.unwrap(), 1);
/// assert!(!again.stored, "only a body's `Err` is reported as stored");
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Reported<R> {
    /// The function's result: its own, or the stored one.
    pub result: R,
    /// `true` when the result came from the store and the body did not run.
    pub replayed: bool,
    /// `true` when `result` is an `Err` of the body's own that the call's
    /// error policy stores: duplicates get the same `Err` (it was written
    /// now or replayed). `false` for `Ok`, for a released `Err` and for
    /// idem's own errors.
    pub stored: bool,
}

/// A call's `Err` as [`Call::run_apart`](crate::Call::run_apart) answers
/// it: the body's own, or idem's.
///
/// Exhaustive on purpose: an error comes from the body or from idem, and a
/// caller matching both is complete; `Body` itself is `#[non_exhaustive]`,
/// so it can carry more.
///
/// ```
/// use idem::Failed;
/// let failed: Failed<String> = Failed::Idem(idem::Error::NotConfigured);
/// assert!(matches!(failed.into_error(|err| err.to_string()), s if s.contains("configured")));
/// ```
#[derive(Debug)]
pub enum Failed<E> {
    /// The body's error; `stored` when the policy kept it for duplicates.
    #[non_exhaustive]
    Body {
        /// The body's own error, or the stored one replayed.
        error: E,
        /// Whether duplicates get this error too.
        stored: bool,
    },
    /// idem's own error: never stored.
    Idem(Error),
}

impl<E> Failed<E> {
    /// The caller's error: the body's as it is, idem's through `from_idem`.
    pub fn into_error(self, from_idem: impl FnOnce(Error) -> E) -> E {
        match self {
            Failed::Body { error, .. } => error,
            Failed::Idem(error) => from_idem(error),
        }
    }
}

impl<T, E> Reported<Result<T, Failed<E>>> {
    /// A call's result inside the runtime; `stored` is read off the error.
    pub(crate) fn ran(result: Result<T, Failed<E>>, replayed: bool) -> Self {
        let stored = matches!(result, Err(Failed::Body { stored: true, .. }));
        Reported {
            result,
            replayed,
            stored,
        }
    }

    /// The result at the caller's edge: idem's error through `from_idem`.
    pub(crate) fn converted(self, from_idem: impl FnOnce(Error) -> E) -> Reported<Result<T, E>> {
        Reported {
            result: self.result.map_err(|failed| failed.into_error(from_idem)),
            replayed: self.replayed,
            stored: self.stored,
        }
    }
}
