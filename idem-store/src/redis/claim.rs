//! The claim: one pipeline of `PTTL`, `SET NX PX GET` and the steps'
//! `HGETALL` (and `WAIT`, when replicas are awaited).

use std::sync::atomic::Ordering;
use std::time::Duration;

use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome};
use redis::RedisWrite;

use super::RedisStore;
use super::conn::{command, refuses_writes, store_error};
use super::steps;
use super::value::{claim_value_len, claimed, millis, unix_now, write_claim_value};

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
        // The `HGETALL` after it reads the call's saved steps in the same
        // turn: if the `SET` won, no one else can save steps in between.
        let redis_key = self.redis_key(key);
        let steps_key = self.steps_key(key);
        // With native compare-and-set the claim's value is kept, for the
        // fenced operations to compare (see `native.rs`).
        let mut kept = self.native.set_ifeq().then(Vec::new);
        let mut pipe = redis::Pipeline::with_capacity(4);
        pipe.add_command(command([b"PTTL".as_slice(), &redis_key]))
            .add_command(set_nx_get(&redis_key, claim, unix_now(), kept.as_mut())?)
            .add_command(command([b"HGETALL".as_slice(), &steps_key]));
        if let Some(replicas) = &self.replicas {
            replicas.append(&mut pipe);
            let (pttl, held, saved, acks): (i64, Option<Vec<u8>>, redis::Value, u32) =
                self.query(&pipe).await?;
            if held.is_none() {
                replicas.check(acks, "claim")?;
            }
            return self.kept(key, claim, kept, with_steps(claimed(pttl, held), saved));
        }
        let (pttl, held, saved) = match self.query_raw(&pipe).await {
            Ok(answer) => answer,
            Err(err) if refuses_writes(&err) => {
                let (pttl, held) = self.read_instead(&redis_key, err).await?;
                (pttl, held, redis::Value::Nil)
            }
            Err(err) => return Err(store_error(err)),
        };
        self.kept(key, claim, kept, with_steps(claimed(pttl, held), saved))
    }

    /// Keeps the value of a won claim, when it was kept for native steps.
    fn kept(
        &self,
        key: &RecordKey,
        claim: &Claim,
        value: Option<Vec<u8>>,
        outcome: Result<ClaimOutcome, StoreError>,
    ) -> Result<ClaimOutcome, StoreError> {
        if let (Some(value), Ok(ClaimOutcome::Won { .. })) = (value, &outcome) {
            self.native.keep(*key, claim.token, value);
        }
        outcome
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
    set.arg("NX").arg("PX").arg(millis(claim.lease)).arg("GET");
    Ok(set)
}

/// A won claim with the steps its pipeline read (the `HGETALL` answer,
/// converted only for a won claim).
fn with_steps(
    outcome: Result<ClaimOutcome, StoreError>,
    saved: redis::Value,
) -> Result<ClaimOutcome, StoreError> {
    match outcome? {
        ClaimOutcome::Won { took_over, .. } => {
            Ok(ClaimOutcome::won(took_over, steps::parse(saved)?))
        }
        other => Ok(other),
    }
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
            .arg(30_000u64)
            .arg("GET");
        let built = set_nx_get(b"idem:key", &claim, now, None).expect("a command");
        assert_eq!(built.get_packed_command(), plain.get_packed_command());
        let mut kept = Vec::new();
        let built = set_nx_get(b"idem:key", &claim, now, Some(&mut kept)).expect("a command");
        assert_eq!(built.get_packed_command(), plain.get_packed_command());
        assert_eq!(kept, value);
    }
}
