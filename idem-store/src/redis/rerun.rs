//! State updates (`Claim::rerun`, `mismatch = "rerun"`): a claim of
//! another payload that finds a completed record, or a tombstone's
//! marker, replaces it with its own claim in one script, which drops the
//! replaced call's steps and marker.

use std::time::Duration;

use idem_contract::StoreError;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome};

use super::RedisStore;
use super::conn::store_error;
use super::value::{Claimed, claim_px, claimed, corrupt, fingerprint_at, is_completed};

/// Replaces the value the claim found (ARGV[1]) with ours (ARGV[2], `PX`
/// ARGV[3]) if the key still holds it (or nothing), deleting the steps
/// (KEYS[2]) and the tombstone's marker (KEYS[3], when the call keeps
/// tombstones). Answers `{2}` when replaced, else `{0, PTTL, value}`:
/// what the key holds now.
pub(super) const REPLACE: &str = r"
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1]), v}
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('DEL', KEYS[2])
if KEYS[3] then redis.call('DEL', KEYS[3]) end
return {2}
";

/// How often a replacement is tried again when another state update's
/// record took the key between the read and the script.
const TURNS: usize = 16;

/// Whether a claim that reruns replaces `held`: a completed record (`D`,
/// or `C` of the earlier layout) or a tombstone's marker (`T`) of another
/// fingerprint.
pub(super) fn replaces(held: &[u8], claim: &Claim) -> Result<bool, StoreError> {
    if !claim.rerun || !(is_completed(held) || held.first() == Some(&b'T')) {
        return Ok(false);
    }
    Ok(!claim.fingerprint.matches(&fingerprint_at(held, 1)?))
}

impl RedisStore {
    /// Replaces `held` (see [`replaces`]) with the claim's `value`: won,
    /// with no steps; or what holds the key now (in progress, or the
    /// record of the same payload), as the claim would answer it.
    pub(super) async fn replace(
        &self,
        key: &RecordKey,
        mut held: Vec<u8>,
        value: &[u8],
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        let (record, steps) = (self.redis_key(key), self.steps_key(key));
        let marker = self.tombstone_key(key);
        let mut keys = vec![record.as_slice(), &steps];
        if claim.tombstone {
            keys.push(&marker);
        }
        let mut digits = itoa::Buffer::new();
        let px = digits.format(claim_px(claim.lease)).as_bytes();
        for _ in 0..TURNS {
            let args: [&[u8]; 3] = [&held, value, px];
            let answer: redis::Value = match &self.replicas {
                None => {
                    let script = &self.scripts.replace;
                    self.eval(script, &keys, &args).await.map_err(store_error)?
                }
                Some(replicas) => {
                    let pipe = replicas.eval_then_wait(REPLACE, &keys, &args);
                    let (answer, acks): (redis::Value, u32) = self.query(&pipe).await?;
                    if replaced(&answer) {
                        replicas.check(acks, "claim")?;
                    }
                    answer
                }
            };
            let (pttl, now) = match answer_of(answer)? {
                None => return Ok(ClaimOutcome::won(false, Vec::new())),
                Some(holds) => holds,
            };
            if replaces(&now, claim)? {
                held = now;
                continue;
            }
            return Ok(match claimed(Some(pttl), Some(now))? {
                Claimed::Outcome(outcome) => outcome,
                // Lapsed or released meanwhile: the next claim takes it.
                Claimed::Replace(lapsed) => ClaimOutcome::in_progress(
                    fingerprint_at(&lapsed, 17).unwrap_or(Fingerprint::NONE),
                    Duration::ZERO,
                ),
            });
        }
        Err(StoreError::new(
            "redis",
            "the claim did not settle: the record was replaced 16 times in a row",
        ))
    }
}

fn replaced(answer: &redis::Value) -> bool {
    matches!(answer, redis::Value::Array(items) if matches!(items.first(), Some(redis::Value::Int(2))))
}

/// `REPLACE`'s answer: `None` replaced, else the `PTTL` and value found.
fn answer_of(answer: redis::Value) -> Result<Option<(i64, Vec<u8>)>, StoreError> {
    if replaced(&answer) {
        return Ok(None);
    }
    let redis::Value::Array(items) = answer else {
        return Err(corrupt("a replacement answered no list"));
    };
    match items.as_slice() {
        [
            redis::Value::Int(0),
            redis::Value::Int(pttl),
            redis::Value::BulkString(held),
        ] => Ok(Some((*pttl, held.clone()))),
        _ => Err(corrupt("a replacement answered an unknown list")),
    }
}
