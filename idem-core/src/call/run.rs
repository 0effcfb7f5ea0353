//! The terminals of a call, and the one path behind them: whatever the
//! settings, a call runs through [`Place::launch`] into the protocol.

use std::sync::Arc;

use serde::{Serialize, de::DeserializeOwned};
use tracing::Instrument;

use super::{Call, Ran, Reconcile, Reported, Run};
use crate::place::Place;
use crate::{Body, Error, ErrorPolicy, Store};

impl<P, R, W> Call<P, R, W> {
    /// Runs `body` if this call wins the claim; otherwise replays the
    /// stored result or reports why not.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let out: Result<u8, idem::Error> = idem.call("demo", "k").run(|| async { Ok(1) }).await;
    /// assert_eq!(out.unwrap(), 1);
    /// # }
    /// ```
    pub async fn run<T, E, F>(self, body: F) -> Result<T, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        R: Reconcile<T, E>,
        F: Body<T, E>,
        W: Place<P, R, T, E, F>,
    {
        self.run_apart(body).await.converted(E::from).result
    }

    /// As [`run`](Call::run), and also tells whether the result was
    /// replayed (for HTTP's `Idempotent-Replayed` header) and whether an
    /// `Err` is stored.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// #[derive(Debug, serde::Serialize, serde::Deserialize)]
    /// enum PayError { Declined, Idem(String) }
    /// impl From<idem::Error> for PayError {
    ///     fn from(e: idem::Error) -> Self { PayError::Idem(e.to_string()) }
    /// }
    /// let out = idem
    ///     .call("payments", "order-1")
    ///     .errors(idem::replay_errors())
    ///     .run_reported(|| async { Err::<u8, _>(PayError::Declined) })
    ///     .await;
    /// assert!(out.stored && !out.replayed);
    /// # }
    /// ```
    pub async fn run_reported<T, E, F>(self, body: F) -> Reported<Result<T, E>>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        R: Reconcile<T, E>,
        F: Body<T, E>,
        W: Place<P, R, T, E, F>,
    {
        self.run_apart(body).await.converted(E::from)
    }

    /// As [`run_reported`](Call::run_reported), with the body's errors
    /// kept apart from idem's own in a [`Failed`](crate::Failed), so `E`
    /// needs no `From<idem::Error>`: for integrations that answer the two
    /// differently (an HTTP layer, a job runner such as
    /// [`queue::process`](crate::queue::process)). The one path every run
    /// takes: [`run`](Call::run) and [`run_reported`](Call::run_reported)
    /// are this, with idem's error converted at the end.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use idem::Failed;
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let out = idem
    ///     .call("jobs", "job-1")
    ///     .run_apart(|| async { Err::<u8, &str>("declined") })
    ///     .await;
    /// assert!(matches!(out.result, Err(Failed::Body { error: "declined", stored: false, .. })));
    /// let empty = idem.call("jobs", "").run_apart(|| async { Ok::<u8, ()>(1) }).await;
    /// assert!(matches!(empty.result, Err(Failed::Idem(idem::Error::InvalidKey(_)))));
    /// # }
    /// ```
    pub fn run_apart<T, E, F>(self, body: F) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        R: Reconcile<T, E>,
        F: Body<T, E>,
        W: Place<P, R, T, E, F>,
    {
        W::launch(self, body)
    }
}

impl<P> Call<P> {
    /// The protocol on the handle's store and cache, `run` being the body
    /// with its reconcile. A plain fn returning the protocol's future, not
    /// an async fn awaiting it, so that no async layer enlarges the
    /// caller's future or copies the `Call` once more.
    pub(crate) fn on_handle<T, E, B>(self, run: B) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        B: Run<T, E>,
    {
        let target = Arc::clone(&self.idem.inner);
        let span = self.span();
        self.protocol(target, run, span.clone()).instrument(span)
    }

    /// As [`on_handle`](Call::on_handle), on a borrowed store.
    pub(crate) fn on_borrowed<S, T, E, B>(
        self,
        store: &S,
        run: B,
    ) -> impl Future<Output = Ran<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        B: Run<T, E>,
    {
        let span = self.span();
        self.protocol(store, run, span.clone()).instrument(span)
    }
}
