//! The finished steps of calls (`idem::step`): one hash per call, field =
//! step id, value = the step's bytes, expiring as a whole `ttl` after its
//! latest save, and no later than its claim's key. A release keeps the
//! steps and leaves a marker in the record's key while they live
//! (`value::RELEASED`): a claim reads them only when it replaces a lapsed
//! or released claim, never on a free key.
//!
//! The hash's key sits in the record key's hash slot (a hash tag chosen
//! for that slot), so on Redis Cluster the claim's pipeline and the save's
//! script touch one slot.

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use idem_contract::store::{Fence, StepId};

use super::RedisStore;
use super::conn::store_error;
use super::scripts::{SAVE_STEP, fence};
use super::slot;
use super::value::{corrupt, millis};

impl RedisStore {
    /// The key of `key`'s steps, in its record key's slot.
    pub(super) fn steps_key(&self, key: &RecordKey) -> Vec<u8> {
        steps_key(&self.prefix, self.prefix_crc, key)
    }
}

/// The key of `key`'s steps: `prefix` + `s{tag}` + the hashed key, the tag
/// chosen so that it lands in the record key's slot. A prefix with a hash
/// tag of its own puts both in its slot already. Under a prefix with an
/// unclosed `{` (whose record keys hash by their own bytes), the tag goes
/// first: `{tag}` + `prefix` + `s:` + the hashed key. `prefix_crc` is
/// `slot::prefix_crc(prefix)`: given, the prefix holds no `{`, so the tag
/// is the tagged key's first hash tag and that key is in the tag's slot.
fn steps_key(prefix: &[u8], prefix_crc: Option<slot::PrefixCrc>, key: &RecordKey) -> Vec<u8> {
    side_key(prefix, prefix_crc, key, b's')
}

/// A key next to `key`'s record, in its slot, told apart by `letter`
/// (`s` steps, `t` tombstone), built as [`steps_key`] describes.
pub(super) fn side_key(
    prefix: &[u8],
    prefix_crc: Option<slot::PrefixCrc>,
    key: &RecordKey,
    letter: u8,
) -> Vec<u8> {
    let hashed = key.as_bytes().as_slice();
    let slot = match prefix_crc {
        Some(crc) => slot::of_prefixed(crc, hashed),
        None => slot::of(&<[&[u8]]>::concat(&[prefix, hashed])),
    };
    let tag = slot::tag(slot);
    let letter = &[letter][..];
    let tagged = <[&[u8]]>::concat(&[prefix, letter, b"{", tag, b"}", hashed]);
    if prefix_crc.is_some() || slot::of(&tagged) == slot {
        return tagged;
    }
    let plain = <[&[u8]]>::concat(&[prefix, letter, b":", hashed]);
    if slot::of(&plain) == slot {
        return plain;
    }
    <[&[u8]]>::concat(&[b"{", tag, b"}", prefix, letter, b":", hashed])
}

/// The `HGETALL` answer of a replaced claim, as steps. Most find none: an
/// empty answer is not converted.
pub(super) fn parse(saved: redis::Value) -> Result<Vec<(StepId, Bytes)>, StoreError> {
    let none = match &saved {
        redis::Value::Nil => true,
        redis::Value::Array(items) => items.is_empty(),
        redis::Value::Map(fields) => fields.is_empty(),
        _ => false,
    };
    if none {
        return Ok(Vec::new());
    }
    let fields: Vec<(Vec<u8>, Vec<u8>)> =
        redis::from_redis_value(saved).map_err(|err| StoreError::new("redis", err))?;
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
        token: idem_contract::store::Token,
        step: StepId,
        value: &[u8],
        ttl: std::time::Duration,
    ) -> Result<Fence, StoreError> {
        let (record_key, steps_key) = (self.redis_key(key), self.steps_key(key));
        let keys: [&[u8]; 2] = [&record_key, &steps_key];
        let mut digits = itoa::Buffer::new();
        let px = digits.format(millis(ttl)).as_bytes();
        let args: [&[u8]; 4] = [&token.to_bytes(), step.as_bytes(), value, px];
        let held: i64 = match &self.replicas {
            None => {
                let save = &self.scripts.save_step;
                self.eval(save, &keys, &args).await.map_err(store_error)?
            }
            Some(replicas) => {
                let pipe = replicas.eval_then_wait(SAVE_STEP, &keys, &args);
                let (held, acks): (i64, u32) = self.query(&pipe).await?;
                if held == 1 {
                    replicas.check(acks, "step")?;
                }
                held
            }
        };
        if held == 1 {
            self.native.stepped(*key, token);
        }
        Ok(fence(held))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::OnceLock;

    use redis::cluster_routing::Slot;

    use super::*;

    /// The steps key by its definition, through redis-rs's own slots: the
    /// store's must be byte for byte the same, or a store would stop
    /// finding the steps an older one saved.
    fn reference_steps_key(prefix: &[u8], key: &RecordKey) -> Vec<u8> {
        static TAGS: OnceLock<HashMap<Slot, u32>> = OnceLock::new();
        let tags = TAGS.get_or_init(|| {
            let mut tags = HashMap::new();
            let mut n = 0u32;
            while tags.len() < 16384 {
                tags.entry(Slot::for_key(n.to_string())).or_insert(n);
                n += 1;
            }
            tags
        });
        let mut record_key = prefix.to_vec();
        record_key.extend_from_slice(key.as_bytes());
        let slot = Slot::for_key(&record_key);
        let mut tagged = prefix.to_vec();
        tagged.extend_from_slice(format!("s{{{}}}", tags[&slot]).as_bytes());
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
        let mut first = format!("{{{}}}", tags[&slot]).into_bytes();
        first.extend_from_slice(&plain);
        first
    }

    /// The store's steps key of `key` under `prefix`.
    fn steps_key_under(prefix: &[u8], key: &RecordKey) -> Vec<u8> {
        steps_key(prefix, slot::prefix_crc(prefix), key)
    }

    /// Prefixes with braces in every arrangement, and the default.
    fn prefixes() -> Vec<Vec<u8>> {
        let mut prefixes: Vec<Vec<u8>> = [
            &b""[..],
            b"idem:",
            b"idem:{billing}:",
            b"{x}",
            b"a}b:",
            b"idem:{",
            b"{",
            b"}",
            b"{}",
            b"}{",
            b"{}x{y}",
            b"x{}",
            b"{{a}}",
            b"s{1}",
        ]
        .iter()
        .map(|prefix| prefix.to_vec())
        .collect();
        for n in 0..200u32 {
            let digits = n.to_string().into_bytes();
            prefixes.push(
                digits
                    .iter()
                    .map(|d| b"ab{}:"[usize::from(d % 5)])
                    .collect(),
            );
        }
        prefixes
    }

    #[test]
    fn steps_keys_are_those_of_the_definition() {
        for prefix in prefixes() {
            for n in 0..500u32 {
                let key = RecordKey::new(&"scope", &n);
                assert_eq!(
                    steps_key_under(&prefix, &key),
                    reference_steps_key(&prefix, &key),
                    "prefix {prefix:?}, key {n}"
                );
            }
        }
    }

    #[test]
    fn steps_share_the_record_slot_under_any_prefix() {
        for prefix in [&b"idem:"[..], b"", b"idem:{billing}:", b"{x}", b"a}b:"] {
            for n in 0..2_000u32 {
                // Hashed keys are arbitrary bytes: some hold `{` or `}`.
                let key = RecordKey::new(&"scope", &n);
                let mut record_key = prefix.to_vec();
                record_key.extend_from_slice(key.as_bytes());
                let steps = steps_key_under(prefix, &key);
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
            let steps = steps_key_under(b"idem:{", &key);
            assert_eq!(Slot::for_key(&steps), Slot::for_key(&record_key));
        }
    }
}
