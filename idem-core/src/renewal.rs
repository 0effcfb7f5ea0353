//! Lease renewal while a body runs, and the cleanup of a claim whose
//! answer was lost. For stores the handle owns, one task per handle renews
//! every running claim, so a body that blocks its thread keeps its lease
//! on a multi-thread runtime; for a borrowed store (a transaction), which
//! cannot be sent to another task, renewal runs in the body's own task.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use foldhash::HashMap;
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::idempotency::Inner;
use crate::key::ScopeText;
use crate::observe::Step;
use crate::{CallSite, Fence, RecordKey, Store, Token};

/// The claims of one handle whose bodies are running, renewed by one task
/// of the handle's own: a body that blocks its thread (on a multi-thread
/// runtime) keeps its lease, and a call costs an insert and a removal,
/// not a task of its own.
#[derive(Default)]
pub(crate) struct Renewer {
    claims: Mutex<Registry>,
    wake: Arc<Notify>,
    started: AtomicBool,
}

#[derive(Default)]
struct Registry {
    /// foldhash: keyed by digests and random tokens, so a seeded fast hash
    /// is as safe here as SipHash, at a fraction of its cost per call.
    running: HashMap<(RecordKey, Token), Running>,
    /// When the renewal task means to wake next; `None` before it first
    /// looked. A claim due earlier wakes it; any other waits, so a call
    /// costs no wake-up of the task and no scan of the other claims.
    wake_at: Option<Instant>,
}

/// A claim due for renewal.
struct Due {
    key: RecordKey,
    token: Token,
    lease: Duration,
    scope: ScopeText,
    site: &'static CallSite,
}

struct Running {
    lease: Duration,
    due: Instant,
    scope: ScopeText,
    site: &'static CallSite,
}

/// A registered claim, removed from the renewer when the body ends.
pub(crate) struct Registered<'r> {
    renewer: &'r Renewer,
    claim: (RecordKey, Token),
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.renewer.lock().running.remove(&self.claim);
    }
}

impl Renewer {
    /// Renews `key`'s claim every third of its lease until the returned
    /// guard is dropped; `true` when the renewal task was spawned now (see
    /// [`let_start`]).
    pub(crate) fn register(
        &self,
        handle: &Arc<Inner>,
        key: RecordKey,
        token: Token,
        lease: Duration,
        scope: ScopeText,
        site: &'static CallSite,
    ) -> (Registered<'_>, bool) {
        let due = Instant::now() + third(lease);
        let running = Running {
            lease,
            due,
            scope,
            site,
        };
        let earliest = {
            let mut claims = self.lock();
            claims.running.insert((key, token), running);
            let earliest = claims.wake_at.is_none_or(|wake_at| due < wake_at);
            if earliest {
                claims.wake_at = Some(due);
            }
            earliest
        };
        let spawned = !self.started.swap(true, Ordering::AcqRel);
        if spawned {
            tokio::spawn(renew_all(Arc::downgrade(handle)));
        } else if earliest {
            self.wake.notify_one();
        }
        let registered = Registered {
            renewer: self,
            claim: (key, token),
        };
        (registered, spawned)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.claims.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The claims due now (their next due time moved on), and when the
    /// task wakes next: when the next one falls due, or after
    /// [`IDLE_CHECK`] with none.
    fn take_due(&self, now: Instant) -> (Vec<Due>, Instant) {
        let mut claims = self.lock();
        let mut due = Vec::new();
        for (&(key, token), running) in claims.running.iter_mut() {
            if running.due <= now {
                running.due = now + third(running.lease);
                due.push(Due {
                    key,
                    token,
                    lease: running.lease,
                    scope: running.scope.clone(),
                    site: running.site,
                });
            }
        }
        let next = claims.running.values().map(|running| running.due).min();
        let wake_at = next.unwrap_or(now + IDLE_CHECK);
        claims.wake_at = Some(wake_at);
        (due, wake_at)
    }
}

/// The handle's renewal task: renews what is due, sleeps until the next
/// due time or a new claim, and ends with the handle.
async fn renew_all(handle: Weak<Inner>) {
    // A handle may outlive the runtime its renewal task runs on (a
    // `static` handle used from one `#[tokio::test]` runtime after
    // another): when that runtime drops the task, the next claim starts a
    // new one.
    let _restart = RestartOnDrop(handle.clone());
    loop {
        let Some(inner) = handle.upgrade() else {
            return;
        };
        let (due, sleep_until) = inner.renewer.take_due(Instant::now());
        for claim in due {
            let store = Arc::clone(&inner.store);
            tokio::spawn(async move {
                renew_once(store.as_ref(), &claim).await;
            });
        }
        // Not holding the handle while asleep, so that it can be dropped;
        // a claim registered meanwhile leaves a permit on `wake`.
        let wake = Arc::clone(&inner.renewer.wake);
        drop(inner);
        tokio::select! {
            () = tokio::time::sleep_until(sleep_until) => {}
            () = wake.notified() => {}
        }
    }
}

struct RestartOnDrop(Weak<Inner>);

impl Drop for RestartOnDrop {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.renewer.lock().wake_at = None;
            inner.renewer.started.store(false, Ordering::Release);
        }
    }
}

/// How long the renewal task sleeps with nothing to renew (it ends when
/// the handle is dropped, which it notices at the latest then).
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// How a claim was lost, for logs.
fn lost_how(fence: Fence) -> &'static str {
    match fence {
        Fence::Expired => "expired",
        _ => "taken over",
    }
}

/// Lets the renewal task just spawned run before the body. A task spawned
/// from a worker waits in that worker's LIFO slot, which other workers do
/// not steal from: a body that blocked the worker at once would keep it
/// from ever running. Once it has run, its timer wakes it wherever a
/// worker is free.
pub(crate) async fn let_start() {
    if Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        tokio::task::yield_now().await;
    }
}

fn third(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(1))
}

async fn renew_once<S: Store + ?Sized>(store: &S, claim: &Due) {
    let (key, scope) = (&claim.key, claim.scope.as_str());
    renew_step(store, key, claim.token, claim.lease, scope, claim.site).await;
}

/// Renews the lease every third of its length until it is lost.
async fn renew_every_third<S: Store + ?Sized>(
    store: &S,
    key: &RecordKey,
    token: Token,
    lease: Duration,
    scope: &str,
    site: &CallSite,
) {
    let every = (lease / 3).max(Duration::from_millis(1));
    loop {
        tokio::time::sleep(every).await;
        if !renew_step(store, key, token, lease, scope, site).await {
            return;
        }
    }
}

/// One renewal, timed, counted and logged; `false` once the claim is lost
/// (a failed renewal is retried at the next turn).
async fn renew_step<S: Store + ?Sized>(
    store: &S,
    key: &RecordKey,
    token: Token,
    lease: Duration,
    scope: &str,
    site: &CallSite,
) -> bool {
    let sent = Instant::now();
    let answer = store.renew(key, token, lease).await;
    site.store_step(Step::Renew, sent);
    match answer {
        Ok(Fence::Held) => {
            site.renewal();
            true
        }
        Ok(lost) => {
            tracing::warn!(scope, key = %key.short(), lost = lost_how(lost), "idem: lease lost while the body runs");
            false
        }
        Err(err) => {
            tracing::warn!(scope, key = %key.short(), error = %err, "idem: lease renewal failed; retrying");
            true
        }
    }
}

/// Runs `body` while renewing the lease in the same task: no spawn, so the
/// body and the store may borrow. The renewal is boxed: it holds a timer,
/// and a borrowed store's calls are the rare ones, so the call's future
/// does not carry it for every other call.
pub(crate) async fn in_task<S: Store + ?Sized, F: Future>(
    store: &S,
    key: &RecordKey,
    token: Token,
    lease: Duration,
    scope: &str,
    site: &CallSite,
    mut body: Pin<&mut F>,
) -> F::Output {
    let renewal = Box::pin(renew_every_third(store, key, token, lease, scope, site));
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
                Ok(Fence::Lost | Fence::Expired) => return,
                Err(_) => wait *= 2,
            }
        }
    });
}
