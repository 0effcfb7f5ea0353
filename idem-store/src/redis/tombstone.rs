//! Tombstones: a small marker key next to the record's, `T` + fingerprint
//! (32 bytes) + the tombstone's length (8 bytes, milliseconds,
//! big-endian), under `PX` = TTL + tombstone, written by the completion
//! of a call that asks for one. Its record then expires as any other; the
//! marker outlives it, so a claim that finds no record but the marker
//! answers `ClaimOutcome::Expired` (how long ago: the tombstone's length
//! less the marker's `PTTL`, by Redis's clock). The marker shares the
//! record's hash slot, like the steps' hash.
//!
//! Only calls that ask for tombstones pay for them: their claim and
//! completion are scripts (the record and the marker read or written in
//! one step); every other call keeps the native claim and completion.

use std::time::Duration;

use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome, Fence, Retention, Token};

use super::RedisStore;
use super::conn::store_error;
use super::scripts::fence;
use super::value::{claimed, corrupt, fingerprint_at, millis, ttl_at, unix_now, write_claim_value};

/// The claim of a call that keeps tombstones: the record as `SET NX GET`
/// would answer it, else the marker, else the claim written. Answers
/// `{PTTL, value}` of the record or the marker, or `{-2}` when won.
const CLAIM: &str = r"
local pttl = redis.call('PTTL', KEYS[1])
local v = redis.call('GET', KEYS[1])
if v then return {pttl, v} end
local t = redis.call('GET', KEYS[2])
if t then return {redis.call('PTTL', KEYS[2]), t} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {-2}
";

/// `scripts::COMPLETE`, writing the marker too (ARGV[6]: the tombstone in
/// ms, 8 bytes; ARGV[7]: TTL + tombstone in ms, as digits). A late holder
/// that finds the marker lost to the call that completed.
const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
  return -1
end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  redis.call('SET', KEYS[1], 'C' .. string.sub(v, 18, 49) .. ARGV[4] .. ARGV[2], 'PX', ARGV[3])
  redis.call('SET', KEYS[2], 'T' .. string.sub(v, 18, 49) .. ARGV[6], 'PX', ARGV[7])
  return 1
end
if ARGV[5] == '1' and string.sub(v, 1, 1) == 'C' and string.sub(v, 34) == ARGV[4] .. ARGV[2] then
  return 1
end
return 0
";

impl RedisStore {
    /// The key of `key`'s tombstone, in its record's slot.
    pub(super) fn tombstone_key(&self, key: &RecordKey) -> Vec<u8> {
        super::steps::side_key(&self.prefix, self.prefix_crc, key, b't')
    }

    /// `Store::claim` for a claim that looks for a tombstone.
    pub(super) async fn claim_tombstoned(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        let mut value = Vec::new();
        write_claim_value(&mut value, claim, unix_now())
            .map_err(|err| StoreError::new("redis", err))?;
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(CLAIM)
            .arg(2)
            .arg(self.redis_key(key))
            .arg(self.tombstone_key(key))
            .arg(value)
            .arg(millis(claim.lease))
            .cmd("HGETALL")
            .arg(self.steps_key(key));
        let (answer, saved, acks): (Vec<redis::Value>, redis::Value, Option<u32>) =
            match &self.replicas {
                Some(replicas) => {
                    replicas.append(&mut pipe);
                    let (answer, saved, acks) = self.query(&pipe).await?;
                    (answer, saved, Some(acks))
                }
                None => {
                    let (answer, saved) = self.query(&pipe).await?;
                    (answer, saved, None)
                }
            };
        let outcome = read_claim(answer)?;
        match outcome {
            ClaimOutcome::Won { .. } => {
                if let (Some(replicas), Some(acks)) = (&self.replicas, acks) {
                    replicas.check(acks, "claim")?;
                }
                Ok(ClaimOutcome::won(false, super::steps::parse(saved)?))
            }
            other => Ok(other),
        }
    }

    /// `Store::complete` for a call that keeps a tombstone: the record and
    /// its marker in one script, sent once more after a lost connection
    /// (see `scripts::COMPLETE`).
    pub(super) async fn complete_tombstoned(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        // A claim value kept for the native steps is not needed any more.
        drop(self.native.take(*key, token));
        let tombstone = millis(kept.tombstone.unwrap_or_default());
        let ttl = millis(kept.ttl);
        match self
            .send_completion(key, token, record, ttl, tombstone, false)
            .await
        {
            Err(err) if err.is_io_error() || err.is_connection_dropped() => {
                tracing::debug!(error = %err, "idem: Redis connection lost during a completion; sending it again");
                self.send_completion(key, token, record, ttl, tombstone, true)
                    .await
                    .map_err(store_error)?
            }
            answer => answer.map_err(store_error)?,
        }
    }

    /// One sending of the tombstoned completion (`again`: the second).
    async fn send_completion(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: u64,
        tombstone: u64,
        again: bool,
    ) -> redis::RedisResult<Result<Fence, StoreError>> {
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(COMPLETE)
            .arg(2)
            .arg(self.redis_key(key))
            .arg(self.tombstone_key(key))
            .arg(&token.to_bytes()[..])
            .arg(record)
            .arg(ttl)
            .arg(&ttl.to_be_bytes()[..])
            .arg(if again { "1" } else { "0" })
            .arg(&tombstone.to_be_bytes()[..])
            .arg(ttl.saturating_add(tombstone));
        let Some(replicas) = &self.replicas else {
            let (held,): (i64,) = self.query_raw(&pipe).await?;
            return Ok(Ok(fence(held)));
        };
        replicas.append(&mut pipe);
        let (held, acks): (i64, u32) = self.query_raw(&pipe).await?;
        if held != 1 {
            return Ok(Ok(fence(held)));
        }
        Ok(replicas.check(acks, "completion").map(|()| Fence::Held))
    }
}

/// The claim script's answer as a claim outcome.
fn read_claim(answer: Vec<redis::Value>) -> Result<ClaimOutcome, StoreError> {
    let mut answer = answer.into_iter();
    let pttl: i64 = match answer.next() {
        Some(redis::Value::Int(pttl)) => pttl,
        _ => return Err(corrupt("claim script answered no PTTL")),
    };
    let value = match answer.next() {
        None => return Ok(ClaimOutcome::won(false, Vec::new())),
        Some(redis::Value::BulkString(value)) => value,
        Some(_) => return Err(corrupt("claim script answered no value")),
    };
    if value.first() != Some(&b'T') {
        return claimed(pttl, Some(value));
    }
    let tombstone = ttl_at(&value, 33)?;
    let left = Duration::from_millis(u64::try_from(pttl).unwrap_or(0));
    Ok(ClaimOutcome::expired(
        fingerprint_at(&value, 1)?,
        tombstone.saturating_sub(left),
    ))
}
