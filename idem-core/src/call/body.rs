//! The run stage: the body runs with the call's context (`child_key`,
//! steps) while the claim's lease is renewed.

use std::pin::pin;

use super::Call;
use super::claim::Finished;
use super::guard::ClaimGuard;
use crate::context::{CallContext, StepCall};
use crate::key::ScopeText;
use crate::renewal::{self, Renewal};
use crate::{Claim, Store, Token};

/// A call's body: a closure returning a future of `Result<T, E>`. Every
/// run takes one (`F: Body<T, E>`, the one bound of [`Call::run`] and its
/// variants, [`step`](crate::step) and [`queue::process`](crate::queue::process));
/// every `FnOnce() -> impl Future<Output = Result<T, E>>` is one, so it is
/// a name for that bound, not a trait to implement.
///
/// ```
/// fn check<F: idem::Body<u8, idem::Error>>(body: F) -> F {
///     body
/// }
/// let _ = check(|| async { Ok(1) });
/// ```
pub trait Body<T, E>: FnOnce() -> <Self as Body<T, E>>::Future {
    /// The body's future.
    type Future: Future<Output = Result<T, E>>;
}

impl<T, E, F, Fut> Body<T, E> for F
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Future = Fut;
}

impl<P> Call<P> {
    /// Runs the body with the call's context (`child_key`, steps) while
    /// the lease is renewed.
    #[expect(clippy::manual_async_fn, reason = "an async fn doubles its arguments")]
    pub(super) fn run_body<S, T, E, F>(
        // `&mut`: a `&Call` held across an await would need `P: Sync`.
        &mut self,
        guard: &ClaimGuard<'_, S>,
        claim: &Claim,
        finished: Finished,
        span: &tracing::Span,
        body: F,
    ) -> impl Future<Output = Result<T, E>>
    where
        S: Store + ?Sized,
        F: Body<T, E>,
    {
        async move {
            let renewal = Renewal {
                key: self.key,
                token: claim.token,
                lease: claim.lease,
                scope: self.scope.clone(),
                site: self.site,
                span: span.clone(),
            };
            // A store the handle owns is renewed from a task of its own, so
            // a body that blocks its thread still keeps its lease.
            let Some(_) = guard.on_drop else {
                // A borrowed store's call (a transaction's: the rare one)
                // renews in its own task, boxed, so that the call's future
                // does not carry that timer for every other call.
                let running = self.running(guard, claim.token, finished, None);
                let store = guard.store;
                return Box::pin(async move {
                    let body = pin!(crate::context::scoped(running, body()));
                    renewal::in_task(store, renewal, body).await
                })
                .await;
            };
            let (_renewed, let_run) = self.idem.inner.renewer.register(renewal);
            if let_run {
                renewal::let_start().await;
            }
            // The body's context and future are made only after the last
            // other await, so the call's future holds them once.
            let running = self.running(guard, claim.token, finished, Some(self.scope.clone()));
            crate::context::scoped(running, body()).await
        }
    }

    /// What the body's task knows of this call, for `child_key` and
    /// `idem::step`.
    fn running<S: Store + ?Sized>(
        &self,
        guard: &ClaimGuard<'_, S>,
        token: Token,
        finished: Finished,
        scope: Option<ScopeText>,
    ) -> CallContext {
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
        CallContext {
            key: self.key,
            steps,
        }
    }
}
