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
use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::{Fence, StepId};
use redis::cluster_routing::Slot;

use super::RedisStore;
use super::conn::store_error;
use super::scripts::fence;
use super::value::{corrupt, millis};

/// Saves one step if the record is still our claim: the fence and the
/// write in one script.
pub(super) const SAVE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
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
    /// The key of `key`'s steps, in its record key's slot.
    pub(super) fn steps_key(&self, key: &RecordKey) -> Vec<u8> {
        steps_key(&self.prefix, key)
    }
}

/// The key of `key`'s steps: `prefix` + `s{tag}` + the hashed key, the tag
/// chosen so that it lands in the record key's slot. A prefix with a hash
/// tag of its own puts both in its slot already. Under a prefix with an
/// unclosed `{` (whose record keys hash by their own bytes), the tag goes
/// first: `{tag}` + `prefix` + `s:` + the hashed key.
fn steps_key(prefix: &[u8], key: &RecordKey) -> Vec<u8> {
    let mut record_key = prefix.to_vec();
    record_key.extend_from_slice(key.as_bytes());
    let slot = Slot::for_key(&record_key);
    let mut tagged = prefix.to_vec();
    tagged.extend_from_slice(format!("s{{{}}}", tags()[&slot]).as_bytes());
    tagged.extend_from_slice(key.as_bytes());
    if Slot::for_key(&tagged) == slot {
        return tagged;
    }
    let mut plain = prefix.to_vec();
    plain.extend_from_slice(b"s:");
    plain.extend_from_slice(key.as_bytes());
    if Slot::for_key(&plain) == slot {
        return plain;
    }
    let mut first = format!("{{{}}}", tags()[&slot]).into_bytes();
    first.extend_from_slice(&plain);
    first
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
        token: idem_core::store::Token,
        step: StepId,
        value: &[u8],
        ttl: std::time::Duration,
    ) -> Result<Fence, StoreError> {
        let keys = [self.redis_key(key), self.steps_key(key)];
        let px = millis(ttl).to_string();
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
                self.run_script(&invocation).await.map_err(store_error)?
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
        Ok(fence(held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_share_the_record_slot_under_any_prefix() {
        for prefix in [&b"idem:"[..], b"", b"idem:{billing}:", b"{x}", b"a}b:"] {
            for n in 0..2_000u32 {
                // Hashed keys are arbitrary bytes: some hold `{` or `}`.
                let key = RecordKey::new(&"scope", &n);
                let mut record_key = prefix.to_vec();
                record_key.extend_from_slice(key.as_bytes());
                let steps = steps_key(prefix, &key);
                assert!(steps.starts_with(prefix));
                assert_ne!(steps, record_key);
                assert_eq!(Slot::for_key(&steps), Slot::for_key(&record_key));
            }
        }
    }

    #[test]
    fn an_unclosed_brace_in_the_prefix_puts_the_tag_first() {
        for n in 0..2_000u32 {
            let key = RecordKey::new(&"s", &n);
            let mut record_key = b"idem:{".to_vec();
            record_key.extend_from_slice(key.as_bytes());
            let steps = steps_key(b"idem:{", &key);
            assert_eq!(Slot::for_key(&steps), Slot::for_key(&record_key));
        }
    }
}
