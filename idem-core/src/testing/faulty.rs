//! [`FaultyStore`]: any store, with failures, lost answers and delays
//! injected per operation.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::store::{Claim, ClaimOutcome, Fence, StepId, Token};
use crate::{RecordKey, Store, StoreError};

/// A store operation a [`FaultyStore`] can fail, lose the answer of, or
/// delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// [`Store::claim`]: the call's first round trip.
    Claim,
    /// [`Store::complete`]: storing the result (and
    /// [`Store::complete_again`], its sending again after a failure).
    Complete,
    /// [`Store::release`]: giving the key up after an error or a drop.
    Release,
    /// [`Store::renew`]: extending a running call's lease.
    Renew,
    /// [`Store::save_step`]: storing an [`idem::step`](crate::step)'s value.
    SaveStep,
}

const OPS: usize = 5;

impl Op {
    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Default)]
struct Faults {
    fail: [u32; OPS],
    lose: [u32; OPS],
    delay: [Duration; OPS],
}

/// Wraps any [`Store`] and injects faults per operation: the next `n`
/// operations fail before reaching the store
/// ([`fail_next`](Self::fail_next)), or reach it and then lose their
/// answer ([`lose_answer_next`](Self::lose_answer_next)), or each
/// operation waits first ([`delay`](Self::delay)).
///
/// Clones share their faults, so a test can arm one after handing the
/// store to a handle. An injected fault is a [`StoreError`] of backend
/// `"faulty"`, which a call reports as [`idem::Error::Store`](crate::Error::Store).
///
/// ```
/// use idem::testing::{FaultyStore, Op};
/// use idem::{Idempotency, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let faulty = FaultyStore::new(MemoryStore::new());
/// let idem = Idempotency::new(faulty.clone());
///
/// faulty.fail_next(Op::Claim, 1);
/// let out: Result<u32, idem::Error> = idem
///     .call("payments", "order-1")
///     .run(|| async { unreachable!("the claim failed: the body must not run") })
///     .await;
/// assert!(matches!(out, Err(idem::Error::Store(_))));
///
/// // The fault is spent: the retry runs.
/// let out: Result<u32, idem::Error> = idem.call("payments", "order-1").run(|| async { Ok(7) }).await;
/// assert_eq!(out.unwrap(), 7);
/// # }
/// ```
#[derive(Clone)]
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    faults: Arc<Mutex<Faults>>,
}

impl FaultyStore {
    /// Wraps `inner`; no fault is armed.
    pub fn new(inner: impl Store + 'static) -> Self {
        Self {
            inner: Arc::new(inner),
            faults: Arc::default(),
        }
    }

    /// The next `n` operations `op` fail without reaching the store:
    /// nothing is applied.
    pub fn fail_next(&self, op: Op, n: u32) -> &Self {
        self.faults().fail[op.index()] = n;
        self
    }

    /// The next `n` operations `op` are applied by the store, and then
    /// their answer is lost: the caller sees a store error, as after a
    /// connection that dropped after the server committed.
    pub fn lose_answer_next(&self, op: Op, n: u32) -> &Self {
        self.faults().lose[op.index()] = n;
        self
    }

    /// Every operation `op` waits `by` first (on tokio's clock, so a paused
    /// test clock skips it); `Duration::ZERO` removes the delay.
    pub fn delay(&self, op: Op, by: Duration) -> &Self {
        self.faults().delay[op.index()] = by;
        self
    }

    fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Before `op` reaches the store: its delay, then an armed failure.
    async fn before(&self, op: Op) -> Result<(), StoreError> {
        let delay = self.faults().delay[op.index()];
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if take(&mut self.faults().fail[op.index()]) {
            return Err(injected(op, "failed before reaching the store"));
        }
        Ok(())
    }

    /// After `op` was applied: an armed lost answer replaces its result.
    fn after<T>(&self, op: Op, answer: Result<T, StoreError>) -> Result<T, StoreError> {
        if answer.is_ok() && take(&mut self.faults().lose[op.index()]) {
            return Err(injected(op, "applied, then its answer was lost"));
        }
        answer
    }
}

/// Spends one of `count`'s faults, if any is left.
fn take(count: &mut u32) -> bool {
    let armed = *count > 0;
    *count = count.saturating_sub(1);
    armed
}

fn injected(op: Op, what: &str) -> StoreError {
    StoreError::new(
        "faulty",
        std::io::Error::other(format!("injected fault: {op:?} {what}")),
    )
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Store for FaultyStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.before(Op::Claim).await?;
        let answer = self.inner.claim(key, claim).await;
        self.after(Op::Claim, answer)
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: crate::store::Retention,
    ) -> Result<Fence, StoreError> {
        self.before(Op::Complete).await?;
        let answer = self.inner.complete(key, token, record, kept).await;
        self.after(Op::Complete, answer)
    }

    /// Counted as [`Op::Complete`]: a completion sent again meets the
    /// same faults.
    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: crate::store::Retention,
    ) -> Result<Fence, StoreError> {
        self.before(Op::Complete).await?;
        let answer = self.inner.complete_again(key, token, record, kept).await;
        self.after(Op::Complete, answer)
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.before(Op::Release).await?;
        let answer = self.inner.release(key, token).await;
        self.after(Op::Release, answer)
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.before(Op::Renew).await?;
        let answer = self.inner.renew(key, token, lease).await;
        self.after(Op::Renew, answer)
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.before(Op::SaveStep).await?;
        let answer = self.inner.save_step(key, token, step, value, ttl).await;
        self.after(Op::SaveStep, answer)
    }

    fn records_steps(&self) -> bool {
        self.inner.records_steps()
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.inner.forget(key).await
    }
}
