//! Tombstones: a small marker key next to the record's, `T` + fingerprint
//! (32 bytes) + the tombstone's length and the record's TTL (8 bytes each,
//! milliseconds, big-endian), under `PX` = TTL + tombstone, written by the completion
//! of a call that asks for one. Its record then expires as any other; the
//! marker outlives it, so a claim that finds no record but the marker
//! answers `ClaimOutcome::Expired` (how long ago: the tombstone's length
//! less the marker's `PTTL`, by Redis's clock). The marker shares the
//! record's hash slot, like the steps' hash.
//!
//! Only calls that ask for tombstones pay for them: their claim and
//! completion are scripts (the record and the marker read or written in
//! one step); every other call keeps the native claim and completion.

use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::{Claim, Fence, Retention, Token};

use super::RedisStore;
use super::conn::{command, store_error};
use super::scripts::fence;
use super::value::{claim_px, millis};

/// The claim of a call that keeps tombstones: where the record's key is
/// empty and the marker stands, the marker's `{PTTL, value}`; else what the
/// claim's `PTTL` and `SET … NX PX GET` answer (see `claim.rs`), as one
/// reply (`{PTTL}` alone when the claim is won: a Lua `false` in a table
/// is a boolean, not a nil, under RESP3). ARGV[1]: the claim's value,
/// ARGV[2]: its `PX`.
const CLAIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('GET', KEYS[2])
  if t then return {redis.call('PTTL', KEYS[2]), t} end
end
local pttl = redis.call('PTTL', KEYS[1])
local held = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if held then return {pttl, held} end
return {pttl}
";

/// `scripts::COMPLETE`, writing the marker too (ARGV[6]: the tombstone
/// and the TTL in ms, 8 bytes each; ARGV[7]: TTL + tombstone in ms, as
/// digits). A late holder
/// that finds the marker lost to the call that completed.
const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
  return -1
end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  if redis.call('PTTL', KEYS[1]) <= 86400000 then return -1 end
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
            .arg(&[tombstone.to_be_bytes(), ttl.to_be_bytes()].concat()[..])
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

/// The claim of a call that keeps tombstones, sent in the claim's
/// pipeline in place of its `PTTL` and `SET … NX PX GET` (see `CLAIM`).
pub(super) fn claim(redis_key: &[u8], marker: &[u8], value: &[u8], claim: &Claim) -> redis::Cmd {
    let mut digits = itoa::Buffer::new();
    let px = digits.format(claim_px(claim.lease)).as_bytes();
    let parts: [&[u8]; 7] = [
        b"EVAL",
        CLAIM.as_bytes(),
        b"2",
        redis_key,
        marker,
        value,
        px,
    ];
    command(parts)
}

/// A tombstoned claim pipeline's replies as the `PTTL` and `SET … NX PX
/// GET` replies (and whatever follows them) would be.
pub(super) fn spread(answer: Vec<redis::Value>) -> Vec<redis::Value> {
    let mut replies = Vec::with_capacity(answer.len() + 1);
    for (i, reply) in answer.into_iter().enumerate() {
        match reply {
            redis::Value::Array(mut two) if i == 0 => {
                two.resize(2, redis::Value::Nil);
                replies.extend(two);
            }
            other => replies.push(other),
        }
    }
    replies
}
