//! The claim stage: the key is claimed (waiting while another caller holds
//! it), or the call is answered from a completed record.

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::guard::ClaimGuard;
use super::{Call, Failed, Ran, Reported};
use crate::cache::LocalCache;
use crate::observe::{Op, Outcome as Observed};
use crate::record::{self, Kind};
use crate::renewal;
use crate::{
    Claim, ClaimOutcome, Error, ErrorPolicy, Fence, Fingerprint, StepId, Store, StoreError,
};

const FIRST_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_millis(250);

/// The steps an earlier attempt finished, handed to the body's context.
pub(super) type Finished = Vec<(StepId, bytes::Bytes)>;

impl<P> Call<P> {
    /// Claims the key, waiting (up to `wait`) while another caller holds
    /// it. `Ok` with the steps an earlier attempt finished, whether a
    /// vanished holder's claim was taken over, and when the winning claim
    /// was sent, when the claim is won; `Err` with the call's answer
    /// otherwise (a replay, a mismatch, in progress, a store failure).
    pub(super) async fn claim_key<S, T, E>(
        // `&mut`: a `&Call` held across an await would need `P: Sync`.
        &mut self,
        store: &S,
        cache: Option<&LocalCache>,
        on_drop: Option<&Arc<dyn Store>>,
        claim: &Claim,
        span: &tracing::Span,
    ) -> Result<(Finished, bool, Instant), Ran<T, E>>
    where
        S: Store + ?Sized,
        T: DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        let site = self.site;
        let started = Instant::now();
        let mut sent = started;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let answer = store.claim(&self.key, claim).await;
            site.store_op(Op::Claim, sent);
            let (fingerprint, retry_after) = match answer {
                Err(err) => return Err(self.claim_failed(err, on_drop, claim, span)),
                Ok(ClaimOutcome::Won {
                    took_over, steps, ..
                }) => {
                    tracing::debug!(scope = %self.scope, key = %self.key.short(), took_over, steps = steps.len(), "idem: claimed");
                    if took_over {
                        site.takeover();
                    }
                    return Ok((steps, took_over, sent));
                }
                Ok(ClaimOutcome::Completed {
                    fingerprint,
                    record,
                    expires_in,
                    ..
                }) => {
                    if let Some(cache) = cache {
                        cache.put(self.key, fingerprint, record.clone(), sent + expires_in);
                    }
                    return Err(self.replayed(&fingerprint, &record, span));
                }
                Ok(ClaimOutcome::Expired {
                    fingerprint,
                    expired_ago,
                    ..
                }) => return Err(self.expired(&fingerprint, expired_ago, span)),
                Ok(ClaimOutcome::InProgress {
                    fingerprint,
                    retry_after,
                    ..
                }) => (fingerprint, retry_after),
                // An answer of a later contract than this runtime knows
                // (`ClaimOutcome` is non-exhaustive): fail closed.
                Ok(_) => {
                    let err = StoreError::unsupported(
                        "store",
                        "a claim's answer this build of idem does not know",
                    );
                    return Err(self.claim_failed(err, on_drop, claim, span));
                }
            };
            let waited = started.elapsed();
            self.may_wait(&fingerprint, retry_after, waited, span)?;
            if backoff == FIRST_BACKOFF {
                site.wait();
            }
            // Boxed: waiting is rare, and a timer inline would enlarge
            // every call's future.
            Box::pin(tokio::time::sleep(backoff.min(self.wait - waited))).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            sent = Instant::now();
        }
    }

    /// Whether the call may wait for another holder of the key (of
    /// `fingerprint`, done in `retry_after`) after `waited`: `Err` with the
    /// call's answer when its payload differs or its `wait` ran out.
    fn may_wait<T, E>(
        &self,
        fingerprint: &Fingerprint,
        retry_after: Duration,
        waited: Duration,
        span: &tracing::Span,
    ) -> Result<(), Ran<T, E>> {
        // A held claim of another payload is a mismatch, unless the call
        // reruns and the claim is live: then it waits its turn (the claim
        // is the lock). A lapsed one (no time left) is refused either way.
        let turn = self.reruns && !retry_after.is_zero();
        if !turn && !self.fingerprint.matches(fingerprint) {
            let err = Failed::Idem(self.mismatched());
            return Err(self.ended(span, Observed::Mismatch, Err(err)));
        }
        if waited < self.wait {
            return Ok(());
        }
        tracing::debug!(scope = %self.scope, key = %self.key.short(), ?retry_after, "idem: in progress elsewhere");
        let err = Error::InProgress {
            scope: self.scope.to_string(),
            key: self.key.short(),
            retry_after,
        };
        Err(self.ended(span, Observed::InProgress, Err(Failed::Idem(err))))
    }

    /// Makes sure a won claim holds a whole lease before the body runs. A
    /// store stamps the lease no earlier than the claim was sent, but the
    /// answer may come late (a claim that waited on a transaction's row
    /// lock, a slow network): the renewer's first renewal, a third of a
    /// lease after the answer, could then come after the lease ran out and
    /// another caller took the key over. So a claim answered a third of a
    /// lease or more after it was sent is renewed first; if the store says
    /// it is already lost, the body does not run.
    pub(super) async fn hold_whole_lease<S: Store + ?Sized>(
        &mut self,
        guard: &mut ClaimGuard<'_, S>,
        claim: &Claim,
        sent: Instant,
    ) -> Result<(), Error> {
        if sent.elapsed() < renewal::third(claim.lease) {
            return Ok(());
        }
        let renewed = Instant::now();
        let answer = guard.store.renew(&self.key, claim.token, claim.lease).await;
        self.site.store_op(Op::Renew, renewed);
        match answer {
            Ok(Fence::Held) => Ok(()),
            Ok(lost) => {
                guard.disarm();
                tracing::warn!(scope = %self.scope, key = %self.key.short(), "idem: the claim's answer came after its lease; body not run");
                Err(Error::LeaseLost {
                    key: self.key.short(),
                    taken_over: lost == Fence::Lost,
                    scope: self.scope.to_string(),
                })
            }
            Err(err) => {
                guard.release().await;
                Err(Error::Store(err))
            }
        }
    }

    /// A claim the store did not answer: the body does not run, and a
    /// claim that may have been applied lapses in the background.
    fn claim_failed<T, E>(
        &self,
        err: StoreError,
        on_drop: Option<&Arc<dyn Store>>,
        claim: &Claim,
        span: &tracing::Span,
    ) -> Ran<T, E> {
        tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: claim failed; body not run");
        // `testing::probe` refuses every claim: its handle is told the
        // scope here, off the path of a won claim.
        if let Some(note) = &self.idem.inner.on_claim_failed {
            note(&self.scope);
        }
        if let Some(owned) = on_drop {
            renewal::lapse_if_applied(owned, self.key, claim.token, claim.lease);
        }
        self.ended(
            span,
            Observed::StoreError,
            Err(Failed::Idem(Error::Store(err))),
        )
    }

    pub(super) fn mismatched(&self) -> Error {
        tracing::debug!(scope = %self.scope, key = %self.key.short(), "idem: fingerprint mismatch");
        Error::FingerprintMismatch {
            scope: self.scope.to_string(),
            key: self.key.short(),
        }
    }

    /// Answers a late duplicate from a tombstone: the call completed, its
    /// record is gone, and the body does not run again.
    fn expired<T, E>(
        &self,
        fingerprint: &Fingerprint,
        expired_ago: Duration,
        span: &tracing::Span,
    ) -> Ran<T, E> {
        if !self.fingerprint.matches(fingerprint) {
            return self.ended(
                span,
                Observed::Mismatch,
                Err(Failed::Idem(self.mismatched())),
            );
        }
        tracing::debug!(scope = %self.scope, key = %self.key.short(), ?expired_ago, "idem: expired; tombstone found");
        let err = Error::Expired {
            scope: self.scope.to_string(),
            key: self.key.short(),
            expired_ago,
        };
        self.ended(span, Observed::Expired, Err(Failed::Idem(err)))
    }

    /// Answers a duplicate from a completed record, if its fingerprint
    /// matches ours.
    pub(super) fn replayed<T, E>(
        &self,
        fingerprint: &Fingerprint,
        record: &[u8],
        span: &tracing::Span,
    ) -> Ran<T, E>
    where
        T: DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        if !self.fingerprint.matches(fingerprint) {
            return self.ended(
                span,
                Observed::Mismatch,
                Err(Failed::Idem(self.mismatched())),
            );
        }
        tracing::debug!(scope = %self.scope, key = %self.key.short(), "idem: replayed");
        let result = match self.replay(record) {
            Ok(result) => {
                super::settle::observed(self.site, span, Observed::Replayed, true);
                result
            }
            Err(err) => {
                super::settle::observed(self.site, span, Observed::CodecError, true);
                Err(Failed::Idem(err))
            }
        };
        Reported::ran(result, true)
    }

    /// The stored result, or why it cannot be decoded.
    fn replay<T, E>(&self, record: &[u8]) -> Result<Result<T, Failed<E>>, Error>
    where
        T: DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        let decoded = record::parse(record).and_then(|parsed| match parsed.kind {
            Kind::Ok => {
                parsed.check_version(self.version)?;
                parsed.decode().map(Ok)
            }
            Kind::Err => {
                parsed.check_version(self.version)?;
                let error = self.policy.decode(record)?;
                Ok(Err(Failed::Body {
                    error,
                    stored: true,
                }))
            }
            Kind::NotStored => Err(parsed.not_stored()),
        });
        decoded.map_err(|err| {
            tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: stored record not decodable");
            Error::Codec(err)
        })
    }
}
