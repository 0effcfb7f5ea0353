//! One idempotent call: set up by the builder (`builder.rs`: settings;
//! `reconcile.rs` and `place.rs`: the settings that change its type), run
//! by its terminals (`run.rs`), then the protocol in stages: claim the key
//! (`claim.rs`), run the body under the claim (`body.rs`, guarded by
//! `guard.rs`), settle the key with the result (`settle.rs`). `outcome.rs`
//! tells the body's errors from idem's; `span.rs` is the call's span.

mod body;
mod builder;
mod claim;
mod guard;
mod mismatch;
mod outcome;
pub(crate) mod place;
mod reconcile;
mod run;
mod settle;
mod span;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};

use crate::cache::LocalCache;
use crate::idempotency::Inner;
use crate::key::{KeyPart, ScopeText};
use crate::observe::Outcome as Observed;
use crate::{
    CallSite, Error, ErrorPolicy, Fingerprint, Idempotency, RecordKey, ReleaseErrors, Store,
};

pub use body::Body;
use guard::ClaimGuard;
pub use mismatch::Mismatch;
pub use outcome::{Failed, Reported};
use place::Attached;
pub use reconcile::{NoReconcile, Reconcile, Takeover};
pub(crate) use reconcile::{Run, WithReconcile};

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

/// A call being set up: made by [`Idempotency::call`], run by one of its
/// terminals, [`run`](Call::run), [`run_reported`](Call::run_reported) or
/// [`run_apart`](Call::run_apart). `#[idempotent]` expands to this.
///
/// Everything else is a setting on the call: its durations, fingerprint,
/// version and site; its error policy ([`errors`](Call::errors), the
/// type parameter `P`); a reconcile for a takeover
/// ([`reconcile`](Call::reconcile), `R`); and where it runs (`W`, see
/// [`place`](crate::place)): on the handle's store in the caller's task
/// (the default), on a task of its own ([`detach`](Call::detach)), or on a
/// borrowed store such as a transaction's ([`on`](Call::on)). Settings
/// combine freely, except that a call on a borrowed store cannot be
/// detached (its body could outlive the borrow): such a call has no
/// `detach` method.
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
pub struct Call<P = ReleaseErrors, R = NoReconcile, W = Attached> {
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
    /// Asked on a takeover of a vanished holder ([`NoReconcile`]: not).
    reconcile: R,
    /// Where the call runs.
    place: W,
    /// Boxed: refusals are rare, and an `Error` inline would enlarge every
    /// call and every future that holds it.
    refused: Option<Box<Error>>,
    /// The bounded `site` label of this call's metrics.
    site: &'static CallSite,
    /// `Mismatch::Rerun`: another payload replaces the completed record.
    reruns: bool,
}

/// The call's key (short), scope and settings; not its store, policy or
/// reconcile, which are the handle's and the user's.
impl<P, R, W: fmt::Debug> fmt::Debug for Call<P, R, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("scope", &format_args!("{}", self.scope))
            .field("key", &self.key)
            .field("ttl", &self.ttl)
            .field("tombstone", &self.tombstone)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("version", &self.version)
            .field("place", &self.place)
            .field("site", &self.site)
            .field("reruns", &self.reruns)
            .finish_non_exhaustive()
    }
}

/// What a call's result is before the edge: the body's error kept apart
/// from idem's. What [`Call::run_apart`] answers.
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
            reconcile: NoReconcile,
            place: Attached,
            refused,
            site: CallSite::UNNAMED,
            reruns: false,
        }
    }
}

impl<P, R, W> Call<P, R, W> {
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

    /// The same call with its error policy, reconcile and place mapped:
    /// the builder's one way to change a type parameter.
    pub(crate) fn map<Q, R2, W2>(
        self,
        parts: impl FnOnce(P, R, W) -> (Q, R2, W2),
    ) -> Call<Q, R2, W2> {
        let Call {
            idem,
            key,
            scope,
            ttl,
            tombstone,
            lease,
            wait,
            fingerprint,
            version,
            policy,
            reconcile,
            place,
            refused,
            site,
            reruns,
        } = self;
        let (policy, reconcile, place) = parts(policy, reconcile, place);
        Call {
            idem,
            key,
            scope,
            ttl,
            tombstone,
            lease,
            wait,
            fingerprint,
            version,
            policy,
            reconcile,
            place,
            refused,
            site,
            reruns,
        }
    }

    /// The plain call the protocol runs, and the reconcile and place set
    /// on this one.
    pub(crate) fn split(self) -> (Call<P>, R, W) {
        let mut set = None;
        let call = self.map(|policy, reconcile, place| {
            set = Some((reconcile, place));
            (policy, NoReconcile, Attached)
        });
        let (reconcile, place) = set.expect("`map` calls its closure once");
        (call, reconcile, place)
    }
}

impl<P> Call<P> {
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
            let (store, on_drop) = (target.store(), target.owned());
            // A call that reruns skips the local cache: another host may
            // have replaced the record it holds.
            let cache = target.cache().filter(|_| !self.reruns);
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
                    Err(Failed::Idem(self.mismatched())),
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
            self.settle(&mut guard, cache, result, claim.lease, &span)
                .await
        }
    }
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
