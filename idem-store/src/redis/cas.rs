//! The fenced operations with native compare-and-set (see `native.rs`): each
//! one command, or a pipeline in one round trip, comparing the claim's
//! whole value as the scripts compare its token. Each answers `None`
//! when the server did not understand the command (an older server after a
//! failover): nothing changed, and the caller runs the script instead.

use std::time::Duration;

use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use idem_contract::store::Fence;

use super::RedisStore;
use super::conn::{command, store_error};
use super::native::{Delete, fence_of, not_understood};
use super::value::{claim_px, completed_value, millis};

impl RedisStore {
    /// `SET key completed IFEQ claim PX ttl GET`, sent once more after a
    /// lost connection (the first may have landed: then the value found
    /// is our completed one). With replicas awaited, the `WAIT` follows in
    /// the same pipeline.
    pub(super) async fn complete_cas(
        &self,
        key: &RecordKey,
        claim: &[u8],
        record: &[u8],
        ttl: Duration,
    ) -> Result<Option<Fence>, StoreError> {
        let ttl = millis(ttl);
        let value = completed_value(&claim[17..49], ttl, self.clock.now(), record);
        let mut digits = itoa::Buffer::new();
        let px = digits.format(ttl).as_bytes();
        let redis_key = self.redis_key(key);
        let parts: [&[u8]; 8] = [
            b"SET", &redis_key, &value, b"IFEQ", claim, b"PX", px, b"GET",
        ];
        let set = command(parts);
        // The rare paths are boxed, so that every completion's future (which
        // the `Store` trait boxes) holds only the one command's.
        if let Some(replicas) = &self.replicas {
            return Box::pin(self.complete_cas_awaited(set, claim, replicas)).await;
        }
        let found = match self.send_cmd::<Option<Vec<u8>>>(&set).await {
            Err(err) if err.is_io_error() || err.is_connection_dropped() => {
                tracing::debug!(error = %err, "idem: connection lost during a completion; sending it again");
                let again = Box::pin(self.send_cmd::<Option<Vec<u8>>>(&set)).await;
                return Ok(
                    understood(again)?.map(|found| fence_of(found.as_deref(), claim, Some(&value)))
                );
            }
            answer => understood(answer)?,
        };
        Ok(found.map(|found| fence_of(found.as_deref(), claim, None)))
    }

    /// The native completion `set`, then the `WAIT` for awaited replicas in
    /// the same pipeline.
    async fn complete_cas_awaited(
        &self,
        set: redis::Cmd,
        claim: &[u8],
        replicas: &super::replicas::Replicas,
    ) -> Result<Option<Fence>, StoreError> {
        let mut pipe = redis::Pipeline::with_capacity(2);
        pipe.add_command(set);
        replicas.append(&mut pipe);
        let answer = self.query_raw::<(Option<Vec<u8>>, u32)>(&pipe).await;
        let Some((found, acks)) = understood(answer)? else {
            return Ok(None);
        };
        let fence = fence_of(found.as_deref(), claim, None);
        if fence == Fence::Held {
            replicas.check(acks, "completion")?;
        }
        Ok(Some(fence))
    }

    /// `SET key claim IFEQ claim PX lease GET`: the same value, a new
    /// expiry (the lease and the time the key outlives it), only while the
    /// claim is ours.
    pub(super) async fn renew_cas(
        &self,
        key: &RecordKey,
        claim: &[u8],
        lease: Duration,
    ) -> Result<Option<Fence>, StoreError> {
        let mut digits = itoa::Buffer::new();
        let px = digits.format(claim_px(lease)).as_bytes();
        let redis_key = self.redis_key(key);
        let parts: [&[u8]; 8] = [b"SET", &redis_key, claim, b"IFEQ", claim, b"PX", px, b"GET"];
        let found = understood(self.send_cmd::<Option<Vec<u8>>>(&command(parts)).await)?;
        Ok(found.map(|found| fence_of(found.as_deref(), claim, None)))
    }

    /// `DELIFEQ key claim` (or `DELEX key IFEQ claim`), then `EXISTS key`
    /// in the same pipeline: the delete answers 0 both when the key is gone
    /// and when another value is there, and the `EXISTS` tells them apart
    /// (`Expired` only when nobody holds the key after our delete failed).
    pub(super) async fn release_cas(
        &self,
        key: &RecordKey,
        claim: &[u8],
        delete: Delete,
    ) -> Result<Option<Fence>, StoreError> {
        let redis_key = self.redis_key(key);
        let mut pipe = redis::Pipeline::with_capacity(2);
        match delete {
            Delete::IfEq => pipe.add_command(command([b"DELIFEQ".as_slice(), &redis_key, claim])),
            Delete::Delex => {
                pipe.add_command(command([b"DELEX".as_slice(), &redis_key, b"IFEQ", claim]))
            }
        };
        pipe.add_command(command([b"EXISTS".as_slice(), &redis_key]));
        let answer = understood(self.query_raw::<(i64, i64)>(&pipe).await)?;
        Ok(answer.map(|(deleted, exists)| match (deleted, exists) {
            (1, _) => Fence::Held,
            (_, 0) => Fence::Expired,
            _ => Fence::Lost,
        }))
    }
}

/// An answer, or `None` when the server did not understand the command.
fn understood<T>(answer: redis::RedisResult<T>) -> Result<Option<T>, StoreError> {
    match answer {
        Ok(answer) => Ok(Some(answer)),
        Err(err) if not_understood(&err) => {
            tracing::debug!(error = %err, "idem: the server refused a native compare-and-set; using scripts");
            Ok(None)
        }
        Err(err) => Err(store_error(err)),
    }
}
