//! The claim: one `SET NX PX GET` (after a `PTTL` for a claim that asks
//! for the record's lifetime, and before a `WAIT` when replicas are
//! awaited, in one pipeline); a script after it only for a key whose claim
//! lapsed or was released with steps kept (`TAKE_OVER`); a `GET` instead,
//! answering alike, for a key this store saw completed (`crate::completed`).

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use idem_contract::StoreError;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome};
use redis::RedisWrite;

use super::RedisStore;
use super::conn::{command, refuses_writes, store_error};
use super::native::{Kept, live_until};
use super::scripts::TAKE_OVER;
use super::steps;
use super::tombstone;
use super::value::{
    Claimed, claim_px, claim_value_len, claimed, corrupt, fingerprint_at, is_completed,
    lifetime_left, unix_now, write_claim_value,
};

impl RedisStore {
    /// `Store::claim`.
    pub(super) async fn claim_key(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        if self.recheck.load(Ordering::Relaxed) {
            // The rare steps are boxed, so that the claim's future (which
            // the `Store` trait boxes on every call) holds only the hot
            // path's.
            Box::pin(self.check_server()).await?;
            self.recheck.store(false, Ordering::Relaxed);
        }
        // `SET … NX GET` claims a free key, or leaves a held one as it is
        // and answers its value: atomic, and native, which costs Redis a
        // fraction of a script (and MULTI/EXEC around it costs more than
        // the script). Alone it is a replay's whole cost, as a `GET` is.
        // An in-progress value then holds what estimates its lease left
        // (`value::lease_left_estimate`), and a completed one its expiry
        // (`value::lifetime_left`), for a claim that asks for the
        // record's lifetime (a local cache keeps the record that long).
        // The tombstone script reads a `PTTL` before its `SET`: the
        // lifetime is the smaller of it and the stored TTL, as the `PTTL`
        // may be of a value the one read replaced.
        // A free key has no saved steps (a step's hash expires no later
        // than its claim's key, and a release that keeps steps leaves a
        // marker in the key), so the steps are read only by the script
        // that replaces a lapsed or released claim.
        // A key last seen completed is read first (see `crate::completed`).
        let read = match self.completed.names(key) && !reads_pttl(claim) && self.replicas.is_none()
        {
            true => self.read_completed(key).await?,
            false => None,
        };
        // The claim's value is written into the command, and again from
        // the same time where it is needed after the answer (a takeover,
        // or a won claim whose value native compare-and-set keeps, see
        // `native.rs`): a replay builds it once and keeps nothing, and a
        // replay read above reads no clock.
        let mut clocks = None;
        let (pttl, held) = match read {
            Some(held) => (None, Some(held)),
            None => {
                let (now, _) = *clocks.get_or_insert_with(read_clocks);
                self.send_claim(key, claim, now).await?
            }
        };
        let pttl = match (pttl, &held) {
            (None, Some(held)) if claim.expiry => lifetime_left(held, self.clock.now()),
            _ => pttl,
        };
        let outcome = match claimed_or_replaced(pttl, held, claim)? {
            Err(held) => {
                let (now, _) = *clocks.get_or_insert_with(read_clocks);
                let value = claim_value(claim, now)?;
                Box::pin(self.replace(key, held, &value, claim)).await?
            }
            Ok(Claimed::Outcome(outcome)) => outcome,
            Ok(Claimed::Replace(held)) => {
                let (now, _) = *clocks.get_or_insert_with(read_clocks);
                let value = claim_value(claim, now)?;
                let (record, steps) = (self.redis_key(key), self.steps_key(key));
                let keys = [record.as_slice(), &steps];
                Box::pin(self.take_over(keys, &held, &value, claim)).await?
            }
        };
        if let ClaimOutcome::Completed { .. } = &outcome {
            self.completed.saw(key);
        }
        self.keep_won_for_native(key, claim, &outcome, &mut clocks)?;
        Ok(outcome)
    }

    /// Keeps a won claim's value for native compare-and-set, when the
    /// server has it: a fenced step within the lease by this host's clock
    /// is native, after it a script judges the lapse by Redis's.
    fn keep_won_for_native(
        &self,
        key: &RecordKey,
        claim: &Claim,
        outcome: &ClaimOutcome,
        clocks: &mut Option<(Duration, Instant)>,
    ) -> Result<(), StoreError> {
        if let ClaimOutcome::Won { steps, .. } = outcome
            && self.native.set_ifeq()
        {
            let (now, sent) = *clocks.get_or_insert_with(read_clocks);
            let kept = Kept {
                value: claim_value(claim, now)?,
                live_until: live_until(sent, claim.lease),
                stepped: !steps.is_empty(),
            };
            self.native.keep(*key, claim.token, kept);
        }
        Ok(())
    }

    /// `GET` of a key last seen completed: its value when it holds one,
    /// which the claim's `SET … NX GET` would have answered unchanged; `None`
    /// when it is free, to be claimed.
    async fn read_completed(&self, key: &RecordKey) -> Result<Option<Vec<u8>>, StoreError> {
        let mut get = redis::Cmd::with_capacity(2, 3 + self.prefix.len() + 32);
        get.arg("GET");
        key_arg(&mut get, [&self.prefix, key.as_bytes()])
            .map_err(|err| StoreError::new("redis", err))?;
        let held: Option<Vec<u8>> = self.send_cmd(&get).await.map_err(store_error)?;
        if held.as_ref().is_none_or(|held| !is_completed(held)) {
            self.completed.lost(key);
        }
        Ok(held)
    }

    /// Sends the claim and answers the key's `PTTL` (when the claim read
    /// it) and the value `SET … NX GET` found. A plain claim is that one
    /// command; the pipeline adds the `PTTL` for a claim that asks for
    /// the record's lifetime, the `WAIT` for awaited replicas, or is the
    /// tombstone script.
    async fn send_claim(
        &self,
        key: &RecordKey,
        claim: &Claim,
        now: Duration,
    ) -> Result<(Option<i64>, Option<Vec<u8>>), StoreError> {
        let answer = if reads_pttl(claim) || self.replicas.is_some() {
            let pipe = self.claim_pipeline(key, claim, now)?;
            Box::pin(self.claim_replies(&pipe, claim)).await
        } else {
            let set = set_nx_get([&self.prefix, key.as_bytes()], claim, now)?;
            self.send_cmd(&set).await.map(|held| (None, held, None))
        };
        match answer {
            Ok((pttl, held, acks)) => {
                if let (Some(replicas), Some(acks), None) = (&self.replicas, acks, &held) {
                    replicas.check(acks, "claim")?;
                }
                Ok((pttl, held))
            }
            Err(err) if refuses_writes(&err) && self.replicas.is_none() => {
                let redis_key = self.redis_key(key);
                let (pttl, held) = Box::pin(self.read_instead(&redis_key, err)).await?;
                Ok((Some(pttl), held))
            }
            Err(err) => Err(store_error(err)),
        }
    }

    /// The claim's pipeline: `SET … NX PX GET` after a `PTTL` when the
    /// claim asks for the record's lifetime, or, for a call that keeps
    /// tombstones, the script that answers as those two would; then the
    /// `WAIT` for awaited replicas. The claim's value is written from `now`.
    fn claim_pipeline(
        &self,
        key: &RecordKey,
        claim: &Claim,
        now: Duration,
    ) -> Result<redis::Pipeline, StoreError> {
        let mut pipe = redis::Pipeline::with_capacity(3);
        let redis_key = self.redis_key(key);
        if claim.tombstone {
            let value = claim_value(claim, now)?;
            let marker = self.tombstone_key(key);
            pipe.add_command(tombstone::claim(&redis_key, &marker, &value, claim));
        } else {
            if claim.expiry {
                pipe.add_command(command([b"PTTL".as_slice(), &redis_key]));
            }
            pipe.add_command(set_nx_get([&redis_key], claim, now)?);
        }
        if let Some(replicas) = &self.replicas {
            replicas.append(&mut pipe);
        }
        Ok(pipe)
    }

    /// The claim pipeline's replies: the `PTTL` when sent, the value found,
    /// and the replicas' acknowledgements when awaited. A tombstoned
    /// claim's script answers its two as one array (`tombstone::CLAIM`),
    /// spread here.
    async fn claim_replies(
        &self,
        pipe: &redis::Pipeline,
        claim: &Claim,
    ) -> redis::RedisResult<(Option<i64>, Option<Vec<u8>>, Option<u32>)> {
        let answer: Vec<redis::Value> = self.query_raw(pipe).await?;
        let mut replies = match claim.tombstone {
            true => tombstone::spread(answer),
            false => answer,
        }
        .into_iter();
        let pttl = match reads_pttl(claim) {
            true => Some(next(&mut replies)?),
            false => None,
        };
        let held = next(&mut replies)?;
        let acks = match self.replicas {
            Some(_) => Some(next(&mut replies)?),
            None => None,
        };
        Ok((pttl, held, acks))
    }

    /// Replaces a claim whose lease lapsed, or a released claim's marker
    /// (`held`, as the claim's pipeline found it), with ours, in one script
    /// that checks it again and reads the steps (`TAKE_OVER`): a lapsed
    /// holder vanished, so the won claim says it took over. A lapsed claim
    /// of another payload is not replaced (`refused_takeover`). With replicas
    /// awaited, the `WAIT` follows in the same trip.
    async fn take_over(
        &self,
        keys: [&[u8]; 2],
        held: &[u8],
        value: &[u8],
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        if let Some(refused) = refused_takeover(held, claim)? {
            return Ok(refused);
        }
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

/// The time a claim's value is written from, and the instant before it
/// was sent, from which its lease is surely live (`native::live_until`).
fn read_clocks() -> (Duration, Instant) {
    (unix_now(), Instant::now())
}

/// `SET key value NX PX lease GET`, the key (of its `parts`) and the value
/// written in place.
fn set_nx_get<const N: usize>(
    parts: [&[u8]; N],
    claim: &Claim,
    now: Duration,
) -> Result<redis::Cmd, StoreError> {
    // "SET", "NX", "PX", at most 20 digits, "GET".
    let words = 3 + 2 + 2 + 20 + 3;
    let key_len: usize = parts.iter().map(|part| part.len()).sum();
    let mut set = redis::Cmd::with_capacity(7, key_len + claim_value_len(claim) + words);
    set.arg("SET");
    key_arg(&mut set, parts)
        .and_then(|()| write_claim_value(&mut set.writer_for_next_arg(), claim, now))
        .map_err(|err| StoreError::new("redis", err))?;
    set.arg("NX")
        .arg("PX")
        .arg(claim_px(claim.lease))
        .arg("GET");
    Ok(set)
}

/// A record's key, of its `parts` (the prefix, the hashed key), written in
/// place as `cmd`'s next argument: no key is built apart on the hot path.
fn key_arg<const N: usize>(cmd: &mut redis::Cmd, parts: [&[u8]; N]) -> std::io::Result<()> {
    let mut key = cmd.writer_for_next_arg();
    parts.iter().try_for_each(|part| key.write_all(part))
}

/// The claim's answer to `held`, or `Err(held)` to replace (`rerun.rs`).
fn claimed_or_replaced(
    pttl: Option<i64>,
    held: Option<Vec<u8>>,
    claim: &Claim,
) -> Result<Result<Claimed, Vec<u8>>, StoreError> {
    match held {
        Some(held) if super::rerun::replaces(&held, claim)? => Ok(Err(held)),
        held => claimed(pttl, held).map(Ok),
    }
}

/// A claim's value at `now`, written apart (for a takeover's script, and
/// for native compare-and-set to keep).
fn claim_value(claim: &Claim, now: Duration) -> Result<Vec<u8>, StoreError> {
    let mut value = Vec::with_capacity(claim_value_len(claim));
    write_claim_value(&mut value, claim, now).map_err(|err| StoreError::new("redis", err))?;
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
            match claimed(Some(pttl), held)? {
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

/// A lapsed claim (`P…`) of another payload is not taken over
/// (`Store::claim`): the answer is in progress with no time left and the
/// lapsed claim's fingerprint, which the caller reports as a mismatch.
/// The takeover script replaces only the value read, so this check of it
/// holds.
fn refused_takeover(held: &[u8], claim: &Claim) -> Result<Option<ClaimOutcome>, StoreError> {
    if held.first() != Some(&b'P') {
        return Ok(None);
    }
    let lapsed = fingerprint_at(held, 17)?;
    Ok((!claim.fingerprint.matches(&lapsed))
        .then(|| ClaimOutcome::in_progress(lapsed, Duration::ZERO)))
}

/// Whether the claim's pipeline answers the key's `PTTL` first: the
/// tombstone script answers it. A claim that asks for the record's
/// lifetime reads it from the completed value instead (see `claim_key`).
fn reads_pttl(claim: &Claim) -> bool {
    claim.tombstone
}

/// The next of a pipeline's replies (nil where none is left).
fn next<T: redis::FromRedisValue>(
    replies: &mut impl Iterator<Item = redis::Value>,
) -> redis::RedisResult<T> {
    Ok(redis::from_redis_value(
        replies.next().unwrap_or(redis::Value::Nil),
    )?)
}

fn from_value<T: redis::FromRedisValue>(value: Option<redis::Value>) -> Result<T, StoreError> {
    redis::from_redis_value(value.unwrap_or(redis::Value::Nil))
        .map_err(|err| StoreError::new("redis", err))
}

#[cfg(test)]
mod tests {
    use idem_contract::fingerprint::Fingerprint;
    use idem_contract::store::Token;

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
        value.extend_from_slice(&30_000u64.to_be_bytes());
        value.extend_from_slice(b"orders::charge");
        let mut plain = redis::cmd("SET");
        plain
            .arg(b"idem:key")
            .arg(&value)
            .arg("NX")
            .arg("PX")
            .arg(30_000u64 + crate::redis::value::KEPT_AFTER_LEASE_MS)
            .arg("GET");
        let built = set_nx_get([b"idem:".as_slice(), b"key"], &claim, now).expect("a command");
        assert_eq!(built.get_packed_command(), plain.get_packed_command());
        assert_eq!(claim_value(&claim, now).expect("a value"), value);
    }
}
