//! One idempotent call: claim, run, complete or release, replay.

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};
use tokio::time::Instant;

use crate::cache::LocalCache;
use crate::context::{Running, StepCall};
use crate::handle::Inner;
use crate::key::{self, KeyPart};
use crate::observe::{Outcome as Observed, Step};
use crate::record::{self, Outcome};
use crate::renewal;
use crate::{
    CallSite, Claim, ClaimOutcome, Error, ErrorPolicy, Fence, Fingerprint, Idempotency, RecordKey,
    ReleaseErrors, StepId, Store, Token,
};
use tracing::Instrument;

/// How long a completed result is replayed, unless set: 24 hours.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an in-progress claim is held before another caller may take
/// over, unless set: 30 seconds.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

const FIRST_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_millis(250);

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
    scope: String,
    ttl: Duration,
    /// `None`: the default, shortened to the TTL when that is shorter.
    lease: Option<Duration>,
    wait: Duration,
    fingerprint: Fingerprint,
    /// The version written into records and required of replayed ones.
    version: u32,
    policy: P,
    refused: Option<Error>,
    /// The bounded `scope` label of this call's metrics.
    site: &'static CallSite,
}

/// A call's result and whether it was replayed from the store.
#[derive(Debug)]
pub struct Reported<R> {
    /// The function's result: its own, or the stored one.
    pub result: R,
    /// `true` when the result came from the store and the body did not run.
    pub replayed: bool,
}

impl Call {
    pub(crate) fn new<S: KeyPart + ?Sized, K: KeyPart + ?Sized>(
        idem: Idempotency,
        scope: &S,
        key: &K,
    ) -> Self {
        let (record_key, filled) = RecordKey::checked(scope, key);
        let refused = (!filled).then(|| Error::InvalidKey("the key is empty".into()));
        Call {
            idem,
            key: record_key,
            scope: key::describe(scope),
            ttl: DEFAULT_TTL,
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
    /// How long a completed result is replayed.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long our claim is held before another caller may take over; it
    /// is renewed in the background while the body runs. Default:
    /// [`DEFAULT_LEASE`] (30 s), or the TTL if that is shorter. A zero
    /// lease, or one longer than the TTL, is `Error::InvalidOption` when
    /// the call runs.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long to wait for another caller's in-flight result before
    /// answering `Error::InProgress`.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// What must match when the key is reused: a different payload is
    /// `Error::FingerprintMismatch`. Without it, any payload matches.
    pub fn fingerprint<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        match Fingerprint::of(payload) {
            Ok(fingerprint) => self.fingerprint = fingerprint,
            Err(err) => self.refused = Some(Error::Codec(err.into())),
        }
        self
    }

    /// Sets an already computed fingerprint ([`Fingerprint::NONE`] matches
    /// every payload).
    pub fn fingerprint_digest(mut self, fingerprint: Fingerprint) -> Self {
        self.fingerprint = fingerprint;
        self
    }

    /// The version of this call's values, written into its records (0 by
    /// default). Bump it when a change to the return type keeps its shape
    /// but not its meaning: a record of another version is then
    /// `Error::Codec(CodecError::VersionChanged)` instead of a misreading.
    /// (A change of shape needs no bump: the decoder refuses it.)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let _: Result<u32, idem::Error> = idem.call("s", "k").run(|| async { Ok(100) }).await;
    /// // Same shape, new meaning (cents, not euros): version 2.
    /// let out: Result<u32, idem::Error> = idem.call("s", "k").version(2).run(|| async { Ok(1) }).await;
    /// assert!(matches!(out, Err(idem::Error::Codec(idem::CodecError::VersionChanged { stored: 0, expected: 2, .. }))));
    /// # }
    /// ```
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// What happens to an `Err`: [`ReleaseErrors`] (default),
    /// [`replay_errors`](crate::replay_errors) or
    /// [`store_errors_if`](crate::store_errors_if).
    pub fn errors<Q>(self, policy: Q) -> Call<Q> {
        self.map_policy(|_| policy)
    }

    /// The call site this call's metrics are counted under (its `scope`
    /// label), instead of [`CallSite::UNNAMED`]. `#[idempotent]` sets the
    /// function's own. See [`call_site!`](crate::call_site).
    pub fn site(mut self, site: &'static CallSite) -> Self {
        self.site = site;
        self
    }

    /// The call's error policy.
    pub(crate) fn policy(&self) -> &P {
        &self.policy
    }

    /// The same call with its error policy wrapped or replaced.
    pub(crate) fn map_policy<Q>(self, wrap: impl FnOnce(P) -> Q) -> Call<Q> {
        Call {
            idem: self.idem,
            key: self.key,
            scope: self.scope,
            ttl: self.ttl,
            lease: self.lease,
            wait: self.wait,
            fingerprint: self.fingerprint,
            version: self.version,
            policy: wrap(self.policy),
            refused: self.refused,
            site: self.site,
        }
    }

    /// The hashed key of this call.
    pub fn record_key(&self) -> RecordKey {
        self.key
    }

    /// Runs `body` if this call wins the claim; otherwise replays the
    /// stored result or reports why not.
    pub async fn run<T, E, F, Fut>(self, body: F) -> Result<T, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let inner = self.inner();
        self.on_handle(&inner, body).await.result
    }

    /// As [`run`](Call::run), and also tells whether the result was
    /// replayed (for HTTP's `Idempotent-Replayed` header).
    pub async fn run_reported<T, E, F, Fut>(self, body: F) -> Reported<Result<T, E>>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let inner = self.inner();
        self.on_handle(&inner, body).await
    }

    /// The handle's store and cache, held by the caller's future while
    /// [`on_handle`](Call::on_handle)'s future borrows them.
    pub(crate) fn inner(&self) -> Arc<Inner> {
        Arc::clone(&self.idem.inner)
    }

    /// The protocol on the handle's store and cache. A plain fn returning
    /// the protocol's future, not an async fn awaiting it: an async layer
    /// between a caller and the protocol enlarges the call's future and
    /// copies the `Call` once more (measured with callgrind: one such layer
    /// cost the attribute 4% more instructions per call than the builder).
    pub(crate) fn on_handle<T, E, F, Fut>(
        self,
        inner: &Inner,
        body: F,
    ) -> impl Future<Output = Reported<Result<T, E>>>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let on_drop = Some(Arc::clone(&inner.store));
        let span = self.span();
        self.protocol(
            inner.store.as_ref(),
            inner.cache.as_ref(),
            on_drop,
            body,
            span.clone(),
        )
        .instrument(span)
    }

    /// The call's span: scope, short key hash, and (once known) outcome and
    /// whether it was replayed. With no subscriber listening at INFO this
    /// is a disabled span: no field is formatted.
    fn span(&self) -> tracing::Span {
        tracing::info_span!(
            "idem.call",
            scope = %self.scope,
            key = %self.key.short(),
            outcome = tracing::field::Empty,
            replayed = tracing::field::Empty,
        )
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
    pub async fn run_on<S, T, E, F, Fut>(self, store: &S, body: F) -> Result<T, E>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let span = self.span();
        self.protocol(store, None, None, body, span.clone())
            .instrument(span)
            .await
            .result
    }

    /// As [`run_on`](Call::run_on), and also tells whether the result was
    /// replayed.
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
    pub async fn run_on_reported<S, T, E, F, Fut>(
        self,
        store: &S,
        body: F,
    ) -> Reported<Result<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let span = self.span();
        self.protocol(store, None, None, body, span.clone())
            .instrument(span)
            .await
    }

    /// The protocol: claim, run, complete or release, replay. `on_drop`
    /// is the store to release on when the call is dropped mid-body. Each
    /// end is counted by outcome and recorded in `span`.
    async fn protocol<S, T, E, F, Fut>(
        mut self,
        store: &S,
        cache: Option<&LocalCache>,
        on_drop: Option<Arc<dyn Store>>,
        body: F,
        span: tracing::Span,
    ) -> Reported<Result<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        if let Some(err) = self
            .refused
            .take()
            .or_else(|| self.checked_settings().err())
        {
            return self.ended(&span, Observed::Invalid, Err(err.into()));
        }
        if let Some(hit) = cache.and_then(|cache| cache.get(&self.key)) {
            return self.replayed(&hit.fingerprint, &hit.record, &span);
        }
        let claim = Claim {
            token: Token::random(),
            fingerprint: self.fingerprint,
            lease: self.effective_lease(),
            site: self.site.name(),
        };
        let finished = match self
            .claim_key(store, cache, on_drop.as_ref(), &claim, &span)
            .await
        {
            Ok(finished) => finished,
            Err(ended) => return ended,
        };
        let mut guard = ClaimGuard {
            store,
            on_drop,
            key: self.key,
            token: claim.token,
            armed: true,
            site: self.site,
        };
        if !crate::step::steps_match(&finished, &self.fingerprint) {
            guard.release().await;
            return self.ended(&span, Observed::Mismatch, Err(self.mismatch().into()));
        }
        let result = self.run_body(&guard, &claim, finished, body).await;
        self.settle(guard, cache, result, &span).await
    }

    /// Claims the key, waiting (up to `wait`) while another caller holds
    /// it. `Ok` with the steps an earlier attempt finished when the claim
    /// is won; `Err` with the call's answer otherwise (a replay, a
    /// mismatch, in progress, a store failure).
    async fn claim_key<S, T, E>(
        // `&mut`: a `&Call` held across an await would need `P: Sync`.
        &mut self,
        store: &S,
        cache: Option<&LocalCache>,
        on_drop: Option<&Arc<dyn Store>>,
        claim: &Claim,
        span: &tracing::Span,
    ) -> Result<Vec<(StepId, bytes::Bytes)>, Reported<Result<T, E>>>
    where
        S: Store + ?Sized,
        T: DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
    {
        let site = self.site;
        let started = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        loop {
            let sent = Instant::now();
            let answer = store.claim(&self.key, claim).await;
            site.store_step(Step::Claim, sent.elapsed());
            let (fingerprint, retry_after) = match answer {
                Err(err) => {
                    tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: claim failed; body not run");
                    if let Some(owned) = on_drop {
                        renewal::release_if_applied(owned, self.key, claim.token, claim.lease);
                    }
                    return Err(self.ended(
                        span,
                        Observed::StoreError,
                        Err(Error::Store(err).into()),
                    ));
                }
                Ok(ClaimOutcome::Won { took_over, steps }) => {
                    tracing::debug!(scope = %self.scope, key = %self.key.short(), took_over, steps = steps.len(), "idem: claimed");
                    if took_over {
                        site.takeover();
                    }
                    return Ok(steps);
                }
                Ok(ClaimOutcome::Completed {
                    fingerprint,
                    record,
                    expires_in,
                }) => {
                    if let Some(cache) = cache {
                        cache.put(self.key, fingerprint, record.clone(), sent + expires_in);
                    }
                    return Err(self.replayed(&fingerprint, &record, span));
                }
                Ok(ClaimOutcome::InProgress {
                    fingerprint,
                    retry_after,
                }) => (fingerprint, retry_after),
            };
            if !self.fingerprint.matches(&fingerprint) {
                return Err(self.ended(span, Observed::Mismatch, Err(self.mismatch().into())));
            }
            let waited = started.elapsed();
            if waited >= self.wait {
                tracing::debug!(scope = %self.scope, key = %self.key.short(), ?retry_after, "idem: in progress elsewhere");
                let err = Error::InProgress {
                    scope: self.scope.clone(),
                    key: self.key.short(),
                    retry_after,
                };
                return Err(self.ended(span, Observed::InProgress, Err(err.into())));
            }
            if backoff == FIRST_BACKOFF {
                site.wait();
            }
            tokio::time::sleep(backoff.min(self.wait - waited)).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Runs the body with the call's context (`child_key`, steps) while
    /// the lease is renewed.
    async fn run_body<S, T, E, F, Fut>(
        // `&mut`: a `&Call` held across an await would need `P: Sync`.
        &mut self,
        guard: &ClaimGuard<'_, S>,
        claim: &Claim,
        finished: Vec<(StepId, bytes::Bytes)>,
        body: F,
    ) -> Result<T, E>
    where
        S: Store + ?Sized,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        // One copy of the scope for the renewer and the steps, made only
        // for a store the handle owns.
        let shared: Option<Arc<str>> = guard.on_drop.as_ref().map(|_| self.scope.as_str().into());
        let running = self.running(guard, claim.token, finished, shared.clone());
        let body = crate::context::scoped(running, body());
        match shared {
            // A store the handle owns is renewed from a task of its own, so
            // a body that blocks its thread still keeps its lease.
            Some(scope) => {
                let inner = &self.idem.inner;
                let _renewed = inner
                    .renewer
                    .register(inner, self.key, claim.token, claim.lease, scope, self.site)
                    .await;
                body.await
            }
            None => {
                let (store, key, token) = (guard.store, &self.key, claim.token);
                renewal::in_task(store, key, token, claim.lease, &self.scope, self.site, body).await
            }
        }
    }

    /// Settles the key after the body ran: completes it with the result's
    /// record (or a not-stored marker), or releases it for a released
    /// error.
    async fn settle<S, T, E>(
        self,
        mut guard: ClaimGuard<'_, S>,
        cache: Option<&LocalCache>,
        result: Result<T, E>,
        span: &tracing::Span,
    ) -> Reported<Result<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize,
        E: From<Error>,
        P: ErrorPolicy<E>,
    {
        let limit = self.idem.inner.max_record_bytes;
        let record = match &result {
            Ok(value) => record::encode(Outcome::Ok, value, limit),
            Err(err) if self.policy.stores(err) => self.policy.encode(err, limit),
            Err(_) => {
                guard.release().await;
                return self.ended(span, Observed::Ran, result);
            }
        };
        // The body ran: an unstorable result still settles the key, or a
        // retry would run the body (and its effects) again.
        let record = match record {
            Ok(mut record) => {
                record::set_version(&mut record, self.version);
                record
            }
            Err(err) => {
                tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: result cannot be stored; duplicates get Error::Codec(NotStored) until the record expires");
                record::not_stored(&err.to_string())
            }
        };
        // From here on the claim is settled by completion or by its lease:
        // a store failure now must not release it, or a retry would run the
        // body a second time at once.
        guard.armed = false;
        let sent = Instant::now();
        let answer = guard
            .store
            .complete(&self.key, guard.token, &record, self.ttl)
            .await;
        self.site.store_step(Step::Complete, sent.elapsed());
        match answer {
            Ok(Fence::Held) => {
                if let Some(cache) = cache {
                    cache.put(self.key, self.fingerprint, record.into(), sent + self.ttl);
                }
                self.ended(span, Observed::Ran, result)
            }
            Ok(lost) => {
                let taken_over = lost == Fence::Lost;
                tracing::warn!(scope = %self.scope, key = %self.key.short(), taken_over, "idem: lease lost; result not stored");
                let err = Error::LeaseLost {
                    key: self.key.short(),
                    taken_over,
                    scope: self.scope.clone(),
                };
                self.ended(span, Observed::LeaseLost, Err(err.into()))
            }
            Err(err) => {
                tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: completion failed; the claim stays until its lease ends");
                self.ended(span, Observed::StoreError, Err(Error::Store(err).into()))
            }
        }
    }

    /// The call's answer when it did not replay, counted and recorded.
    fn ended<T, E>(
        &self,
        span: &tracing::Span,
        outcome: Observed,
        result: Result<T, E>,
    ) -> Reported<Result<T, E>> {
        observed(self.site, span, outcome, false);
        Reported {
            result,
            replayed: false,
        }
    }

    /// What the body's task knows of this call, for `child_key` and
    /// `idem::step`.
    fn running<S: Store + ?Sized>(
        &self,
        guard: &ClaimGuard<'_, S>,
        token: Token,
        finished: Vec<(StepId, bytes::Bytes)>,
        scope: Option<Arc<str>>,
    ) -> Running {
        let steps = match (guard.on_drop.clone(), scope) {
            (Some(store), Some(scope)) if store.records_steps() => Ok(StepCall {
                store,
                token,
                scope,
                ttl: self.ttl,
                limit: self.idem.inner.max_record_bytes,
                version: self.version,
                fingerprint: self.fingerprint,
                finished,
                seen: Default::default(),
            }),
            (Some(_), _) => Err(crate::step::UNSUPPORTED),
            (None, _) => Err(crate::step::BORROWED),
        };
        Running {
            key: self.key,
            steps,
        }
    }

    /// Settings that cannot work are refused before any claim: a zero
    /// `ttl` would store nothing, a zero `lease` would let a second caller
    /// take over at once, and a `lease` longer than the `ttl` would let a
    /// claim outlive the record it guards.
    fn checked_settings(&self) -> Result<(), Error> {
        let refuse = |reason: String| Err(Error::InvalidOption(reason));
        if self.ttl.is_zero() {
            return refuse(format!(
                "`ttl` must be longer than zero (scope `{}`)",
                self.scope
            ));
        }
        let Some(lease) = self.lease else {
            return Ok(());
        };
        if lease.is_zero() {
            return refuse(format!(
                "`lease` must be longer than zero (scope `{}`)",
                self.scope
            ));
        }
        if lease > self.ttl {
            return refuse(format!(
                "`lease` ({lease:?}) is longer than `ttl` ({:?}) (scope `{}`): a claim may not outlive the record it guards",
                self.ttl, self.scope
            ));
        }
        Ok(())
    }

    /// The lease given, or the default shortened to a shorter TTL.
    fn effective_lease(&self) -> Duration {
        self.lease.unwrap_or(DEFAULT_LEASE.min(self.ttl))
    }

    fn mismatch(&self) -> Error {
        tracing::debug!(scope = %self.scope, key = %self.key.short(), "idem: fingerprint mismatch");
        Error::FingerprintMismatch {
            scope: self.scope.clone(),
            key: self.key.short(),
        }
    }

    /// Answers a duplicate from a completed record, if its fingerprint
    /// matches ours.
    fn replayed<T, E>(
        &self,
        fingerprint: &Fingerprint,
        record: &[u8],
        span: &tracing::Span,
    ) -> Reported<Result<T, E>>
    where
        T: DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
    {
        if !self.fingerprint.matches(fingerprint) {
            observed(self.site, span, Observed::Mismatch, false);
            return Reported {
                result: Err(self.mismatch().into()),
                replayed: false,
            };
        }
        tracing::debug!(scope = %self.scope, key = %self.key.short(), "idem: replayed");
        let result = match self.replay(record) {
            Ok(result) => {
                observed(self.site, span, Observed::Replayed, true);
                result
            }
            Err(err) => {
                observed(self.site, span, Observed::CodecError, true);
                Err(err.into())
            }
        };
        Reported {
            result,
            replayed: true,
        }
    }

    /// The stored result, or why it cannot be decoded.
    fn replay<T, E>(&self, record: &[u8]) -> Result<Result<T, E>, Error>
    where
        T: DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
    {
        let decoded = record::parse(record).and_then(|parsed| match parsed.outcome {
            Outcome::Ok => {
                parsed.check_version(self.version)?;
                parsed.decode().map(Ok)
            }
            Outcome::Err => {
                parsed.check_version(self.version)?;
                self.policy.decode(record).map(Err)
            }
            Outcome::NotStored => Err(parsed.not_stored()),
        });
        decoded.map_err(|err| {
            tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: stored record not decodable");
            Error::Codec(err)
        })
    }
}

/// Counts a call's outcome and records it in the call's span.
fn observed(site: &CallSite, span: &tracing::Span, outcome: Observed, replayed: bool) {
    site.call(outcome);
    span.record("outcome", tracing::field::display(outcome.as_str()));
    span.record("replayed", replayed);
}

/// Releases the claim if the call ends without settling it: the body
/// returned a released `Err`, panicked, or the call's future was dropped.
struct ClaimGuard<'s, S: Store + ?Sized> {
    store: &'s S,
    /// The same store, owned, for a release after a drop; `None` for a
    /// borrowed store.
    on_drop: Option<Arc<dyn Store>>,
    key: RecordKey,
    token: Token,
    armed: bool,
    site: &'static CallSite,
}

impl<S: Store + ?Sized> ClaimGuard<'_, S> {
    async fn release(&mut self) {
        self.armed = false;
        let sent = Instant::now();
        release(self.store, &self.key, self.token).await;
        self.site.store_step(Step::Release, sent.elapsed());
    }
}

async fn release<S: Store + ?Sized>(store: &S, key: &RecordKey, token: Token) {
    match store.release(key, token).await {
        Ok(Fence::Held) => tracing::debug!(key = %key.short(), "idem: released"),
        Ok(Fence::Lost | Fence::Expired) => {
            tracing::debug!(key = %key.short(), "idem: nothing to release; lease lost")
        }
        Err(err) => {
            tracing::warn!(key = %key.short(), error = %err, "idem: release failed; the claim ends with its lease")
        }
    }
}

impl<S: Store + ?Sized> Drop for ClaimGuard<'_, S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(store) = self.on_drop.take() else {
            return;
        };
        // Drop cannot await: hand the release to the runtime if there is
        // one. Without a runtime the claim simply ends with its lease.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (key, token) = (self.key, self.token);
            runtime.spawn(async move { release(store.as_ref(), &key, token).await });
        }
    }
}
