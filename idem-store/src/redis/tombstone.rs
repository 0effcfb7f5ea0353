//! Tombstones: a small marker key next to the record's, `T` + fingerprint
//! (32 bytes) + the tombstone's length and the record's TTL (8 bytes each,
//! milliseconds, big-endian), under `PX` = TTL + tombstone, written by the
//! completion of a call that asks for one (`scripts::COMPLETE`). Its record then expires as any other; the
//! marker outlives it, so a claim that finds no record but the marker
//! answers `ClaimOutcome::Expired` (how long ago: the tombstone's length
//! less the marker's `PTTL`, by Redis's clock). The marker shares the
//! record's hash slot, like the steps' hash.
//!
//! Only calls that ask for tombstones pay for them: their claim and
//! completion are scripts (the record and the marker read or written in
//! one step); every other call keeps the native claim and completion.

use idem_contract::key::RecordKey;
use idem_contract::store::Claim;

use super::RedisStore;
use super::conn::command;
use super::value::claim_px;

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

impl RedisStore {
    /// The key of `key`'s tombstone, in its record's slot.
    pub(super) fn tombstone_key(&self, key: &RecordKey) -> Vec<u8> {
        super::steps::side_key(&self.prefix, self.prefix_crc, key, b't')
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
