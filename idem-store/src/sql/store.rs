//! A SQL store's steps, written once for every dialect: each step is one
//! statement sent through `send.rs`, and a fenced step that finds no claim
//! of ours asks once more whether the key is live.

use std::time::Duration;

use idem_contract::StoreError;
use idem_contract::admin::{self, Purged};
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token};

use crate::completed::Completed;

use super::dialect::{ClaimBytes, Completion, Dialect, Purge, Query, StepSave};
use super::send::{Server, Source};
use crate::answer::{Affected, Answer};

/// What a `PostgresStore` or `MySqlStore` holds behind its `Arc`.
pub(crate) struct Core<S: Dialect> {
    /// The statements of the store's table.
    pub sql: S,
    /// Where the statements go.
    pub conns: Source<S::Conn>,
    /// How many rows one purge statement deletes.
    pub purge_batch: u32,
    /// How long a statement waits for the answer.
    pub response_timeout: Duration,
    /// The keys last seen completed, whose replays read the row first.
    pub completed: Completed,
}

impl<S: Dialect> Core<S>
where
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
{
    fn server(&self) -> Server {
        Server {
            names: S::NAMES,
            response_timeout: self.response_timeout,
            lost_connection: S::lost_connection,
            rolled_back: S::rolled_back,
        }
    }

    /// Sends one statement. `build(again)` makes it; `again` is true when
    /// it is sent a second time after a lost connection or a rollback.
    pub(crate) async fn send<'q, T: Answer<S::Conn, Query<'q, S>>>(
        &self,
        build: impl Fn(bool) -> Query<'q, S>,
    ) -> Result<T, StoreError> {
        let err = |err| self.sql.store_error(err);
        self.conns.send(&self.server(), build, err).await
    }

    /// A fenced operation's answer. When it found no claim of ours, one more
    /// statement (on that rare path only) tells a takeover from an expiry.
    pub(crate) async fn fence(
        &self,
        changed: Affected,
        key: &RecordKey,
    ) -> Result<Fence, StoreError> {
        if changed.fence().is_held() {
            return Ok(Fence::Held);
        }
        let sql = &self.sql;
        let live: S::Live = self.send(|_| sql.live_query(key.as_bytes())).await?;
        Ok(if sql.is_live(&live)? {
            Fence::Lost
        } else {
            Fence::Expired
        })
    }

    pub(crate) async fn claim(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        let sql = &self.sql;
        if self.completed.names(key) {
            let found: S::Found = self.send(|_| sql.completed_query(key.as_bytes())).await?;
            match S::completed_outcome(&found)? {
                // A state update of another payload replaces the record:
                // the claim does that.
                Some(ClaimOutcome::Completed { fingerprint, .. })
                    if claim.rerun && !claim.fingerprint.matches(&fingerprint) => {}
                Some(outcome) => return Ok(outcome),
                None => self.completed.lost(key),
            }
        }
        let bytes = ClaimBytes::from(claim);
        // The claim answers Won again for our own token, so sending it
        // twice is safe.
        let answer: S::Claimed = self
            .send(|_| sql.claim_query(key.as_bytes(), &bytes, true))
            .await?;
        let outcome = S::claim_outcome(&answer)?;
        if let ClaimOutcome::Completed { .. } = outcome {
            self.completed.saw(key);
        }
        Ok(outcome)
    }

    /// `Store::complete`, or `Store::complete_again` when `again`: then
    /// every sending accepts our own landed completion.
    pub(crate) async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
        again: bool,
    ) -> Result<Fence, StoreError> {
        let sql = &self.sql;
        let token = token.to_bytes();
        let changed = self
            .send(|resent| {
                let how = if again || resent {
                    Completion::Again
                } else {
                    Completion::Held
                };
                sql.complete_query(how, key.as_bytes(), &token, record, kept)
            })
            .await?;
        let fence = self.fence(changed, key).await?;
        if fence == Fence::Held {
            self.completed.saw(key);
        }
        Ok(fence)
    }

    pub(crate) async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        let sql = &self.sql;
        let token = token.to_bytes();
        let changed = self
            .send(|_| sql.release_query(false, key.as_bytes(), &token))
            .await?;
        self.fence(changed, key).await
    }

    pub(crate) async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let sql = &self.sql;
        let token = token.to_bytes();
        let changed = self
            .send(|_| sql.renew_query(key.as_bytes(), &token, lease))
            .await?;
        self.fence(changed, key).await
    }

    pub(crate) async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let sql = &self.sql;
        let token = token.to_bytes();
        let step = step.as_bytes();
        // Sent again after a lost connection: the first save may have
        // landed, and saving the same value again changes nothing.
        let changed = self
            .send(|_| {
                sql.save_step_query(StepSave {
                    key: key.as_bytes(),
                    token: &token,
                    step: &step[..],
                    value,
                    ttl,
                })
            })
            .await?;
        self.fence(changed, key).await
    }

    pub(crate) async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        let sql = &self.sql;
        let _: Affected = self.send(|_| sql.forget_query(key.as_bytes())).await?;
        Ok(())
    }

    /// Deletes expired rows in batches of at most `options.batch`, pausing
    /// `options.pause` after each full one, counting records, tombstones
    /// and steps apart.
    pub(crate) async fn purge(&self, options: &admin::Purge) -> Result<Purged, StoreError> {
        let batch = i64::from(options.batch.max(1));
        let mut purged = Purged::default();
        for (which, count) in [
            (Purge::Records, &mut purged.records),
            (Purge::Tombstones, &mut purged.tombstones),
            (Purge::Steps, &mut purged.steps),
        ] {
            loop {
                let Affected(n) = self.send(|_| self.sql.purge_query(which, batch)).await?;
                *count += n;
                if n < batch as u64 {
                    break;
                }
                tokio::time::sleep(options.pause).await;
            }
        }
        Ok(purged)
    }

    /// The purge `purge()` runs: the builder's batch, the default pause.
    pub(crate) fn default_purge(&self) -> admin::Purge {
        admin::Purge::default().batch(self.purge_batch)
    }

    /// The store's `Debug`: its type, table and connections.
    pub(crate) fn debug(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        store: &str,
        table: &str,
    ) -> std::fmt::Result {
        f.debug_struct(store)
            .field("table", &table)
            .field("connections", &self.conns.kind())
            .finish()
    }
}

/// `impl Store for $store`, each step sent by the store's `Core` (its
/// `inner`): one place for the steps, whatever the database.
macro_rules! store_on_core {
    ($store:ty) => {
        #[idem_contract::store::async_trait]
        impl idem_contract::Store for $store {
            async fn claim(
                &self,
                key: &idem_contract::key::RecordKey,
                claim: &idem_contract::store::Claim,
            ) -> Result<idem_contract::store::ClaimOutcome, idem_contract::StoreError> {
                self.inner.claim(key, claim).await
            }

            async fn complete(
                &self,
                key: &idem_contract::key::RecordKey,
                token: idem_contract::store::Token,
                record: &[u8],
                kept: idem_contract::store::Retention,
            ) -> Result<idem_contract::store::Fence, idem_contract::StoreError> {
                self.inner.complete(key, token, record, kept, false).await
            }

            async fn complete_again(
                &self,
                key: &idem_contract::key::RecordKey,
                token: idem_contract::store::Token,
                record: &[u8],
                kept: idem_contract::store::Retention,
            ) -> Result<idem_contract::store::Fence, idem_contract::StoreError> {
                self.inner.complete(key, token, record, kept, true).await
            }

            async fn release(
                &self,
                key: &idem_contract::key::RecordKey,
                token: idem_contract::store::Token,
            ) -> Result<idem_contract::store::Fence, idem_contract::StoreError> {
                self.inner.release(key, token).await
            }

            async fn renew(
                &self,
                key: &idem_contract::key::RecordKey,
                token: idem_contract::store::Token,
                lease: std::time::Duration,
            ) -> Result<idem_contract::store::Fence, idem_contract::StoreError> {
                self.inner.renew(key, token, lease).await
            }

            async fn save_step(
                &self,
                key: &idem_contract::key::RecordKey,
                token: idem_contract::store::Token,
                step: idem_contract::store::StepId,
                value: &[u8],
                ttl: std::time::Duration,
            ) -> Result<idem_contract::store::Fence, idem_contract::StoreError> {
                self.inner.save_step(key, token, step, value, ttl).await
            }

            fn records_steps(&self) -> bool {
                true
            }

            async fn forget(
                &self,
                key: &idem_contract::key::RecordKey,
            ) -> Result<(), idem_contract::StoreError> {
                self.inner.forget(key).await
            }
        }
    };
}
pub(crate) use store_on_core;
