//! The finished steps of calls (`idem::step`): one hash per call, field =
//! step id, value = the step's bytes, expiring as a whole `ttl` after its
//! latest save. A release deletes the record's key, not its steps.
//!
//! The hash's key sits in the record key's hash slot (a hash tag chosen
//! for that slot), so on Redis Cluster the claim's pipeline and the save's
//! script touch one slot.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use idem_core::{Fence, RecordKey, StepId, StoreError};
use redis::cluster_routing::Slot;

use super::{Conn, RedisStore, corrupt, invoke_on};

/// Saves one step if the record is still our claim: the fence and the
/// write in one script.
pub(super) const SAVE: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 1
end
return 0
";

/// A hash tag for every cluster slot: the smallest number whose decimal
/// digits hash there.
fn tags() -> &'static HashMap<Slot, u32> {
    static TAGS: OnceLock<HashMap<Slot, u32>> = OnceLock::new();
    TAGS.get_or_init(|| {
        const SLOTS: usize = 16384;
        let mut tags = HashMap::with_capacity(SLOTS);
        let mut n = 0u32;
        while tags.len() < SLOTS {
            tags.entry(Slot::for_key(n.to_string())).or_insert(n);
            n += 1;
        }
        tags
    })
}

impl RedisStore {
    /// The key of `key`'s steps: `prefix` + `s{tag}` + the hashed key, in
    /// the record key's slot. A prefix with a hash tag of its own puts both
    /// in its slot already; one with an unclosed `{` is refused.
    pub(super) fn steps_key(&self, key: &RecordKey) -> Result<Vec<u8>, StoreError> {
        let record_key = self.redis_key(key);
        let slot = Slot::for_key(&record_key);
        let mut tagged = self.prefix.clone();
        tagged.extend_from_slice(format!("s{{{}}}", tags()[&slot]).as_bytes());
        tagged.extend_from_slice(key.as_bytes());
        if Slot::for_key(&tagged) == slot {
            return Ok(tagged);
        }
        let mut plain = self.prefix.clone();
        plain.extend_from_slice(b"s:");
        plain.extend_from_slice(key.as_bytes());
        if Slot::for_key(&plain) == slot {
            return Ok(plain);
        }
        Err(StoreError::new(
            "redis",
            "the key prefix has an unclosed `{`, so a call's steps cannot be kept in its record's hash slot",
        ))
    }
}

/// The `HGETALL` answer of a won claim, as steps.
pub(super) fn parse(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<(StepId, Bytes)>, StoreError> {
    fields
        .into_iter()
        .map(|(id, value)| {
            let id = <[u8; 16]>::try_from(id.as_slice())
                .map_err(|_| corrupt("a step id is not 16 bytes"))?;
            Ok((StepId::from_bytes(id), Bytes::from(value)))
        })
        .collect()
}

impl RedisStore {
    /// `Store::save_step`: one `EVALSHA` (with a `WAIT` after it in the
    /// same pipeline when replicas are awaited).
    pub(super) async fn save_step_fenced(
        &self,
        key: &RecordKey,
        token: idem_core::Token,
        step: StepId,
        value: &[u8],
        ttl: std::time::Duration,
    ) -> Result<Fence, StoreError> {
        let keys = [self.redis_key(key), self.steps_key(key)?];
        let px = super::millis(ttl).to_string();
        let args: [&[u8]; 4] = [&token.to_bytes(), step.as_bytes(), value, px.as_bytes()];
        let held: i64 = match &self.replicas {
            None => {
                let mut invocation = self.scripts.save_step.prepare_invoke();
                for key in &keys {
                    invocation.key(key);
                }
                for arg in args {
                    invocation.arg(arg);
                }
                self.invoke_prepared(&invocation).await?
            }
            Some(replicas) => {
                let mut pipe = redis::pipe();
                pipe.cmd("EVAL")
                    .arg(SAVE)
                    .arg(2)
                    .arg(&keys[0])
                    .arg(&keys[1]);
                for arg in args {
                    pipe.arg(arg);
                }
                replicas.append(&mut pipe);
                let (held, acks): (i64, u32) = self.query(&pipe).await?;
                if held == 1 {
                    replicas.check(acks, "step")?;
                }
                held
            }
        };
        Ok(if held == 1 { Fence::Held } else { Fence::Lost })
    }

    async fn invoke_prepared(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<i64, StoreError> {
        match &self.conn {
            Conn::Single(conn) => invoke_on(invocation, &mut conn.clone()).await,
            Conn::Cluster(conn) => invoke_on(invocation, &mut conn.clone()).await,
            Conn::Sentinel(followed) => {
                followed
                    .send(async |mut manager| invoke_on(invocation, &mut manager).await)
                    .await
            }
        }
    }
}
