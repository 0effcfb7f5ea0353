//! The claim's guard: releases the claim when a call ends without
//! settling it.

use std::sync::Arc;

use tokio::time::Instant;

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
        }
    }

    /// Releases the claim now, so a retry runs the body again.
    pub(super) async fn release(&mut self) {
        self.armed = false;
        let sent = Instant::now();
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
