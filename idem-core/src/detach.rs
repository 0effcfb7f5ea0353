//! Calls that run on to completion when their caller goes away, and the
//! count of them that [`Idempotency::drain`] waits for on shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinError;

use crate::{Error, Idempotency, StoreError};

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
    /// [`Call::detach`](crate::Call::detach), `#[idempotent(detach)]`, and the requests of
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
    /// detached by [`Call::detach`](crate::Call::detach).
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
        // A crash test counts the detached body's polls as the caller's
        // (`polls.rs`); without its budget, each poll is polled as is.
        let future = crate::polls::counted(future);
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
