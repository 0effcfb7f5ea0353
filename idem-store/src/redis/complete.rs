//! The fenced operations: complete (sent once more after a lost connection),
//! release and renew, each one script, or one native command where the
//! server has compare-and-set and this store kept the claim's value (see
//! `native.rs`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::{Fence, Token};
use redis::Script;

use super::RedisStore;
use super::conn::store_error;
use super::native::live_until;
use super::scripts::{COMPLETE, fence};
use super::value::{claim_px, millis};

impl RedisStore {
    /// `Store::complete`.
    pub(super) async fn complete_fenced(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        if let Some(kept) = self.native.take(*key, token)
            && kept.live()
            && self.native.set_ifeq()
        {
            match self.complete_cas(key, &kept.value, record, ttl).await {
                Ok(Some(fence)) => return Ok(fence),
                Ok(None) => self.refused_native(),
                Err(err) => {
                    // The caller may complete again: keep the value.
                    self.native.keep(*key, token, kept);
                    return Err(err);
                }
            }
        }
        self.complete_script(key, token, record, ttl).await
    }

    /// `Store::release`.
    pub(super) async fn release_fenced(
        &self,
        key: &RecordKey,
        token: Token,
    ) -> Result<Fence, StoreError> {
        // A call with steps is released by script: it may leave a marker.
        if let Some(kept) = self.native.take(*key, token)
            && kept.live()
            && !kept.stepped
            && let Some(delete) = self.native.delete()
        {
            match self.release_cas(key, &kept.value, delete).await {
                Ok(Some(fence)) => return Ok(fence),
                Ok(None) => self.refused_native(),
                Err(err) => {
                    self.native.keep(*key, token, kept);
                    return Err(err);
                }
            }
        }
        let keys: [&[u8]; 2] = [&self.redis_key(key), &self.steps_key(key)];
        let release = &self.scripts.release;
        let answer = self.eval(release, &keys, &[&token.to_bytes()]).await;
        Ok(fence(answer.map_err(store_error)?))
    }

    /// `Store::renew`.
    pub(super) async fn renew_fenced(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        if self.native.set_ifeq()
            && let Some(claim) = self.native.live(*key, token)
        {
            let sent = Instant::now();
            match self.renew_cas(key, &claim, lease).await? {
                Some(Fence::Held) => {
                    self.native.renewed(*key, token, live_until(sent, lease));
                    return Ok(Fence::Held);
                }
                Some(fence) => return Ok(fence),
                None => self.refused_native(),
            }
        }
        let mut digits = itoa::Buffer::new();
        let px = digits.format(claim_px(lease)).as_bytes();
        let args: [&[u8]; 2] = [&token.to_bytes(), px];
        self.fenced(&self.scripts.renew, key, &args).await
    }

    /// The server refused a native command: scripts until the next claim
    /// has checked the server again.
    fn refused_native(&self) {
        self.native.refused();
        self.recheck.store(true, Ordering::Relaxed);
    }

    /// The completion by script.
    async fn complete_script(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let ttl = millis(ttl);
        let mut digits = itoa::Buffer::new();
        let px = digits.format(ttl).as_bytes();
        let args: [&[u8]; 4] = [&token.to_bytes(), record, px, &ttl.to_be_bytes()];
        let Some(replicas) = &self.replicas else {
            return self.complete_once_more(key, args).await;
        };
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(COMPLETE)
            .arg(1)
            .arg(self.redis_key(key));
        for arg in args {
            pipe.arg(arg);
        }
        pipe.arg("0");
        replicas.append(&mut pipe);
        let (held, acks): (i64, u32) = self.query(&pipe).await?;
        if held != 1 {
            return Ok(fence(held));
        }
        replicas.check(acks, "completion")?;
        Ok(Fence::Held)
    }

    pub(super) async fn fenced(
        &self,
        script: &Script,
        key: &RecordKey,
        args: &[&[u8]],
    ) -> Result<Fence, StoreError> {
        let answer = self.invoke(script, key, args).await.map_err(store_error)?;
        Ok(fence(answer))
    }

    /// The completion, sent once more when the connection was lost before
    /// its answer came: the first may have landed (see `COMPLETE`).
    async fn complete_once_more(
        &self,
        key: &RecordKey,
        args: [&[u8]; 4],
    ) -> Result<Fence, StoreError> {
        let [token, record, px, ttl] = args;
        let first = [token, record, px, ttl, b"0".as_slice()];
        match self.invoke(&self.scripts.complete, key, &first).await {
            Ok(answer) => Ok(fence(answer)),
            Err(err) if err.is_io_error() || err.is_connection_dropped() => {
                tracing::debug!(error = %err, "idem: Redis connection lost during a completion; sending it again");
                let again = [token, record, px, ttl, b"1".as_slice()];
                self.fenced(&self.scripts.complete, key, &again).await
            }
            Err(err) => Err(store_error(err)),
        }
    }
}
