//! [`CrashPoints`]: a call crashed at each of its await points, recovered,
//! and checked.
//!
//! Each attempt is a "process": a current-thread runtime of its own, on
//! tokio's paused clock, over a handle of its own to the run's
//! `MemoryStore`. A crash stops polling, marks the process's handle dead
//! (its drop-time release and renewals never reach the store, as after a
//! kill) and drops the runtime with every task on it, detached bodies
//! included. The recovering process's clock starts past the crashed
//! claim's lease.

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use idem_core::testing::polls::{Budget, counted};
use idem_store::MemoryStore;

use crate::key::RecordKey;
use crate::store::{Claim, ClaimOutcome, Fence, StepId, Token, async_trait};
use crate::{Idempotency, Store, StoreError};

/// Crashes a call at each of its await points and checks an invariant
/// after recovery.
///
/// It runs the call once to count its await points (polls, those of a
/// `detach`ed body included), then for each point `k`: [`reset`](Self::reset),
/// run the call and crash it after `k` polls (the claim stays held), let
/// the lease lapse, run the call again to the end, and check the
/// [`invariant`](Self::invariant). The call gets a fresh `MemoryStore`
/// handle per crash point; it must run on that handle (`store = idem` in
/// the attribute, or `idem.call(…)`).
///
/// The kit's store answers at once, so the crash points are the awaits of
/// your code (its I/O). A body whose two effects are not each in an
/// [`idem::step`](crate::step) repeats the first when the crash falls
/// between them; with steps it resumes after the last finished one.
///
/// See [the module](crate::testing) for an example.
pub struct CrashPoints<F> {
    call: Arc<F>,
    reset: Box<dyn Fn() + Send>,
    invariant: Box<dyn Fn() -> bool + Send>,
}

impl<F> fmt::Debug for CrashPoints<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashPoints").finish_non_exhaustive()
    }
}

impl<F, Fut> CrashPoints<F>
where
    F: Fn(Idempotency) -> Fut + Send + Sync + 'static,
    Fut: Future + 'static,
{
    /// The call under test, as a function of the handle it runs on.
    pub fn new(call: F) -> Self {
        Self {
            call: Arc::new(call),
            reset: Box::new(|| {}),
            invariant: Box::new(|| true),
        }
    }

    /// Clears your effects before each run (counting included).
    pub fn reset(mut self, reset: impl Fn() + Send + 'static) -> Self {
        self.reset = Box::new(reset);
        self
    }

    /// What must hold after each recovery (and after the run without a
    /// crash): e.g. one debit and one credit.
    pub fn invariant(mut self, invariant: impl Fn() -> bool + Send + 'static) -> Self {
        self.invariant = Box::new(invariant);
        self
    }

    /// Runs every crash point and reports the ones whose invariant failed.
    ///
    /// # Panics
    ///
    /// When the call, `reset` or `invariant` panics: the panic is resumed
    /// here.
    pub async fn run(self) -> CrashReport {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        // A thread of its own: each attempt builds and drops a runtime,
        // which cannot be done inside the caller's.
        std::thread::spawn(move || {
            let report = catch_unwind(AssertUnwindSafe(|| self.run_all()));
            let _ = sender.send(report);
        });
        match receiver.await {
            Ok(Ok(report)) => report,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => {
                panic!("idem::testing::CrashPoints: the crash-test thread ended without a report")
            }
        }
    }

    fn run_all(&self) -> CrashReport {
        (self.reset)();
        let store = Arc::new(MemoryStore::new());
        let counted = self.attempt(&store, None, Duration::ZERO);
        let mut report = CrashReport {
            points: counted.polls.saturating_sub(1),
            failed: Vec::new(),
            unrecovered: !(self.invariant)(),
        };
        for point in 1..counted.polls {
            (self.reset)();
            let store = Arc::new(MemoryStore::new());
            let crashed = self.attempt(&store, Some(point), Duration::ZERO);
            if crashed.crashed {
                let lapse = crashed.elapsed + crashed.lease + Duration::from_millis(1);
                self.attempt(&store, None, lapse);
            }
            if !(self.invariant)() {
                report.failed.push(point);
            }
        }
        report
    }

    /// One process: the call, on a runtime and a handle of its own, with
    /// `limit` polls (`None`: to the end), its clock first moved on by
    /// `lapse`.
    fn attempt(&self, store: &Arc<MemoryStore>, limit: Option<usize>, lapse: Duration) -> Attempt {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("idem::testing::CrashPoints: a current-thread runtime builds");
        let process = Process::new(Arc::clone(store));
        let idem = Idempotency::new(process.clone());
        let (budget, _installed) = Budget::install(limit);
        let (call, driven) = (Arc::clone(&self.call), Rc::clone(&budget));
        let (crashed, elapsed) = runtime.block_on(async move {
            tokio::time::advance(lapse).await;
            let started = tokio::time::Instant::now();
            let mut run = std::pin::pin!(counted(call(idem)));
            let crashed = std::future::poll_fn(|cx| {
                driven.set_driver(cx.waker());
                if driven.crashed() {
                    return Poll::Ready(true);
                }
                match run.as_mut().poll(cx) {
                    Poll::Ready(_) => Poll::Ready(false),
                    Poll::Pending if driven.crashed() => Poll::Ready(true),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            (crashed, started.elapsed())
        });
        if crashed {
            // Before the runtime drops the call's tasks: their releases
            // must not reach the store, as after a kill.
            process.kill();
        }
        drop(runtime);
        Attempt {
            polls: budget.polls(),
            crashed,
            elapsed,
            lease: process.lease(),
        }
    }
}

/// What one attempt did.
struct Attempt {
    polls: usize,
    crashed: bool,
    /// On the attempt's clock, from its start to its end or crash.
    elapsed: Duration,
    /// The longest lease it claimed or renewed.
    lease: Duration,
}

/// The report of [`CrashPoints::run`]: which crash points broke the
/// invariant. `Display` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashReport {
    points: usize,
    failed: Vec<usize>,
    unrecovered: bool,
}

impl CrashReport {
    /// Whether the invariant held after every recovery, and after the run
    /// without a crash.
    pub fn passed(&self) -> bool {
        self.failed.is_empty() && !self.unrecovered
    }

    /// How many crash points the call has: its polls but the last (a
    /// crash after the last is no crash).
    pub fn points(&self) -> usize {
        self.points
    }

    /// The crash points (1-based: crashed after that many polls) whose
    /// invariant failed after recovery.
    pub fn failed(&self) -> &[usize] {
        &self.failed
    }
}

impl fmt::Display for CrashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.unrecovered {
            writeln!(f, "the invariant failed after a run without a crash")?;
        }
        if self.failed.is_empty() {
            return write!(f, "the invariant held at all {} crash points", self.points);
        }
        let points: Vec<String> = self.failed.iter().map(usize::to_string).collect();
        write!(
            f,
            "the invariant failed after a crash at point {} of {} (crashed after that many polls, then recovered)",
            points.join(", "),
            self.points
        )
    }
}

/// One process's handle to the shared store: dead after its crash, and
/// keeping the longest lease it asked for.
#[derive(Clone)]
struct Process {
    store: Arc<MemoryStore>,
    alive: Arc<AtomicBool>,
    lease: Arc<Mutex<Duration>>,
}

impl Process {
    fn new(store: Arc<MemoryStore>) -> Self {
        Self {
            store,
            alive: Arc::new(AtomicBool::new(true)),
            lease: Arc::default(),
        }
    }

    fn kill(&self) {
        self.alive.store(false, Ordering::SeqCst);
    }

    fn lease(&self) -> Duration {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check(&self, lease: Option<Duration>) -> Result<(), StoreError> {
        if !self.alive.load(Ordering::SeqCst) {
            return Err(StoreError::new(
                "crashed",
                std::io::Error::other("this process crashed"),
            ));
        }
        if let Some(lease) = lease {
            let mut longest = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
            *longest = (*longest).max(lease);
        }
        Ok(())
    }
}

#[async_trait]
impl Store for Process {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.check(Some(claim.lease))?;
        self.store.claim(key, claim).await
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: idem_core::store::Retention,
    ) -> Result<Fence, StoreError> {
        self.check(None)?;
        self.store.complete(key, token, record, kept).await
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.check(None)?;
        self.store.release(key, token).await
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.check(Some(lease))?;
        self.store.renew(key, token, lease).await
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.check(None)?;
        self.store.save_step(key, token, step, value, ttl).await
    }

    fn records_steps(&self) -> bool {
        self.store.records_steps()
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.check(None)?;
        self.store.forget(key).await
    }
}
