//! Lease renewal while a body runs, and the cleanup of a claim whose
//! answer was lost. Renewal runs from a task of its own for stores the
//! handle owns, so a body that blocks its thread keeps its lease on a
//! multi-thread runtime; in the body's own task for a borrowed store (a
//! transaction), which cannot be sent to another task.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::RuntimeFlavor;
use tokio::task::JoinHandle;

use crate::{Fence, RecordKey, Store, Token};

/// A renewal task, stopped when this is dropped (the body ended).
pub(crate) struct Renewal(JoinHandle<()>);

impl Renewal {
    /// Starts the renewal task and lets it take its first step: a task
    /// spawned from a worker waits in that worker's LIFO slot, which other
    /// workers do not steal from, so a body that blocked the worker at
    /// once would keep it from ever running. Once it has run, its timer
    /// wakes it on whichever worker is free.
    pub(crate) async fn start(
        store: &Arc<dyn Store>,
        key: RecordKey,
        token: Token,
        lease: Duration,
        scope: &str,
    ) -> Self {
        let renewal = Self::spawn(store, key, token, lease, scope);
        if tokio::runtime::Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
            tokio::task::yield_now().await;
        }
        renewal
    }

    fn spawn(
        store: &Arc<dyn Store>,
        key: RecordKey,
        token: Token,
        lease: Duration,
        scope: &str,
    ) -> Self {
        let store = Arc::clone(store);
        let scope = scope.to_owned();
        Renewal(tokio::spawn(async move {
            renew_every_third(store.as_ref(), &key, token, lease, &scope).await;
        }))
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews the lease every third of its length until it is lost.
async fn renew_every_third<S: Store + ?Sized>(
    store: &S,
    key: &RecordKey,
    token: Token,
    lease: Duration,
    scope: &str,
) {
    let every = (lease / 3).max(Duration::from_millis(1));
    loop {
        tokio::time::sleep(every).await;
        match store.renew(key, token, lease).await {
            Ok(Fence::Held) => {}
            Ok(Fence::Lost) => {
                tracing::warn!(scope, key = %key.short(), "idem: lease lost while the body runs");
                return;
            }
            Err(err) => {
                tracing::warn!(scope, key = %key.short(), error = %err, "idem: lease renewal failed; retrying");
            }
        }
    }
}

/// Runs `body` while renewing the lease in the same task: no spawn, so the
/// body and the store may borrow.
pub(crate) async fn in_task<S: Store + ?Sized, F: Future>(
    store: &S,
    key: &RecordKey,
    token: Token,
    lease: Duration,
    scope: &str,
    body: F,
) -> F::Output {
    let mut body = pin!(body);
    let renewal = pin!(renew_every_third(store, key, token, lease, scope));
    tokio::select! {
        biased;
        out = &mut body => out,
        () = renewal => body.await,
    }
}

/// A claim whose answer never came (a timeout, a dropped connection) may
/// still have been applied: the key would then answer `InProgress` for the
/// whole lease with no holder. Releases it by its token once the store
/// answers again, in the background, with backoff, for at most the lease
/// (after which it has expired anyway). Harmless if it never landed: the
/// release is fenced by the token.
pub(crate) fn release_if_applied(
    store: &Arc<dyn Store>,
    key: RecordKey,
    token: Token,
    lease: Duration,
) {
    let store = Arc::clone(store);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let mut wait = Duration::from_millis(250);
        while started.elapsed() + wait < lease {
            tokio::time::sleep(wait).await;
            match store.release(&key, token).await {
                Ok(Fence::Held) => {
                    tracing::info!(key = %key.short(), "idem: a claim that had timed out was applied after all; released");
                    return;
                }
                Ok(Fence::Lost) => return,
                Err(_) => wait *= 2,
            }
        }
    });
}
