//! The claim's guard: releases the claim when a call ends without
//! settling it, or lets it lapse when releasing would lose the evidence
//! of a takeover whose reconcile has not answered.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::reconcile::Answer;
use crate::observe::Op;
use crate::{CallSite, Fence, RecordKey, Store, Token};

/// Releases the claim if the call ends without settling it: the body
/// returned a released `Err`, panicked, or the call's future was dropped.
pub(super) struct ClaimGuard<'s, S: Store + ?Sized> {
    pub(super) store: &'s S,
    /// The same store, owned, for a release after a drop; `None` for a
    /// borrowed store.
    pub(super) on_drop: Option<Arc<dyn Store>>,
    pub(super) key: RecordKey,
    pub(super) token: Token,
    armed: bool,
    site: &'static CallSite,
    /// A takeover's reconcile answer, while the call has one.
    reconcile: Option<Arc<Answer>>,
}

impl<'s, S: Store + ?Sized> ClaimGuard<'s, S> {
    pub(super) fn new(
        store: &'s S,
        on_drop: Option<Arc<dyn Store>>,
        key: RecordKey,
        token: Token,
        site: &'static CallSite,
    ) -> Self {
        ClaimGuard {
            store,
            on_drop,
            key,
            token,
            armed: true,
            site,
            reconcile: None,
        }
    }

    /// Makes the guard let the claim lapse, not release it, until the
    /// takeover's reconcile has answered: a released key would be claimed
    /// fresh and run the body without asking the reconcile again.
    pub(super) fn hold_until_reconciled(&mut self, answer: Option<Arc<Answer>>) {
        self.reconcile = answer;
    }

    fn lapses(&self) -> bool {
        self.reconcile
            .as_ref()
            .is_some_and(|answer| answer.pending())
    }

    /// Releases the claim now, so a retry runs the body again.
    pub(super) async fn release(&mut self) {
        self.armed = false;
        let sent = Instant::now();
        if self.lapses() {
            lapse(self.store, &self.key, self.token).await;
            self.site.store_op(Op::Renew, sent);
            return;
        }
        release(self.store, &self.key, self.token).await;
        self.site.store_op(Op::Release, sent);
    }

    /// The claim is settled from here on (by completion, or by its lease):
    /// neither a store failure nor a drop may release it, or a retry would
    /// run the body a second time at once.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

async fn release<S: Store + ?Sized>(store: &S, key: &RecordKey, token: Token) {
    match store.release(key, token).await {
        Ok(Fence::Held) => tracing::debug!(key = %key.short(), "idem: released"),
        Ok(_) => {
            tracing::debug!(key = %key.short(), "idem: nothing to release; lease lost")
        }
        Err(err) => {
            tracing::warn!(key = %key.short(), error = %err, "idem: release failed; the claim ends with its lease")
        }
    }
}

/// Ends the claim's lease now without freeing the key (a renewal to
/// zero): the next call takes the claim over, and asks its reconcile.
async fn lapse<S: Store + ?Sized>(store: &S, key: &RecordKey, token: Token) {
    match store.renew(key, token, Duration::ZERO).await {
        Ok(_) => {
            tracing::debug!(key = %key.short(), "idem: reconcile did not answer; the takeover lapses for the next call")
        }
        Err(err) => {
            tracing::warn!(key = %key.short(), error = %err, "idem: lapse failed; the claim ends with its lease")
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
            let (key, token, lapses) = (self.key, self.token, self.lapses());
            runtime.spawn(async move {
                match lapses {
                    true => lapse(store.as_ref(), &key, token).await,
                    false => release(store.as_ref(), &key, token).await,
                }
            });
        }
    }
}
