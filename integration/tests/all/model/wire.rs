//! The path between the handle and the store: a store's answer can arrive
//! late, and a release is counted when it reaches the store.
//!
//! `FaultyStore::delay` waits *before* the store applies an operation, so
//! the claim is stamped when the answer is ready and holds a whole lease:
//! it cannot show a won claim that starts with most of its lease gone.
//! Here the claim is applied first and its answer then held back, as a
//! slow network or a lock wait after the stamp (issue 44 item 1) does.
//! The store itself is real; nothing is answered in its place.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token, async_trait};
use idem::{Store, StoreError};
use tokio::sync::Notify;

/// Wraps a store: [`late_next_claim`](Wire::late_next_claim) holds the
/// next claim's answer back; releases are counted and notified.
#[derive(Clone)]
pub(crate) struct Wire {
    inner: Arc<dyn Store>,
    late_nanos: Arc<AtomicU64>,
    releases: Arc<AtomicU32>,
    released: Arc<Notify>,
}

impl Wire {
    pub(crate) fn new(inner: impl Store + 'static) -> Self {
        Self {
            inner: Arc::new(inner),
            late_nanos: Arc::default(),
            releases: Arc::default(),
            released: Arc::default(),
        }
    }

    /// The next claim's answer arrives `by` after the store applied it.
    pub(crate) fn late_next_claim(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.late_nanos.store(nanos, Ordering::SeqCst);
    }

    /// Releases that reached this point, answered or not.
    pub(crate) fn releases(&self) -> u32 {
        self.releases.load(Ordering::SeqCst)
    }

    /// Waits until more than `seen` releases were attempted.
    pub(crate) async fn released_after(&self, seen: u32) {
        loop {
            let notified = self.released.notified();
            if self.releases() > seen {
                return;
            }
            notified.await;
        }
    }
}

#[async_trait]
impl Store for Wire {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let answer = self.inner.claim(key, claim).await;
        let late = self.late_nanos.swap(0, Ordering::SeqCst);
        if late > 0 {
            tokio::time::sleep(Duration::from_nanos(late)).await;
        }
        answer
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.inner.complete(key, token, record, kept).await
    }

    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.inner.complete_again(key, token, record, kept).await
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        let answer = self.inner.release(key, token).await;
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.released.notify_waiters();
        answer
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.inner.renew(key, token, lease).await
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.inner.save_step(key, token, step, value, ttl).await
    }

    fn records_steps(&self) -> bool {
        self.inner.records_steps()
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.inner.forget(key).await
    }
}
