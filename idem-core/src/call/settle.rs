//! The settle stage: the key is completed with the result's record (or a
//! not-stored marker), or released for a released error.

use std::time::Duration;

use serde::{Serialize, de::DeserializeOwned};
use tokio::time::Instant;

use super::guard::ClaimGuard;
use super::{Call, Failed, Ran, Reported};
use crate::backoff::Backoff;
use crate::cache::LocalCache;
use crate::observe::{Op, Outcome as Observed};
use crate::record::{self, Kind};
use crate::store::Retention;
use crate::{CallSite, Error, ErrorPolicy, Fence, Store, StoreError};

/// The pause before a failed completion is sent again, doubling up to
/// [`LAST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const LAST_PAUSE: Duration = Duration::from_secs(1);

impl<P> Call<P> {
    /// Settles the key after the body ran: completes it with the result's
    /// record (or a not-stored marker), or releases it for a released
    /// error.
    #[expect(clippy::manual_async_fn, reason = "an async fn doubles its arguments")]
    pub(super) fn settle<S, T, E>(
        // `&mut`, not by value: the call stays in the protocol's future
        // instead of being copied into this one.
        &mut self,
        guard: &mut ClaimGuard<'_, S>,
        cache: Option<&LocalCache>,
        result: Result<T, E>,
        lease: Duration,
        span: &tracing::Span,
    ) -> impl Future<Output = Ran<T, E>>
    where
        S: Store + ?Sized,
        T: Serialize + DeserializeOwned,
        P: ErrorPolicy<E>,
    {
        // An async block: an async fn would keep a second copy of the
        // result.
        async move {
            let limit = self.idem.inner.max_record_bytes;
            let record = match &result {
                Ok(value) => record::encode_replayable(Kind::Ok, value, limit),
                Err(err) => match self.policy.record(err, limit) {
                    Some(record) => record,
                    None => {
                        guard.release().await;
                        let result = result.map_err(|error| Failed::Body {
                            error,
                            stored: false,
                        });
                        return self.ended(span, Observed::Ran, result);
                    }
                },
            };
            let result = result.map_err(|error| Failed::Body {
                error,
                stored: true,
            });
            let record = self.versioned(record);
            guard.disarm();
            let sent = Instant::now();
            let kept = self.retention();
            let answer = complete(guard, &record, kept, sent + lease, self.site).await;
            let (outcome, err) = match answer {
                Ok(Fence::Held) => {
                    if let Some(cache) = cache {
                        cache.put(self.key, self.fingerprint, record.into(), sent + self.ttl);
                    }
                    return self.ended(span, Observed::Ran, result);
                }
                Ok(lost) => {
                    let taken_over = lost == Fence::Lost;
                    tracing::warn!(scope = %self.scope, key = %self.key.short(), taken_over, "idem: lease lost; result not stored");
                    let err = Error::LeaseLost {
                        key: self.key.short(),
                        taken_over,
                        scope: self.scope.to_string(),
                    };
                    (Observed::LeaseLost, err)
                }
                Err(err) => {
                    tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: completion failed; the claim stays until its lease ends");
                    (Observed::StoreError, Error::Store(err))
                }
            };
            self.ended(span, outcome, Err(Failed::Idem(err)))
        }
    }

    /// The record with this call's version; an unstorable result still
    /// settles the key (with a not-stored marker), or a retry would run
    /// the body (and its effects) again.
    fn versioned(&self, record: Result<Vec<u8>, crate::CodecError>) -> Vec<u8> {
        match record {
            Ok(mut record) => {
                record::set_version(&mut record, self.version);
                record
            }
            Err(err) => {
                tracing::warn!(scope = %self.scope, key = %self.key.short(), error = %err, "idem: result cannot be stored; duplicates get Error::Codec(NotStored) until the record expires");
                record::not_stored(&err.to_string())
            }
        }
    }

    /// The call's answer when it did not replay, counted and recorded.
    pub(super) fn ended<T, E>(
        &self,
        span: &tracing::Span,
        outcome: Observed,
        result: Result<T, Failed<E>>,
    ) -> Ran<T, E> {
        observed(self.site, span, outcome, false);
        Reported::ran(result, false)
    }
}

/// Counts a call's outcome and records it in the call's span.
pub(super) fn observed(site: &CallSite, span: &tracing::Span, outcome: Observed, replayed: bool) {
    site.call(outcome);
    span.record("outcome", tracing::field::display(outcome.as_str()));
    span.record("replayed", replayed);
}

/// Completes the guard's key with `record`, sending the completion again
/// after a transient failure until `until` (the claim's lease, counted from
/// the first sending): the body ran, and its result is not given up while
/// the claim may still hold. Fencing keeps the resends safe: one after a
/// takeover is `Lost`, one after the lease `Expired`.
async fn complete<S: Store + ?Sized>(
    guard: &ClaimGuard<'_, S>,
    record: &[u8],
    kept: Retention,
    until: Instant,
    site: &CallSite,
) -> Result<Fence, StoreError> {
    let (store, key, token) = (guard.store, &guard.key, guard.token);
    let sent = Instant::now();
    let mut answer = store.complete(key, token, record, kept).await;
    site.store_op(Op::Complete, sent);
    let mut backoff = Backoff::new(FIRST_PAUSE, LAST_PAUSE, until);
    while let Err(err) = &answer
        && err.kind().is_transient()
        && backoff.wait().await
    {
        tracing::debug!(key = %key.short(), error = %err, "idem: completion failed; sending it again");
        let sent = Instant::now();
        let again = store.complete_again(key, token, record, kept).await;
        site.store_op(Op::Complete, sent);
        match again {
            // This store cannot send it again: the earlier error stands.
            Err(err) if !err.kind().is_transient() => break,
            again => answer = again,
        }
    }
    answer
}
