//! The fenced operations: complete (sent once more after a lost connection),
//! release and renew, each one script, or one native command where the
//! server has compare-and-set and this store kept the claim's value (see
//! `native.rs`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use idem_contract::store::{Fence, Retention, Token};
use redis::Script;

use super::RedisStore;
use super::conn::store_error;
use super::native::live_until;
use super::scripts::{COMPLETE, fence};
use super::value::{KEPT_AFTER_LEASE_MS, claim_px, expiry_ms, millis};

impl RedisStore {
    /// `Store::complete`, or `Store::complete_again` when `again` (always
    /// by script, which knows our own landed completion). A tombstone's
    /// marker is written by the script alone.
    pub(super) async fn complete_fenced(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        retention: Retention,
        again: bool,
    ) -> Result<Fence, StoreError> {
        let fence = match again {
            false => {
                self.complete_native_or_script(key, token, record, retention)
                    .await
            }
            true => {
                self.native.take(*key, token);
                Box::pin(self.complete_script(key, token, record, retention, true)).await
            }
        };
        if let Ok(Fence::Held) = fence {
            self.completed.saw(key);
        }
        fence
    }

    /// The completion: native where the claim's value is kept and its
    /// lease surely live, else by script.
    async fn complete_native_or_script(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        retention: Retention,
    ) -> Result<Fence, StoreError> {
        if let Some(kept) = self.native.take(*key, token)
            && kept.live()
            && self.native.set_ifeq()
            && retention.tombstone.is_none()
        {
            match self
                .complete_cas(key, &kept.value, record, retention.ttl)
                .await
            {
                Ok(Some(fence)) => return Ok(fence),
                Ok(None) => self.refused_native(),
                Err(err) => {
                    // The caller may complete again: keep the value.
                    self.native.keep(*key, token, kept);
                    return Err(err);
                }
            }
        }
        // Boxed: the script's future would more than double the size of
        // every completion's (which the `Store` trait boxes), native ones
        // included.
        Box::pin(self.complete_script(key, token, record, retention, false)).await
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
        if lease.is_zero() {
            let px = KEPT_AFTER_LEASE_MS.to_string();
            let args: [&[u8]; 2] = [&token.to_bytes(), px.as_bytes()];
            return self.fenced(&self.scripts.lapse, key, &args).await;
        }
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

    /// The completion by script, which also writes the tombstone's marker
    /// where `retention` keeps one (see `scripts::COMPLETE`).
    async fn complete_script(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        retention: Retention,
        again: bool,
    ) -> Result<Fence, StoreError> {
        let ttl = millis(retention.ttl);
        let tombstone = retention.tombstone.map(millis);
        let (mut digits, mut total) = (itoa::Buffer::new(), itoa::Buffer::new());
        let px = digits.format(ttl).as_bytes();
        let expiry = expiry_ms(ttl, self.clock.now());
        let token = token.to_bytes();
        let ttl_ms = ttl.to_be_bytes();
        let ttl_expiry = [ttl_ms, expiry.to_be_bytes()].concat();
        let marker: Vec<u8> = match tombstone {
            Some(tombstone) => [tombstone.to_be_bytes(), ttl_ms].concat(),
            None => Vec::new(),
        };
        let total = match tombstone {
            Some(tombstone) => total.format(ttl.saturating_add(tombstone)).as_bytes(),
            None => &[],
        };
        let record_key = self.redis_key(key);
        let marker_key = match tombstone {
            Some(_) => self.tombstone_key(key),
            None => Vec::new(),
        };
        let keys: [&[u8]; 2] = [&record_key, &marker_key];
        let sending: &[u8] = if again { b"1" } else { b"0" };
        let args: [&[u8]; 7] = [&token, record, px, &ttl_expiry, sending, &marker, total];
        // A call without a tombstone sends neither the marker's key nor its
        // arguments.
        let (keys, args) = match tombstone {
            Some(_) => (&keys[..], &args[..]),
            None => (&keys[..1], &args[..5]),
        };
        let Some(replicas) = &self.replicas else {
            return self.complete_once_more(keys, args).await;
        };
        let pipe = replicas.eval_then_wait(COMPLETE, keys, args);
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
    /// its answer came: the first may have landed (see `COMPLETE`). Its
    /// fifth argument says which sending it is.
    async fn complete_once_more(
        &self,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<Fence, StoreError> {
        let complete = &self.scripts.complete;
        match self.eval(complete, keys, args).await {
            Ok(answer) => Ok(fence(answer)),
            Err(err) if err.is_io_error() || err.is_connection_dropped() => {
                tracing::debug!(error = %err, "idem: Redis connection lost during a completion; sending it again");
                let mut again = args.to_vec();
                again[4] = b"1";
                let answer = self.eval(complete, keys, &again).await;
                Ok(fence(answer.map_err(store_error)?))
            }
            Err(err) => Err(store_error(err)),
        }
    }
}
