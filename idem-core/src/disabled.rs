//! The store behind [`Idempotency::disabled`](crate::Idempotency::disabled):
//! every claim is won and nothing is kept, so every body runs.

use std::sync::Once;
use std::time::Duration;

use crate::{Claim, ClaimOutcome, Fence, RecordKey, StepId, Store, StoreError, Token};

pub(crate) struct Disabled {
    announced: Once,
}

impl Disabled {
    pub(crate) const fn new() -> Self {
        Self {
            announced: Once::new(),
        }
    }
}

#[async_trait::async_trait]
impl Store for Disabled {
    async fn claim(&self, _: &RecordKey, _: &Claim) -> Result<ClaimOutcome, StoreError> {
        // Said once per handle, at its first call rather than when it is
        // made: a handle built before the subscriber would say it to no one.
        self.announced.call_once(|| {
            tracing::warn!(
                "idem: this handle is disabled (Idempotency::disabled): every body runs, nothing is stored, duplicates are not detected"
            )
        });
        Ok(ClaimOutcome::won(false, Vec::new()))
    }

    async fn complete(
        &self,
        _: &RecordKey,
        _: Token,
        _: &[u8],
        _: crate::store::Retention,
    ) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }

    async fn release(&self, _: &RecordKey, _: Token) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }

    async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }

    /// Steps run every time, like the bodies: nothing is kept.
    async fn save_step(
        &self,
        _: &RecordKey,
        _: Token,
        _: StepId,
        _: &[u8],
        _: Duration,
    ) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }

    fn records_steps(&self) -> bool {
        true
    }

    async fn forget(&self, _: &RecordKey) -> Result<(), StoreError> {
        Ok(())
    }
}
