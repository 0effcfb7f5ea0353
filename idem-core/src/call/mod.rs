//! One idempotent call: set up by the builder (`builder.rs`), then the
//! protocol in stages: claim the key (`claim.rs`), run the body under the
//! claim (`body.rs`, guarded by `guard.rs`), settle the key with the
//! result (`settle.rs`). `outcome.rs` tells the body's errors from idem's.

mod body;
mod builder;
mod claim;
mod guard;
mod outcome;
mod reconcile;
mod settle;

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};
use tracing::Instrument;

use crate::cache::LocalCache;
use crate::idempotency::Inner;
use crate::key::{KeyPart, ScopeText};
use crate::observe::Outcome as Observed;
use crate::{
    CallSite, Error, ErrorPolicy, Fingerprint, Idempotency, RecordKey, ReleaseErrors, Store,
};

pub use body::Body;
use guard::ClaimGuard;
pub use outcome::{Failed, Reported};
pub use reconcile::{NoReconcile, Reconcile, Reconciling, Takeover};
use reconcile::{Run, SelfReconciling, WithReconcile};

/// How long a completed result is replayed, unless set: 24 hours.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an in-progress claim is held before another caller may take
/// over, unless set: 30 seconds.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The longest `ttl`, `tombstone` or `lease` a call accepts: 100 years.
/// Longer is `Error::InvalidOption` before any claim, so that no store
/// overflows its clock after the body ran (`Duration::MAX` would).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let out: Result<u8, idem::Error> = idem
///     .call("demo", "k")
///     .ttl(std::time::Duration::MAX)
///     .run(|| async { unreachable!("refused before the claim") })
///     .await;
/// assert!(matches!(out, Err(idem::Error::InvalidOption(_))));
/// assert!(idem::MAX_DURATION < std::time::Duration::MAX);
/// # }
/// ```
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// A call being set up: made by [`Idempotency::call`], run by
/// [`Call::run`]. `#[idempotent]` expands to this.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let payload = ("alice", 1200u32);
/// let out: Result<String, idem::Error> = idem
///     .call("payments", "order-1")
///     .ttl(Duration::from_secs(3600))
///     .lease(Duration::from_secs(10))
///     .wait(Duration::ZERO)
///     .fingerprint(&payload)
///     .run(|| async { Ok(format!("charged {}", payload.1)) })
///     .await;
/// assert_eq!(out.unwrap(), "charged 1200");
/// # }
/// ```
#[must_use = "a call does nothing until `.run(…)` is awaited"]
pub struct Call<P = ReleaseErrors> {
    pub(crate) idem: Idempotency,
    key: RecordKey,
    scope: ScopeText,
    ttl: Duration,
    /// How long a tombstone stays after the TTL; `None`: none.
    tombstone: Option<Duration>,
    /// `None`: the default, shortened to the TTL when that is shorter.
    lease: Option<Duration>,
    wait: Duration,
    fingerprint: Fingerprint,
    /// The version written into records and required of replayed ones.
    version: u32,
    policy: P,
    /// Boxed: refusals are rare, and an `Error` inline would enlarge every
    /// call and every future that holds it.
    refused: Option<Box<Error>>,
    /// The bounded `site` label of this call's metrics.
    site: &'static CallSite,
}

/// What a call's result is before the edge: the body's error kept apart
/// from idem's.
/// What [`Call::run_apart`] answers.
pub type Ran<T, E> = Reported<Result<T, Failed<E>>>;

impl Call {
    pub(crate) fn new<S: KeyPart + ?Sized, K: KeyPart + ?Sized>(
        idem: Idempotency,
        scope: &S,
        key: &K,
    ) -> Self {
        let (record_key, filled) = RecordKey::checked(scope, key);
        let refused = (!filled).then(|| Box::new(Error::InvalidKey("the key is empty".into())));
        Call {
            idem,
            key: record_key,
            scope: ScopeText::of(scope),
            ttl: DEFAULT_TTL,
            tombstone: None,
            lease: None,
            wait: Duration::ZERO,
            fingerprint: Fingerprint::NONE,
            version: 0,
            policy: ReleaseErrors,
            refused,
            site: CallSite::UNNAMED,
        }
    }
}

impl<P> Call<P> {
    /// The hashed key of this call.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1");
    /// assert_eq!(call.record_key(), idem::key::RecordKey::new("payments", "order-1"));
    /// ```
    pub fn record_key(&self) -> RecordKey {
        self.key
    }

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
        F: Body<T, E>,
    {
        self.execute(body).await.converted(E::from).result
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
        F: Body<T, E>,
    {
        self.execute(body).await.converted(E::from)
    }

    /// As [`run_reported`](Call::run_reported), with the body's errors
    /// kept apart from idem's own in a [`Failed`], so `E` needs no
    /// `From<idem::Error>`: for integrations that answer the two
    /// differently (an HTTP layer, a job runner).
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
        F: Body<T, E>,
    {
        self.execute(body)
    }

    /// As [`run`](Call::run), on `store` instead of the handle's: for a
    /// store that lives only as long as a borrow, such as one that joins
    /// the caller's database transaction. The handle's settings apply; its
    /// local cache is not used (a record completed inside a transaction
    /// may yet roll back), and a call dropped while its body runs does not
    /// release its claim (nothing `'static` to hand the release to): the
    /// claim ends with the transaction or its lease. Recovery points
    /// ([`idem::step`](crate::step)) are refused in such a call
    /// (`Error::InvalidStep`): a step saved in the caller's transaction
    /// would roll back with it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let borrowed = idem::MemoryStore::new();
    /// let out: Result<u8, idem::Error> =
    ///     idem.call("demo", "k").run_on(&borrowed, || async { Ok(1) }).await;
    /// assert_eq!(out.unwrap(), 1);
    /// # }
    /// ```
    pub async fn run_on<S, T, E, F>(self, store: &S, body: F) -> Result<T, E>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: Body<T, E>,
    {
        self.execute_on(store, body).await.converted(E::from).result
    }

    /// As [`run_on`](Call::run_on), and also tells whether the result was
    /// replayed and whether an `Err` is stored.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let borrowed = idem::MemoryStore::new();
    /// let out = idem
    ///     .call("demo", "k")
    ///     .run_on_reported(&borrowed, || async { Ok::<_, idem::Error>(1u8) })
    ///     .await;
    /// assert!(!out.replayed);
    /// # }
    /// ```
    pub async fn run_on_reported<S, T, E, F>(self, store: &S, body: F) -> Reported<Result<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: Body<T, E>,
    {
        self.execute_on(store, body).await.converted(E::from)
    }

    /// The one path of every run: the protocol on the handle's store and
    /// cache, the body's errors kept apart from idem's. A plain fn
    /// returning the protocol's future, not an async fn awaiting it, so
    /// that no async layer enlarges the caller's future or copies the
    /// `Call` once more.
    pub(crate) fn execute<T, E, F>(self, body: F) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        F: Body<T, E>,
    {
        self.execute_reconciled(NoReconcile, body)
    }

    /// As [`execute`](Call::execute), with a reconcile for a takeover.
    pub(crate) fn execute_reconciled<T, E, R, F>(
        self,
        reconcile: R,
        body: F,
    ) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        R: Reconcile<T, E>,
        F: Body<T, E>,
    {
        let target = Arc::clone(&self.idem.inner);
        let span = self.span();
        let run = WithReconcile { reconcile, body };
        self.protocol(target, run, span.clone()).instrument(span)
    }

    /// As [`execute`](Call::execute), for a body that reconciles itself
    /// when handed a [`Takeover`] (the attribute's `reconcile = …`).
    pub(crate) fn execute_self_reconciling<T, E, F, Fut>(
        self,
        body: F,
    ) -> impl Future<Output = Ran<T, E>>
    where
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        F: FnOnce(Option<Takeover>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let target = Arc::clone(&self.idem.inner);
        let span = self.span();
        let run = SelfReconciling(body);
        self.protocol(target, run, span.clone()).instrument(span)
    }

    /// As [`execute`](Call::execute), on a borrowed store.
    pub(crate) fn execute_on<S, T, E, F>(
        self,
        store: &S,
        body: F,
    ) -> impl Future<Output = Ran<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        F: Body<T, E>,
    {
        self.execute_on_reconciled(store, NoReconcile, body)
    }

    /// As [`execute_on`](Call::execute_on), with a reconcile for a
    /// takeover.
    pub(crate) fn execute_on_reconciled<S, T, E, R, F>(
        self,
        store: &S,
        reconcile: R,
        body: F,
    ) -> impl Future<Output = Ran<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        R: Reconcile<T, E>,
        F: Body<T, E>,
    {
        let span = self.span();
        let run = WithReconcile { reconcile, body };
        self.protocol(store, run, span.clone()).instrument(span)
    }

    /// The call's span: scope, short key hash, and (once known) outcome and
    /// whether it was replayed; `Span::none()` when neither a subscriber
    /// nor a `log` logger would see it (see `heard`), so that the call
    /// builds no span and entering it on every poll costs a branch.
    fn span(&self) -> tracing::Span {
        if !may_be_heard() {
            return tracing::Span::none();
        }
        let span = tracing::info_span!(
            "idem.call",
            scope = %self.scope,
            key = %self.key.short(),
            outcome = tracing::field::Empty,
            replayed = tracing::field::Empty,
            reconciled = tracing::field::Empty,
        );
        if heard(&span) {
            span
        } else {
            tracing::Span::none()
        }
    }

    /// The protocol: claim, run, settle (complete or release), or replay.
    /// Each end is counted by outcome and recorded in `span`.
    #[expect(clippy::manual_async_fn, reason = "an async fn doubles its arguments")]
    fn protocol<G, T, E, B>(
        mut self,
        target: G,
        body: B,
        span: tracing::Span,
    ) -> impl Future<Output = Ran<T, E>>
    where
        G: Target,
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
        B: Run<T, E>,
    {
        // An async block, not an async fn: an async fn keeps a second copy
        // of its arguments (the call, the span) for the whole call.
        async move {
            if let Some(err) =
                (self.refused.take().map(|err| *err)).or_else(|| self.checked_settings().err())
            {
                return self.ended(&span, Observed::Invalid, Err(Failed::Idem(err)));
            }
            let (store, cache, on_drop) = (target.store(), target.cache(), target.owned());
            if let Some(hit) = cache.and_then(|cache| cache.get(&self.key)) {
                return self.replayed(&hit.fingerprint, &hit.record, &span);
            }
            // A local cache keeps a replayed record as long as it lives,
            // which costs some stores a command: asked for only then.
            let claim = match cache {
                Some(_) => self.claim().with_expiry(),
                None => self.claim(),
            };
            let (finished, took_over, sent) =
                match self.claim_key(store, cache, on_drop, &claim, &span).await {
                    Ok(won) => won,
                    Err(ended) => return ended,
                };
            let on_drop = on_drop.cloned();
            let mut guard = ClaimGuard::new(store, on_drop, self.key, claim.token, self.site);
            if !crate::step::steps_match(&finished, &self.fingerprint) {
                guard.release().await;
                return self.ended(
                    &span,
                    Observed::Mismatch,
                    Err(Failed::Idem(self.mismatch())),
                );
            }
            if let Err(err) = self.hold_whole_lease(&mut guard, &claim, sent).await {
                let observed = match err {
                    Error::LeaseLost { .. } => Observed::LeaseLost,
                    _ => Observed::StoreError,
                };
                return self.ended(&span, observed, Err(Failed::Idem(err)));
            }
            // Only a takeover of a vanished holder asks the reconcile.
            let (takeover, answer) = reconcile::takeover(took_over && body.reconciles());
            guard.hold_until_reconciled(answer.clone());
            let body = || body.start(takeover);
            let result = self.run_body(&guard, &claim, finished, &span, body).await;
            if let Some(answer) = answer {
                let reconciled = answer.found();
                span.record("reconciled", reconciled);
                if reconciled {
                    self.site.reconciled();
                }
            }
            self.settle(&mut guard, cache, result, &span).await
        }
    }
}

/// Whether anyone sees the call's span: a subscriber listening to it, or a
/// `log` logger printing its records (tracing's `log` feature logs the
/// fields of disabled spans) or its enters and exits.
fn heard(span: &tracing::Span) -> bool {
    !span.is_disabled() || logged()
}

/// Whether a `log` logger prints the span's records or its enters and
/// exits (tracing logs those under `tracing::span::active`).
fn logged() -> bool {
    log::log_enabled!(target: module_path!(), log::Level::Info)
        || log::log_enabled!(target: "tracing::span::active", log::Level::Trace)
}

/// Whether the span could be heard at all: `info_span!` itself first
/// checks the level filter, and without a subscriber at INFO or a logger
/// building the span would only make a disabled span nobody reads.
fn may_be_heard() -> bool {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    let info = LevelFilter::INFO;
    (STATIC_MAX_LEVEL >= info && LevelFilter::current() >= info) || logged()
}

/// Where a call's protocol runs: the handle's own store (with its local
/// cache, and released after a drop), or a borrowed one.
trait Target {
    type Store: Store + ?Sized;
    fn store(&self) -> &Self::Store;
    fn cache(&self) -> Option<&LocalCache>;
    /// The same store, owned, for a release after the call is dropped and
    /// for the renewer; `None` for a borrowed store. Lent, and cloned only
    /// for a won claim: a replay then touches no shared count.
    fn owned(&self) -> Option<&Arc<dyn Store>>;
}

impl Target for Arc<Inner> {
    type Store = dyn Store;
    fn store(&self) -> &(dyn Store + 'static) {
        self.store.as_ref()
    }
    fn cache(&self) -> Option<&LocalCache> {
        self.as_ref().cache.as_ref()
    }
    fn owned(&self) -> Option<&Arc<dyn Store>> {
        Some(&self.store)
    }
}

impl<S: Store + ?Sized> Target for &S {
    type Store = S;
    fn store(&self) -> &S {
        self
    }
    fn cache(&self) -> Option<&LocalCache> {
        None
    }
    fn owned(&self) -> Option<&Arc<dyn Store>> {
        None
    }
}
