//! Calls that run on to completion when their caller goes away, and the
//! count of them that [`Idempotency::drain`] waits for on shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinError;

use crate::{Body, Call, Error, ErrorPolicy, Idempotency, StoreError};

/// How many detached calls of one handle are running.
#[derive(Debug)]
pub(crate) struct DetachedCount(watch::Sender<usize>);

impl Default for DetachedCount {
    fn default() -> Self {
        DetachedCount(watch::Sender::new(0))
    }
}

/// Counts one detached call for as long as it lives, panics included.
struct Counted(Arc<DetachedCount>);

impl Counted {
    fn new(running: &Arc<DetachedCount>) -> Self {
        running.0.send_modify(|n| *n += 1);
        Counted(Arc::clone(running))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.0.send_modify(|n| *n -= 1);
    }
}

impl Idempotency {
    /// Waits until no detached call of this handle is running, or `timeout`
    /// has passed; answers how many were still running (0: all ended, their
    /// results stored). Detached calls are those run with
    /// [`Call::run_detached`], `#[idempotent(detach)]`, and the requests of
    /// an `idem::http::IdempotencyLayer` over this handle. Call it on
    /// graceful shutdown, after the server stopped taking requests.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    ///
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// // … serve until a shutdown signal, then:
    /// let still_running = idem.drain(Duration::from_secs(10)).await;
    /// assert_eq!(still_running, 0);
    /// # }
    /// ```
    pub async fn drain(&self, timeout: Duration) -> usize {
        let mut running = self.inner.detached.0.subscribe();
        let _ = tokio::time::timeout(timeout, running.wait_for(|n| *n == 0)).await;
        *running.borrow()
    }

    /// Runs `future` on the tokio runtime, counted by [`drain`](Self::drain),
    /// and awaits its output: dropping the returned future does not stop
    /// it. For integrations that detach work of their own (an HTTP
    /// layer's request, a job) so that shutdown waits for it; a call is
    /// detached by [`Call::run_detached`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let job = idem.spawn_detached(async { 7 });
    /// drop(job); // the caller goes away; the work runs on
    /// assert_eq!(idem.drain(std::time::Duration::from_secs(1)).await, 0);
    /// # }
    /// ```
    pub fn spawn_detached<F>(
        &self,
        future: F,
    ) -> impl Future<Output = Result<F::Output, JoinError>> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let counted = Counted::new(&self.inner.detached);
        // A crash test counts the detached body's polls as the caller's.
        #[cfg(feature = "testing")]
        let future = crate::testing::polls::counted(future);
        tokio::spawn(async move {
            let _counted = counted;
            future.await
        })
    }

    /// [`spawn_detached`](Self::spawn_detached) for a call: a panic
    /// resumes in the caller, as it would without the task.
    pub(crate) async fn detached<F>(&self, future: F) -> Result<F::Output, Error>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.spawn_detached(future).await {
            Ok(output) => Ok(output),
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(_) => Err(Error::Store(StoreError::new(
                "runtime",
                std::io::Error::other(
                    "the runtime shut down before the detached call ended; its claim ends with its lease",
                ),
            ))),
        }
    }
}

impl<P> Call<P> {
    /// As [`run`](Call::run), but the call runs on the tokio runtime as a
    /// task of its own: when the caller's future is dropped (a client gone,
    /// a timeout), the body is not cancelled but runs on to completion and
    /// its result is stored, so a retry gets the replay instead of running
    /// the body again. Hence the `Send + 'static` bounds: the body owns
    /// what it uses. A retry that arrives meanwhile waits (per
    /// [`wait`](Call::wait)) or gets `Error::InProgress`.
    /// [`Idempotency::drain`] waits for such calls on shutdown.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    ///
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").run_detached(|| async {
    ///     tokio::time::sleep(Duration::from_millis(50)).await;
    ///     Ok::<u32, idem::Error>(7)
    /// });
    /// // The caller gives up after 10 ms; the body runs on.
    /// assert!(tokio::time::timeout(Duration::from_millis(10), call).await.is_err());
    /// let retry: Result<u32, idem::Error> = idem
    ///     .call("payments", "order-1")
    ///     .wait(Duration::from_secs(1))
    ///     .run(|| async { Ok(8) })
    ///     .await;
    /// assert_eq!(retry.unwrap(), 7);
    /// # }
    /// ```
    pub async fn run_detached<T, E, F>(self, body: F) -> Result<T, E>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        E: From<Error> + Send + 'static,
        P: ErrorPolicy<E> + Send + 'static,
        F: Body<T, E> + Send + 'static,
        F::Future: Send + 'static,
    {
        let idem = self.idem.clone();
        idem.detached(self.run(body))
            .await
            .unwrap_or_else(|err| Err(err.into()))
    }
}
