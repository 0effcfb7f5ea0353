//! The run stage: the body runs with the call's context (`child_key`,
//! steps) while the claim's lease is renewed.

use std::pin::pin;

use super::Call;
use super::claim::Finished;
use super::guard::ClaimGuard;
use crate::context::{Running, StepCall};
use crate::key::ScopeText;
use crate::renewal;
use crate::{Claim, Store, Token};

impl<P> Call<P> {
    /// Runs the body with the call's context (`child_key`, steps) while
    /// the lease is renewed.
    pub(super) async fn run_body<S, T, E, F, Fut>(
        // `&mut`: a `&Call` held across an await would need `P: Sync`.
        &mut self,
        guard: &ClaimGuard<'_, S>,
        claim: &Claim,
        finished: Finished,
        body: F,
    ) -> Result<T, E>
    where
        S: Store + ?Sized,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        // The scope for the renewer and the steps, for a store the handle
        // owns.
        let shared = guard.on_drop.as_ref().map(|_| self.scope.clone());
        // The body's context and future are made only after the last other
        // await, so the call's future holds them once.
        match shared {
            // A store the handle owns is renewed from a task of its own, so
            // a body that blocks its thread still keeps its lease.
            Some(scope) => {
                let inner = &self.idem.inner;
                let (key, token, lease, site) = (self.key, claim.token, claim.lease, self.site);
                let renewed = scope.clone();
                let (_renewed, spawned) =
                    (inner.renewer).register(inner, key, token, lease, renewed, site);
                if spawned {
                    renewal::let_start().await;
                }
                let running = self.running(guard, claim.token, finished, Some(scope));
                crate::context::scoped(running, body()).await
            }
            None => {
                let running = self.running(guard, claim.token, finished, None);
                // Pinned here, not moved into `in_task`'s future: one copy.
                let body = pin!(crate::context::scoped(running, body()));
                let (store, key, token) = (guard.store, &self.key, claim.token);
                let scope = self.scope.as_str();
                renewal::in_task(store, key, token, claim.lease, scope, self.site, body).await
            }
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
}
