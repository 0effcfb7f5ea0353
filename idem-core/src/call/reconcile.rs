//! Reconcile: what a call that takes over a vanished holder's claim asks
//! before it runs the body again (SPEC §13).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::Call;
use crate::Body;

/// A call's reconcile: asked, instead of the body, when the call takes
/// over the claim of a holder that vanished (its lease ran out before it
/// stored a result), to learn whether that holder's effect happened.
/// Implemented by every `FnOnce() -> impl Future<Output = Result<Option<T>,
/// E>>`, and by [`NoReconcile`].
pub trait Reconcile<T, E> {
    /// The future the reconcile answers with.
    type Future: Future<Output = Result<Option<T>, E>>;

    /// Whether a reconcile was set ([`NoReconcile`] says no).
    fn is_set(&self) -> bool;

    /// Starts the reconcile.
    fn start(self) -> Self::Future;
}

/// No reconcile: a takeover runs the body again.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoReconcile;

impl<T, E> Reconcile<T, E> for NoReconcile {
    type Future = std::future::Ready<Result<Option<T>, E>>;

    fn is_set(&self) -> bool {
        false
    }

    fn start(self) -> Self::Future {
        std::future::ready(Ok(None))
    }
}

impl<T, E, F, Fut> Reconcile<T, E> for F
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
{
    type Future = Fut;

    fn is_set(&self) -> bool {
        true
    }

    fn start(self) -> Fut {
        self()
    }
}

impl<P, R, W> Call<P, R, W> {
    /// What to ask, instead of running the body, when this call takes over
    /// the claim of a holder that vanished (killed, partitioned, its lease
    /// lost) before it stored a result: the holder may or may not have had
    /// its effect. `Ok(Some(v))` says it did: `v` is stored and returned as
    /// if the body ran, and the body does not run. `Ok(None)` runs the
    /// body. `Err` is the body's error would be: the error policy stores
    /// or releases it. A call that is not such a takeover (a fresh key, a
    /// released claim, an expired record) never reconciles.
    ///
    /// The reconcile runs under the call's claim and context, its lease
    /// renewed: [`child_key`](crate::child_key) gives the key the vanished
    /// holder sent downstream, so the reconcile can ask the downstream
    /// whether it knows that key. It runs before the body: steps
    /// ([`idem::step`](crate::step)) the holder finished replay as usual
    /// when the body runs after `Ok(None)`, and a step the holder was
    /// interrupted in runs again, so a reconcile that can tell whether that
    /// step's effect happened should answer for the whole call.
    ///
    /// A takeover counts in `idem_takeovers_total`; a call answered by its
    /// reconcile in `idem_reconciled_total`, and its span has
    /// `reconciled = true` (`false` when the reconcile answered `None`).
    ///
    /// A setting like any other: a reconciling call may also be
    /// [detached](Call::detach) (then the reconcile, like the body, is
    /// `Send + 'static`) or run [on a borrowed store](Call::on). Setting it
    /// again replaces the reconcile.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// /// Asks the provider whether it booked a charge under `reference`.
    /// async fn booked(reference: Option<String>) -> Option<String> {
    ///     # let _ = reference;
    ///     None
    /// }
    /// let out: Result<String, idem::Error> = idem
    ///     .call("payments", "order-1")
    ///     .reconcile(|| async { Ok(booked(idem::child_key("charge")).await) })
    ///     .run(|| async { Ok(format!("charge {:?}", idem::child_key("charge"))) })
    ///     .await;
    /// assert!(out.unwrap().starts_with("charge "));
    /// # }
    /// ```
    pub fn reconcile<Q>(self, reconcile: Q) -> Call<P, Q, W> {
        self.map(|policy, _, place| (policy, reconcile, place))
    }
}

/// A takeover the reconcile is asked about: made by the protocol only
/// when a call with a reconcile takes over a vanished holder's claim, and
/// told how the reconcile answered. Handed to the attribute's body, which
/// asks its `reconcile = …` itself (with the parameters it owns).
#[doc(hidden)]
#[derive(Debug)]
pub struct Takeover(Arc<Answer>);

impl Takeover {
    /// Awaits the reconcile, noting how it answered.
    pub async fn ask<T, E>(
        &self,
        reconcile: impl Future<Output = Result<Option<T>, E>>,
    ) -> Result<Option<T>, E> {
        let answer = reconcile.await;
        match &answer {
            Ok(Some(_)) => self.0.note(Answer::FOUND),
            Ok(None) => {
                tracing::debug!("idem: reconcile found no effect; running the body");
                self.0.note(Answer::NOT_FOUND);
            }
            Err(_) => tracing::debug!("idem: reconcile failed; the takeover stands"),
        }
        answer
    }
}

/// How a takeover's reconcile answered, shared by the [`Takeover`] handed
/// to the body and the claim's guard: until the reconcile answers (it
/// failed, or the call was dropped while it ran), the vanished holder's
/// effect is unknown, so the guard lets the claim lapse instead of
/// releasing it, and the next call takes it over and asks again.
#[derive(Debug)]
pub(crate) struct Answer(AtomicU8);

impl Answer {
    const PENDING: u8 = 0;
    const FOUND: u8 = 1;
    const NOT_FOUND: u8 = 2;

    fn note(&self, answer: u8) {
        self.0.store(answer, Ordering::Relaxed);
    }

    /// Whether the reconcile answered that the effect happened.
    pub(crate) fn found(&self) -> bool {
        self.0.load(Ordering::Relaxed) == Self::FOUND
    }

    /// Whether the reconcile has not answered (yet, or at all).
    pub(crate) fn pending(&self) -> bool {
        self.0.load(Ordering::Relaxed) == Self::PENDING
    }
}

/// What a won claim runs: the body, asked first to reconcile on a
/// takeover when it can.
pub(crate) trait Run<T, E> {
    /// Whether a takeover is reconciled.
    fn reconciles(&self) -> bool;
    /// Runs; `takeover` is given only on a takeover, when `reconciles`.
    fn start(self, takeover: Option<Takeover>) -> impl Future<Output = Result<T, E>>;
}

/// The builder's body and reconcile.
pub(crate) struct WithReconcile<R, F> {
    pub(crate) reconcile: R,
    pub(crate) body: F,
}

impl<T, E, R, F> Run<T, E> for WithReconcile<R, F>
where
    R: Reconcile<T, E>,
    F: Body<T, E>,
{
    fn reconciles(&self) -> bool {
        self.reconcile.is_set()
    }

    async fn start(self, takeover: Option<Takeover>) -> Result<T, E> {
        if let Some(takeover) = takeover
            && let Some(value) = takeover.ask(self.reconcile.start()).await?
        {
            return Ok(value);
        }
        (self.body)().await
    }
}

/// The takeover handed to a body that reconciles, and the answer it
/// notes.
pub(super) fn takeover(asked: bool) -> (Option<Takeover>, Option<Arc<Answer>>) {
    if !asked {
        return (None, None);
    }
    let answer = Arc::new(Answer(AtomicU8::new(Answer::PENDING)));
    (Some(Takeover(Arc::clone(&answer))), Some(answer))
}
