//! Lease renewal while a body runs, and the cleanup of a claim whose
//! answer was lost. For stores the handle owns, one task per handle and
//! runtime renews every claim made on that runtime, so a body that blocks
//! its thread keeps its lease on a multi-thread runtime, and a handle used
//! from several runtimes (one after another, as `#[tokio::test]`s do, or
//! side by side) renews on each; for a borrowed store (a transaction),
//! which cannot be sent to another task, renewal runs in the body's own
//! task.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use foldhash::HashMap;
use tokio::runtime::{self, Handle, RuntimeFlavor};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::key::ScopeText;
use crate::observe::Op;
use crate::{CallSite, Fence, RecordKey, Store, Token};

mod lapse;

pub(crate) use lapse::lapse_if_applied;

/// The claims of one handle whose bodies are running, each renewed by the
/// handle's renewal task on the runtime the call runs on: a body that
/// blocks its thread (on a multi-thread runtime) keeps its lease, and a
/// call costs a lookup, an insert and a removal, not a task of its own.
///
/// A renewal task never dies unnoticed: it is known by the runtime it was
/// spawned on and by a number of its own; when its runtime drops it
/// (shut down, even before it ever ran) it says so, and a task that
/// overslept its wake-up by [`STALLED`] is presumed dead. Either way the
/// next claim on that runtime starts another, which renews the claims
/// already waiting there.
///
/// It holds the handle's store itself, so that its tasks need nothing of
/// the handle: they hold it weakly and end when the handle (the last
/// owner of the renewer) is dropped.
pub(crate) struct Renewer {
    store: Arc<dyn Store>,
    registry: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    /// One entry per runtime with running claims or a renewal task: a
    /// handful, so a vector searched in order.
    runtimes: Vec<OnRuntime>,
    /// The number of the last renewal task started.
    tasks: u64,
}

/// One runtime's renewal: its task and the claims it renews.
struct OnRuntime {
    runtime: runtime::Id,
    /// The renewal task serving these claims, by number; `None` once it
    /// was dropped, so that the next claim here starts another. A task
    /// replaced by a newer one finds its number gone and ends.
    task: Option<u64>,
    /// foldhash: keyed by digests and random tokens, so a seeded fast hash
    /// is as safe here as SipHash, at a fraction of its cost per call.
    running: HashMap<(RecordKey, Token), Renewing>,
    /// When the task means to wake next. A claim due earlier wakes it;
    /// any other waits, so a call costs no wake-up of the task and no
    /// scan of the other claims.
    wake_at: Instant,
    /// `wake_at` and [`STALLED`]: past it, the task is presumed dead.
    overdue: Instant,
    wake: Arc<Notify>,
}

/// A claim to renew while its body runs, as the call registers it.
pub(crate) struct Renewal {
    pub(crate) key: RecordKey,
    pub(crate) token: Token,
    pub(crate) lease: Duration,
    pub(crate) scope: ScopeText,
    pub(crate) site: &'static CallSite,
    /// The call's span: a failed renewal is reported in it, as it happens.
    pub(crate) span: tracing::Span,
}

/// A registered claim, keyed by its key and token (kept small: a call
/// moves it into the map and out again).
struct Renewing {
    due: Instant,
    lease: Duration,
    scope: ScopeText,
    site: &'static CallSite,
    span: tracing::Span,
}

/// A registered claim, removed from the renewer when the body ends.
pub(crate) struct Registered<'r> {
    renewer: &'r Renewer,
    runtime: runtime::Id,
    claim: (RecordKey, Token),
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.renewer.forget(self.runtime, &self.claim);
    }
}
impl Renewer {
    /// A renewer of claims on `store`.
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            registry: Mutex::default(),
        }
    }

    /// Renews the claim every third of its lease, from this runtime's
    /// renewal task, until the returned guard is dropped. Starts that task
    /// when this runtime has none alive. `true` when the task was spawned
    /// or woken now on a multi-thread runtime: the call must then let it
    /// run (see [`let_start`]).
    pub(crate) fn register(self: &Arc<Self>, renewal: Renewal) -> (Registered<'_>, bool) {
        let runtime = Handle::current();
        let id = runtime.id();
        let Renewal {
            key,
            token,
            lease,
            scope,
            site,
            span,
        } = renewal;
        let claim = (key, token);
        let now = Instant::now();
        let due = now + third(lease);
        let (start, woken) = {
            let mut registry = self.lock();
            let Registry { runtimes, tasks } = &mut *registry;
            let on = match runtimes.iter().position(|on| on.runtime == id) {
                Some(at) => &mut runtimes[at],
                None => {
                    runtimes.push(OnRuntime::new(id, due));
                    runtimes.last_mut().expect("just pushed")
                }
            };
            let running = Renewing {
                due,
                lease,
                scope,
                site,
                span,
            };
            on.running.insert(claim, running);
            if on.task.is_some() && now <= on.overdue {
                let earliest = due < on.wake_at;
                if earliest {
                    on.wake_at = due;
                    on.wake.notify_one();
                }
                (None, earliest)
            } else {
                *tasks += 1;
                (Some(on.restart(*tasks, due)), false)
            }
        };
        // Spawned with the lock released: a runtime shutting down drops
        // the task at once, and its drop takes the lock.
        if let Some(number) = start {
            let task = Task {
                renewer: Arc::downgrade(self),
                runtime: id,
                number,
            };
            drop(runtime.spawn(renew_all(task)));
        }
        let multi = runtime.runtime_flavor() == RuntimeFlavor::MultiThread;
        let registered = Registered {
            renewer: self,
            runtime: id,
            claim,
        };
        (registered, multi && (start.is_some() || woken))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops renewing a claim (its body ended, or its lease is lost).
    fn forget(&self, runtime: runtime::Id, claim: &(RecordKey, Token)) {
        let mut registry = self.lock();
        let runtimes = &mut registry.runtimes;
        let Some(at) = runtimes.iter().position(|on| on.runtime == runtime) else {
            return;
        };
        runtimes[at].running.remove(claim);
        if runtimes[at].task.is_none() && runtimes[at].running.is_empty() {
            runtimes.swap_remove(at);
        }
    }

    /// Task `task` was dropped: unless a newer one replaced it, the next
    /// claim on its runtime starts another.
    fn stopped(&self, task: &Task) {
        let mut registry = self.lock();
        let runtimes = &mut registry.runtimes;
        let Some(at) = runtimes.iter().position(|on| task.serves(on)) else {
            return;
        };
        runtimes[at].task = None;
        if runtimes[at].running.is_empty() {
            runtimes.swap_remove(at);
        }
    }

    /// The claims of `task`'s runtime due now (their next due time moved
    /// on), when the task wakes next (when the next one falls due, or
    /// after [`IDLE_CHECK`] with none), and what wakes it sooner; `None`
    /// when a newer task replaced it.
    fn take_due(&self, task: &Task, now: Instant) -> Option<(Vec<Due>, Instant, Arc<Notify>)> {
        let mut registry = self.lock();
        let on = registry.runtimes.iter_mut().find(|on| task.serves(on))?;
        let mut due = Vec::new();
        for (&(key, token), running) in on.running.iter_mut() {
            if running.due <= now {
                running.due = now + third(running.lease);
                let renewal = Renewal {
                    key,
                    token,
                    lease: running.lease,
                    scope: running.scope.clone(),
                    site: running.site,
                    span: running.span.clone(),
                };
                due.push(Due {
                    runtime: task.runtime,
                    renewal,
                });
            }
        }
        let next = on.running.values().map(|running| running.due).min();
        on.wake_at = next.unwrap_or(now + IDLE_CHECK);
        on.overdue = on.wake_at + STALLED;
        Some((due, on.wake_at, Arc::clone(&on.wake)))
    }
}

impl OnRuntime {
    fn new(runtime: runtime::Id, due: Instant) -> Self {
        OnRuntime {
            runtime,
            task: None,
            running: HashMap::default(),
            wake_at: due,
            overdue: due + STALLED,
            wake: Arc::default(),
        }
    }

    /// Hands the claims to task `number`, with a wake-up of its own (a
    /// task it replaces might otherwise take the new one's wake-ups).
    fn restart(&mut self, number: u64, due: Instant) -> u64 {
        self.task = Some(number);
        self.wake_at = due;
        self.overdue = due + STALLED;
        self.wake = Arc::default();
        number
    }
}

/// A renewal task, as the registry knows it. Dropped with the task's
/// future, even one its runtime never polled, which is what tells the
/// registry that this runtime's claims need another task.
struct Task {
    renewer: Weak<Renewer>,
    runtime: runtime::Id,
    number: u64,
}

impl Task {
    fn serves(&self, on: &OnRuntime) -> bool {
        on.runtime == self.runtime && on.task == Some(self.number)
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.upgrade() {
            renewer.stopped(self);
        }
    }
}

/// A claim due for renewal.
struct Due {
    runtime: runtime::Id,
    renewal: Renewal,
}

/// A runtime's renewal task: renews what is due, sleeps until the next
/// due time or a new claim, and ends with the handle, with its runtime,
/// or when a newer task replaced it.
async fn renew_all(task: Task) {
    loop {
        let Some(renewer) = task.renewer.upgrade() else {
            return;
        };
        let Some((due, sleep_until, wake)) = renewer.take_due(&task, Instant::now()) else {
            return;
        };
        for claim in due {
            let renewer = Arc::clone(&renewer);
            tokio::spawn(async move {
                let renewal = &claim.renewal;
                if !renew_once(renewer.store.as_ref(), renewal).await {
                    // Lost for good: renewing it again would only repeat
                    // the warning.
                    let claim_id = (renewal.key, renewal.token);
                    renewer.forget(claim.runtime, &claim_id);
                }
            });
        }
        // Not holding the renewer while asleep, so that the handle can be
        // dropped; a claim registered meanwhile leaves a permit on `wake`.
        drop(renewer);
        tokio::select! {
            () = tokio::time::sleep_until(sleep_until) => {}
            () = wake.notified() => {}
        }
    }
}

/// How long the renewal task sleeps with nothing to renew (it ends when
/// the handle is dropped, which it notices at the latest then).
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// How late past its wake-up a renewal task may be before the next claim
/// on its runtime presumes it dead and starts another (a task dropped by
/// its runtime says so at once; this covers one that is never dropped
/// nor run). A busy runtime that merely delayed it costs one more task,
/// and the older one ends at its next wake-up.
const STALLED: Duration = Duration::from_secs(1);

/// How a claim was lost, for logs.
fn lost_how(fence: Fence) -> &'static str {
    match fence {
        Fence::Expired => "expired",
        _ => "taken over",
    }
}

/// Lets the renewal task just spawned or woken run before the body. A
/// task spawned or woken from a worker waits in that worker's LIFO slot,
/// which other workers do not steal from: a body that blocked the worker
/// at once would keep it from running for as long as it blocks. Once it
/// has run and gone back to sleep, its timer wakes it wherever a worker
/// is free.
pub(crate) async fn let_start() {
    tokio::task::yield_now().await;
}

pub(crate) fn third(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(1))
}

/// Renews the lease every third of its length until it is lost.
async fn renew_every_third<S: Store + ?Sized>(store: &S, renewal: &Renewal) {
    loop {
        tokio::time::sleep(third(renewal.lease)).await;
        if !renew_once(store, renewal).await {
            return;
        }
    }
}

/// One renewal, timed, counted and logged in the call's span; `false` once
/// the claim is lost (a failed renewal is retried at the next turn).
async fn renew_once<S: Store + ?Sized>(store: &S, renewal: &Renewal) -> bool {
    let Renewal {
        key,
        token,
        lease,
        site,
        ref span,
        ref scope,
    } = *renewal;
    let scope = scope.as_str();
    let sent = Instant::now();
    let answer = store.renew(&key, token, lease).await;
    site.store_op(Op::Renew, sent);
    match answer {
        Ok(Fence::Held) => {
            site.renewal();
            true
        }
        Ok(lost) => {
            site.renewal_failed();
            tracing::warn!(parent: span, scope, key = %key.short(), lost = lost_how(lost), "idem: lease lost while the body runs; its result will not be stored");
            false
        }
        Err(err) => {
            site.renewal_failed();
            tracing::warn!(parent: span, scope, key = %key.short(), error = %err, "idem: lease renewal failed; retrying (past the lease, a duplicate may take the key over)");
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
    renewal: Renewal,
    mut body: Pin<&mut F>,
) -> F::Output {
    let renewal = Box::pin(async move { renew_every_third(store, &renewal).await });
    tokio::select! {
        biased;
        out = &mut body => out,
        () = renewal => body.await,
    }
}
