//! The claim: one pipeline of `PTTL` and `SET NX PX GET` (and `WAIT`,
//! when replicas are awaited); a script after it only for a key whose
//! claim lapsed or was released with steps kept (`TAKE_OVER`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use idem_core::StoreError;
use idem_core::fingerprint::Fingerprint;
use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome};
use redis::RedisWrite;

use super::RedisStore;
use super::conn::{command, refuses_writes, store_error};
use super::native::{Kept, live_until};
use super::scripts::TAKE_OVER;
use super::steps;
use super::tombstone;
use super::value::{
    Claimed, claim_px, claim_value_len, claimed, corrupt, fingerprint_at, unix_now,
    write_claim_value,
};

impl RedisStore {
    /// `Store::claim`.
    pub(super) async fn claim_key(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        if self.recheck.load(Ordering::Relaxed) {
            self.check_server().await?;
            self.recheck.store(false, Ordering::Relaxed);
        }
        // `SET … NX GET` claims a free key, or leaves a held one as it is
        // and answers its value: atomic, and native, which costs Redis a
        // fraction of a script (and MULTI/EXEC around it costs more than
        // the script). The `PTTL` before it, in the same pipeline (one
        // write, one turn), gives the store-clock `Retry-After` and cache
        // lifetime. The two may be split by other clients' commands, so
        // the `PTTL` may be of an earlier value than the one read; it is
        // sent first so that it can only be of one that existed before:
        // either the value read, or one it replaced, in which case the
        // value read was written after the `PTTL` ran and lives at least
        // its own stored TTL from then. The lifetime reported is the
        // smaller of the two, never later than the store's expiry.
        // A free key has no saved steps (a step's hash expires no later
        // than its claim's key, and a release that keeps steps leaves a
        // marker in the key), so the steps are read only by the script
        // that replaces a lapsed or released claim: a replay is two
        // commands.
        let redis_key = self.redis_key(key);
        // With native compare-and-set the claim's value is kept, for the
        // fenced operations to compare (see `native.rs`).
        let mut kept = self.native.set_ifeq().then(Vec::new);
        let sent = Instant::now();
        let mut pipe = self.claim_pipeline(key, &redis_key, claim, kept.as_mut())?;
        let found = if let Some(replicas) = &self.replicas {
            replicas.append(&mut pipe);
            let (pttl, held, acks): (i64, Option<Vec<u8>>, u32) = self
                .claim_replies(&pipe, claim.tombstone)
                .await
                .map_err(store_error)?;
            if held.is_none() {
                replicas.check(acks, "claim")?;
            }
            claimed(pttl, held)?
        } else {
            let (pttl, held) = match self.claim_replies(&pipe, claim.tombstone).await {
                Ok(answer) => answer,
                Err(err) if refuses_writes(&err) => self.read_instead(&redis_key, err).await?,
                Err(err) => return Err(store_error(err)),
            };
            claimed(pttl, held)?
        };
        let outcome = match found {
            Claimed::Outcome(outcome) => outcome,
            Claimed::Replace(held) => {
                let value = match &kept {
                    Some(value) => value.clone(),
                    None => claim_value(claim)?,
                };
                let keys = [redis_key.as_slice(), &self.steps_key(key)];
                self.take_over(keys, &held, &value, claim).await?
            }
        };
        if let (Some(value), ClaimOutcome::Won { steps, .. }) = (kept, &outcome) {
            // A fenced step within the lease by this host's clock is
            // native, after it a script judges the lapse by Redis's.
            let live_until = live_until(sent, claim.lease);
            let stepped = !steps.is_empty();
            let kept = Kept {
                value,
                live_until,
                stepped,
            };
            self.native.keep(*key, claim.token, kept);
        }
        Ok(outcome)
    }

    /// The claim's commands: `PTTL` and `SET … NX PX GET`, or, for a call
    /// that keeps tombstones, the script that answers as they would; the
    /// claim's value is also written into `kept` when given.
    fn claim_pipeline(
        &self,
        key: &RecordKey,
        redis_key: &[u8],
        claim: &Claim,
        kept: Option<&mut Vec<u8>>,
    ) -> Result<redis::Pipeline, StoreError> {
        let mut pipe = redis::Pipeline::with_capacity(3);
        if !claim.tombstone {
            pipe.add_command(command([b"PTTL".as_slice(), redis_key]))
                .add_command(set_nx_get(redis_key, claim, unix_now(), kept)?);
            return Ok(pipe);
        }
        let value = claim_value(claim)?;
        if let Some(kept) = kept {
            kept.clone_from(&value);
        }
        let marker = self.tombstone_key(key);
        pipe.add_command(tombstone::claim(redis_key, &marker, &value, claim));
        Ok(pipe)
    }

    /// Replaces a claim whose lease lapsed, or a released claim's marker
    /// (`held`, as the claim's pipeline found it), with ours, in one script
    /// that checks it again and reads the steps (`TAKE_OVER`): a lapsed
    /// holder vanished, so the won claim says it took over. With replicas
    /// awaited, the `WAIT` follows in the same trip.
    async fn take_over(
        &self,
        keys: [&[u8]; 2],
        held: &[u8],
        value: &[u8],
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        let mut digits = itoa::Buffer::new();
        let px = digits.format(claim_px(claim.lease)).as_bytes();
        let args: [&[u8]; 3] = [held, value, px];
        let Some(replicas) = &self.replicas else {
            let take_over = &self.scripts.take_over;
            let answer = self.eval(take_over, &keys, &args).await;
            return taken_over(answer.map_err(store_error)?);
        };
        let pipe = replicas.eval_then_wait(TAKE_OVER, &keys, &args);
        let (answer, acks): (redis::Value, u32) = self.query(&pipe).await?;
        let outcome = taken_over(answer)?;
        if matches!(outcome, ClaimOutcome::Won { .. }) {
            replicas.check(acks, "claim")?;
        }
        Ok(outcome)
    }

    /// The claim pipeline's replies: a tombstoned claim's script answers
    /// its two as one array (`tombstone::CLAIM`), spread here.
    async fn claim_replies<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        tombstoned: bool,
    ) -> redis::RedisResult<T> {
        if !tombstoned {
            return self.query_raw(pipe).await;
        }
        let answer: Vec<redis::Value> = self.query_raw(pipe).await?;
        tombstone::spread(answer)
    }

    /// The claim on a server that refuses writes (at `maxmemory` with
    /// `noeviction`, or a read-only replica): a completed record is still
    /// replayed, a held key still answers in progress, and a free key
    /// cannot be claimed (the refusal, as `Error::Store`).
    async fn read_instead(
        &self,
        redis_key: &[u8],
        refused: redis::RedisError,
    ) -> Result<(i64, Option<Vec<u8>>), StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("PTTL").arg(redis_key).cmd("GET").arg(redis_key);
        match self.query::<(i64, Option<Vec<u8>>)>(&pipe).await? {
            (pttl, Some(held)) => Ok((pttl, Some(held))),
            (_, None) => Err(store_error(refused)),
        }
    }
}

/// `SET key value NX PX lease GET`, the value written in place, and into
/// `kept` as well when given.
fn set_nx_get(
    redis_key: &[u8],
    claim: &Claim,
    now: Duration,
    kept: Option<&mut Vec<u8>>,
) -> Result<redis::Cmd, StoreError> {
    // "SET", "NX", "PX", at most 20 digits, "GET".
    let words = 3 + 2 + 2 + 20 + 3;
    let len = redis_key.len() + claim_value_len(claim) + words;
    let mut set = redis::Cmd::with_capacity(7, len);
    set.arg("SET").arg(redis_key);
    let written = match kept {
        Some(value) => {
            value.reserve_exact(claim_value_len(claim));
            let written = write_claim_value(value, claim, now);
            set.arg(&value[..]);
            written
        }
        None => write_claim_value(&mut set.writer_for_next_arg(), claim, now),
    };
    written.map_err(|err| StoreError::new("redis", err))?;
    set.arg("NX")
        .arg("PX")
        .arg(claim_px(claim.lease))
        .arg("GET");
    Ok(set)
}

/// A claim's value, written apart (for a takeover by script when the
/// claim's pipeline wrote it in place).
fn claim_value(claim: &Claim) -> Result<Vec<u8>, StoreError> {
    let mut value = Vec::with_capacity(claim_value_len(claim));
    write_claim_value(&mut value, claim, unix_now())
        .map_err(|err| StoreError::new("redis", err))?;
    Ok(value)
}

/// A `TAKE_OVER` answer as the claim's outcome: `{1, steps}` taken over,
/// `{2, steps}` won on a free key, `{0, PTTL, value}` what holds it now.
fn taken_over(answer: redis::Value) -> Result<ClaimOutcome, StoreError> {
    let redis::Value::Array(mut items) = answer else {
        return Err(corrupt("a takeover answered no list"));
    };
    match (items.first(), items.len()) {
        (Some(redis::Value::Int(won @ (1 | 2))), 2) => {
            let took_over = *won == 1;
            let saved = items.pop().unwrap_or(redis::Value::Nil);
            Ok(ClaimOutcome::won(took_over, steps::parse(saved)?))
        }
        (Some(redis::Value::Int(0)), 3) => {
            let held: Option<Vec<u8>> = from_value(items.pop())?;
            let pttl: i64 = from_value(items.pop())?;
            match claimed(pttl, held)? {
                Claimed::Outcome(outcome) => Ok(outcome),
                // Another value that lapsed or was released meanwhile: the
                // next claim replaces it.
                Claimed::Replace(held) => Ok(ClaimOutcome::in_progress(
                    fingerprint_at(&held, 17).unwrap_or(Fingerprint::NONE),
                    Duration::ZERO,
                )),
            }
        }
        _ => Err(corrupt("a takeover answered an unknown list")),
    }
}

fn from_value<T: redis::FromRedisValue>(value: Option<redis::Value>) -> Result<T, StoreError> {
    redis::from_redis_value(value.unwrap_or(redis::Value::Nil))
        .map_err(|err| StoreError::new("redis", err))
}

#[cfg(test)]
mod tests {
    use idem_core::fingerprint::Fingerprint;
    use idem_core::store::Token;

    use super::*;

    #[test]
    fn the_claim_is_sent_as_a_plain_set_would_send_it() {
        let claim = Claim::new(
            Token::random(),
            Fingerprint::from_bytes([7; 32]),
            Duration::from_millis(30_000),
            "orders::charge",
        );
        let now = Duration::from_millis(1_700_000_000_123);
        let mut value = b"P".to_vec();
        value.extend_from_slice(&claim.token.to_bytes());
        value.extend_from_slice(claim.fingerprint.as_bytes());
        value.extend_from_slice(&1_700_000_000_123u64.to_be_bytes());
        value.extend_from_slice(b"orders::charge");
        let mut plain = redis::cmd("SET");
        plain
            .arg(b"idem:key")
            .arg(&value)
            .arg("NX")
            .arg("PX")
            .arg(30_000u64 + crate::redis::value::KEPT_AFTER_LEASE_MS)
            .arg("GET");
        let built = set_nx_get(b"idem:key", &claim, now, None).expect("a command");
        assert_eq!(built.get_packed_command(), plain.get_packed_command());
        let mut kept = Vec::new();
        let built = set_nx_get(b"idem:key", &claim, now, Some(&mut kept)).expect("a command");
        assert_eq!(built.get_packed_command(), plain.get_packed_command());
        assert_eq!(kept, value);
    }
}
