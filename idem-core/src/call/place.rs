//! Where a call runs, the last type parameter of [`Call`]: the settings
//! that choose it (`on`, `detach`) and the one launch of each place.

use std::fmt;

use serde::{Serialize, de::DeserializeOwned};

use super::{Call, Failed, Ran, Reconcile, Reported, WithReconcile};
use crate::__private::{Attribute, AttributeBody};
use crate::{Body, Error, ErrorPolicy, Store};

/// Where a call runs: [`Attached`] (the default), [`Detached`] or
/// [`Borrowed`]; what each asks of the body, the reconcile, the value and
/// the error (`T`, `E`, `F`, `R`, the policy `P`). Every terminal of a
/// [`Call`] ([`run`](Call::run), [`run_reported`](Call::run_reported),
/// [`run_apart`](Call::run_apart)) requires it, so that a function taking
/// any call can name the bound. Sealed: the places are the runtime's.
///
/// ```
/// use idem::{Body, Call, ErrorPolicy, Reconcile, place::Place};
///
/// /// Runs any call, wherever it runs, and says whether it replayed.
/// async fn replayed<P, R, W, F>(call: Call<P, R, W>, body: F) -> bool
/// where
///     P: ErrorPolicy<idem::Error>,
///     R: Reconcile<u8, idem::Error>,
///     F: Body<u8, idem::Error>,
///     W: Place<P, R, u8, idem::Error, F>,
/// {
///     call.run_reported(body).await.replayed
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// assert!(!replayed(idem.call("demo", "k").detach(), || async { Ok(1) }).await);
/// assert!(replayed(idem.call("demo", "k"), || async { Ok(1) }).await);
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "this call cannot run this body where it is set to run (`{Self}`)",
    label = "the body, reconcile, value or error does not fit where the call runs",
    note = "a detached call (`.detach()`, `#[idempotent(detach)]`) runs on a task of its own: its body, reconcile, value, error and error policy must be `Send + 'static`"
)]
pub trait Place<P, R, T, E, F>: sealed::Sealed + Sized {
    /// Starts the call's protocol here. What every place asks (a value
    /// that can be stored, an error policy for the error) is asked here,
    /// not of the place, so that the attribute reports it once, at the
    /// user's type.
    #[doc(hidden)]
    fn launch(call: Call<P, R, Self>, body: F) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>;
}

mod sealed {
    /// Keeps [`Place`](super::Place) to the runtime's own places.
    #[allow(unreachable_pub)]
    pub trait Sealed {}
    impl Sealed for super::Attached {}
    impl Sealed for super::Detached {}
    impl<S: ?Sized> Sealed for super::Borrowed<'_, S> {}
}

/// Where a call runs unless set: on its handle's store, in the caller's
/// task. The handle's local cache answers replays; a call dropped while
/// its body runs releases its claim. The default of [`Call`]'s `W`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let call: idem::Call<idem::ReleaseErrors, idem::NoReconcile, idem::place::Attached> =
///     idem.call("demo", "k");
/// let out: Result<u8, idem::Error> = call.run(|| async { Ok(1) }).await;
/// assert_eq!(out.unwrap(), 1);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Attached;

/// Where a call set with [`Call::detach`] runs: on its handle's store, on
/// a task of its own.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let call: idem::Call<_, _, idem::place::Detached> = idem.call("demo", "k").detach();
/// let out: Result<u8, idem::Error> = call.run(|| async { Ok(1) }).await;
/// assert_eq!(out.unwrap(), 1);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Detached;

/// Where a call set with [`Call::on`] runs: on a borrowed store, such as
/// one on the caller's database transaction, in the caller's task.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let borrowed = idem::MemoryStore::new();
/// let call: idem::Call<_, _, idem::place::Borrowed<'_, idem::MemoryStore>> =
///     idem.call("demo", "k").on(&borrowed);
/// let out: Result<u8, idem::Error> = call.run(|| async { Ok(1) }).await;
/// assert_eq!(out.unwrap(), 1);
/// # }
/// ```
pub struct Borrowed<'s, S: ?Sized>(&'s S);

impl<S: ?Sized> fmt::Debug for Borrowed<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Borrowed").finish_non_exhaustive()
    }
}

impl<P, R> Call<P, R, Attached> {
    /// Runs the call on `store` instead of the handle's: for a store that
    /// lives only as long as a borrow, such as one that joins the caller's
    /// database transaction (the SQL stores' `in_transaction` is this).
    /// The handle's settings apply; its local cache is not used (a record
    /// completed inside a transaction may yet roll back), and a call
    /// dropped while its body runs does not release its claim (nothing
    /// `'static` to hand the release to): the claim ends with the
    /// transaction or its lease, which is renewed in the call's own task.
    /// Recovery points ([`idem::step`](crate::step)) are refused in such a
    /// call (`Error::InvalidStep`): a step saved in the caller's
    /// transaction would roll back with it.
    ///
    /// Such a call cannot be [detached](Call::detach): its body could
    /// outlive the borrow. A detached call has no `on`, and a call on a
    /// borrowed store no `detach`:
    ///
    /// ```compile_fail
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let borrowed = idem::MemoryStore::new();
    /// let call = idem.call("demo", "k").on(&borrowed).detach();
    /// ```
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let borrowed = idem::MemoryStore::new();
    /// let out = idem
    ///     .call("demo", "k")
    ///     .reconcile(|| async { Ok(None) })
    ///     .on(&borrowed)
    ///     .run_reported(|| async { Ok::<_, idem::Error>(1u8) })
    ///     .await;
    /// assert_eq!((out.result.unwrap(), out.replayed), (1, false));
    /// # }
    /// ```
    pub fn on<S: Store + ?Sized>(self, store: &S) -> Call<P, R, Borrowed<'_, S>> {
        self.map(|policy, reconcile, Attached| (policy, reconcile, Borrowed(store)))
    }

    /// Runs the call on the tokio runtime as a task of its own: when the
    /// caller's future is dropped (a client gone, a timeout), the body is
    /// not cancelled but runs on to completion and its result is stored,
    /// so a retry gets the replay instead of running the body again. Hence
    /// the `Send + 'static` bounds of its terminals: the body (and the
    /// reconcile, if set) owns what it uses. A retry that arrives
    /// meanwhile waits (per [`wait`](Call::wait)) or gets
    /// `Error::InProgress`. [`Idempotency::drain`](crate::Idempotency::drain)
    /// waits for such calls on shutdown.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    ///
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").detach().run(|| async {
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
    pub fn detach(self) -> Call<P, R, Detached> {
        self.map(|policy, reconcile, Attached| (policy, reconcile, Detached))
    }
}

impl<P, R, T, E, F> Place<P, R, T, E, F> for Attached
where
    R: Reconcile<T, E>,
    F: Body<T, E>,
{
    fn launch(call: Call<P, R, Self>, body: F) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        let (call, reconcile, Attached) = call.split();
        call.on_handle(WithReconcile { reconcile, body })
    }
}

impl<P, R, T, E, F> Place<P, R, T, E, F> for Detached
where
    T: Send + 'static,
    E: Send + 'static,
    P: Send + 'static,
    R: Reconcile<T, E> + Send + 'static,
    R::Future: Send + 'static,
    F: Body<T, E> + Send + 'static,
    F::Future: Send + 'static,
{
    fn launch(call: Call<P, R, Self>, body: F) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        let (call, reconcile, Detached) = call.split();
        let idem = call.idem.clone();
        let ran = call.on_handle(WithReconcile { reconcile, body });
        async move { idem.detached(ran).await.unwrap_or_else(shut_down) }
    }
}

impl<'s, S, P, R, T, E, F> Place<P, R, T, E, F> for Borrowed<'s, S>
where
    S: Store + ?Sized,
    R: Reconcile<T, E>,
    F: Body<T, E>,
{
    fn launch(call: Call<P, R, Self>, body: F) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        let (call, reconcile, Borrowed(store)) = call.split();
        call.on_borrowed(store, WithReconcile { reconcile, body })
    }
}

/// The attribute's body, on the handle's store.
#[doc(hidden)]
impl<P, R, T, E, F, Ret> Place<P, R, T, E, Attribute<F, Ret, T, E>> for Attached
where
    R: Reconcile<T, E>,
    F: AttributeBody<Ret>,
{
    fn launch(
        call: Call<P, R, Self>,
        body: Attribute<F, Ret, T, E>,
    ) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        let (call, reconcile, Attached) = call.split();
        call.on_handle(body.reconciling(reconcile.is_set()))
    }
}

/// The attribute's body, detached (`#[idempotent(detach)]`).
#[doc(hidden)]
impl<P, R, T, E, F, Ret> Place<P, R, T, E, Attribute<F, Ret, T, E>> for Detached
where
    T: Send + 'static,
    E: Send + 'static,
    P: Send + 'static,
    R: Reconcile<T, E>,
    F: AttributeBody<Ret> + Send + 'static,
    F::Future: Send + 'static,
    Ret: Send + 'static,
{
    fn launch(
        call: Call<P, R, Self>,
        body: Attribute<F, Ret, T, E>,
    ) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        let (call, reconcile, Detached) = call.split();
        let idem = call.idem.clone();
        let ran = call.on_handle(body.reconciling(reconcile.is_set()));
        async move { idem.detached(ran).await.unwrap_or_else(shut_down) }
    }
}

/// A detached call whose runtime shut down before it ended.
fn shut_down<T, E>(error: Error) -> Ran<T, E> {
    Reported::ran(Err(Failed::Idem(error)), false)
}
