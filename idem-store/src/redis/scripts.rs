//! The Lua of the fenced operations (complete, release, renew; the step save
//! is in `steps.rs`) and how their answers read.

use idem_contract::store::Fence;
use redis::Script;

// The fenced operations compare the claim's token inside Redis, so they are Lua
// (on a server without native compare-and-set, or for a claim whose value
// this store did not keep: see `native.rs`);
// the claim needs no comparison and is native (see `Store::claim` below).
// Each answers 1 when the claim was ours, 0 when another caller holds or
// completed the key, -1 when the key is gone or our claim's lease lapsed
// (its key outlives the lease by 86400000 ms, `KEPT_AFTER_LEASE_MS`, so a
// lapse is a `PTTL` at or below that).
//
// A completion writes the completed value (`value::COMPLETED`) of the
// claim's fingerprint, ARGV[4] (the TTL and the expiry, 8 bytes each) and
// the record (ARGV[2]), `PX` ARGV[3].
//
// A completion is sent once more after a lost connection or a failure
// (ARGV[5] = '1'): the first may have landed, and then the value is
// completed with exactly our TTL and record (its expiry, counted from an
// earlier sending, differs). Another holder's identical bytes would answer 1 as
// well, which tells the caller nothing false: that same value is replayed.
//
// A call that keeps a tombstone passes its marker's key (KEYS[2], see
// `tombstone.rs`), ARGV[6] the tombstone and the TTL in ms (8 bytes each)
// and ARGV[7] TTL + tombstone in ms, as digits: the marker is written with
// the record, and a late holder that finds the marker lost to the call
// that completed.
pub(super) const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then
  if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
  return -1
end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  if redis.call('PTTL', KEYS[1]) <= 86400000 then return -1 end
  redis.call('SET', KEYS[1], 'D' .. string.sub(v, 18, 49) .. ARGV[4] .. ARGV[2], 'PX', ARGV[3])
  if KEYS[2] then
    redis.call('SET', KEYS[2], 'T' .. string.sub(v, 18, 49) .. ARGV[6], 'PX', ARGV[7])
  end
  return 1
end
if ARGV[5] == '1' and string.sub(v, 1, 1) == 'D' and string.sub(v, 34, 41) == string.sub(ARGV[4], 1, 8)
  and string.sub(v, 50) == ARGV[2] then
  return 1
end
return 0
";

/// A release deletes the claim, or, where the call saved steps (KEYS[2]),
/// leaves `R` (`value::RELEASED`) for as long as the steps live: the next
/// claim then knows to read them.
pub(super) const RELEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  if redis.call('PTTL', KEYS[1]) <= 86400000 then return -1 end
  local steps = redis.call('PTTL', KEYS[2])
  if steps > 0 then
    redis.call('SET', KEYS[1], 'R', 'PX', steps)
  else
    redis.call('DEL', KEYS[1])
  end
  return 1
end
return 0
";

pub(super) const RENEW: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  if redis.call('PTTL', KEYS[1]) <= 86400000 then return -1 end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
";

/// A renewal to a zero lease (`Store::renew`: the claim ends, the key is
/// not freed): the claim's value is written again with its lease zeroed,
/// so that a claim that estimates the lease left from the value (without
/// a `PTTL`, `value::lease_left_estimate`) sees it lapsed too; `PX`
/// ARGV[2] keeps it the day a lapsed claim is kept.
pub(super) const LAPSE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  if redis.call('PTTL', KEYS[1]) <= 86400000 then return -1 end
  redis.call('SET', KEYS[1], string.sub(v, 1, 57) .. string.rep('\0', 8) .. string.sub(v, 66), 'PX', ARGV[2])
  return 1
end
return 0
";

#[derive(Clone)]
/// The fenced operations' scripts, each sent as `EVALSHA`.
pub(super) struct Scripts {
    pub(super) complete: Script,
    pub(super) release: Script,
    pub(super) renew: Script,
    pub(super) lapse: Script,
    pub(super) save_step: Script,
    pub(super) take_over: Script,
    /// A state update's replacement (`rerun.rs`).
    pub(super) replace: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Scripts {
            complete: Script::new(COMPLETE),
            release: Script::new(RELEASE),
            renew: Script::new(RENEW),
            lapse: Script::new(LAPSE),
            save_step: Script::new(SAVE_STEP),
            take_over: Script::new(TAKE_OVER),
            replace: Script::new(super::rerun::REPLACE),
        }
    }
}

/// A fenced script's answer: 1 ours, 0 another caller's, -1 gone.
pub(super) fn fence(answer: i64) -> Fence {
    match answer {
        1 => Fence::Held,
        0 => Fence::Lost,
        _ => Fence::Expired,
    }
}

/// Saves one step if the record is still our claim: the fence and the
/// write in one script.
pub(super) const SAVE_STEP: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  if left <= 86400000 then return -1 end
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], math.min(tonumber(ARGV[4]), left))
  return 1
end
return 0
";

/// Replaces a claim whose lease lapsed, or a released claim's `R`
/// (ARGV[1], the value the claim's pipeline found), with ours (ARGV[2],
/// `PX` ARGV[3]), checking it again by Redis's clock, and reads the steps
/// saved under the key (KEYS[2]). Answers `{1, steps}` when a lapsed claim
/// was taken over, `{2, steps}` when a released or free key was won, else
/// `{0, PTTL, value}`: what the key holds now, read as the claim's
/// pipeline reads it. Rare: only a claim that finds a lapsed or released
/// one runs it.
pub(super) const TAKE_OVER: &str = r"
local v = redis.call('GET', KEYS[1])
if v then
  local left = redis.call('PTTL', KEYS[1])
  local kind = string.sub(v, 1, 1)
  if v ~= ARGV[1] or kind == 'C' or kind == 'D' or (kind == 'P' and left > 86400000) then
    return {0, left, v}
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
local took = 2
if v and string.sub(v, 1, 1) == 'P' then took = 1 end
return {took, redis.call('HGETALL', KEYS[2])}
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::value::KEPT_AFTER_LEASE_MS;

    #[test]
    fn the_scripts_judge_a_lapse_by_the_kept_time() {
        let within = format!("<= {KEPT_AFTER_LEASE_MS} ");
        for script in [COMPLETE, RELEASE, RENEW, LAPSE, SAVE_STEP] {
            assert!(script.contains(&within), "{script}");
        }
        assert!(TAKE_OVER.contains(&format!("left > {KEPT_AFTER_LEASE_MS})")));
        let lease = crate::redis::value::LEASE_AT;
        assert!(LAPSE.contains(&format!("string.sub(v, 1, {lease})")));
        assert!(LAPSE.contains(&format!("string.sub(v, {})", lease + 8 + 1)));
        let released = char::from(crate::redis::value::RELEASED);
        assert!(RELEASE.contains(&format!("'{released}'")));
    }
}
