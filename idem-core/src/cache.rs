//! The opt-in local replay cache: completed records kept in this process,
//! so a replay that hits costs no round trip.
//!
//! Only completed records enter, each until the expiry the store reported
//! (measured from before the request left, so never later than the
//! store's own expiry). In-progress states are never cached.

use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use foldhash::HashMap;
use tokio::time::Instant;

use crate::{Fingerprint, RecordKey};

const SHARDS: usize = 16;

pub(crate) struct LocalCache {
    /// Their capacities add up to exactly the cache's.
    shards: Box<[Shard]>,
}

struct Shard {
    records: Mutex<HashMap<RecordKey, Cached>>,
    capacity: usize,
}

#[derive(Clone)]
pub(crate) struct Cached {
    pub fingerprint: Fingerprint,
    pub record: Bytes,
    until: Instant,
}

impl LocalCache {
    /// A cache of at most `capacity` records; `None` for zero.
    pub(crate) fn new(capacity: usize) -> Option<Self> {
        let count = capacity.min(SHARDS);
        let shards = (0..count)
            .map(|i| {
                let share = capacity / count + usize::from(i < capacity % count);
                Shard {
                    records: Mutex::default(),
                    capacity: share,
                }
            })
            .collect::<Box<[_]>>();
        (!shards.is_empty()).then_some(Self { shards })
    }

    /// The key's shard, locked, and that shard's capacity.
    fn shard(&self, key: &RecordKey) -> (MutexGuard<'_, HashMap<RecordKey, Cached>>, usize) {
        let shard = &self.shards[usize::from(key.as_bytes()[1]) % self.shards.len()];
        let guard = shard
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (guard, shard.capacity)
    }

    pub(crate) fn get(&self, key: &RecordKey) -> Option<Cached> {
        let (mut shard, _) = self.shard(key);
        let hit = shard.get(key)?;
        if hit.until > Instant::now() {
            return Some(hit.clone());
        }
        shard.remove(key);
        None
    }

    /// Drops `key`'s record, if kept.
    pub(crate) fn forget(&self, key: &RecordKey) {
        self.shard(key).0.remove(key);
    }

    /// Keeps `record` until `until`, a time at or before the store's expiry.
    pub(crate) fn put(
        &self,
        key: RecordKey,
        fingerprint: Fingerprint,
        record: Bytes,
        until: Instant,
    ) {
        let now = Instant::now();
        if until <= now {
            return;
        }
        let (mut shard, capacity) = self.shard(&key);
        if shard.len() >= capacity && !shard.contains_key(&key) {
            shard.retain(|_, cached| cached.until > now);
            if shard.len() >= capacity {
                let nearest = shard.iter().min_by_key(|(_, c)| c.until).map(|(k, _)| *k);
                if let Some(nearest) = nearest {
                    shard.remove(&nearest);
                }
            }
        }
        shard.insert(
            key,
            Cached {
                fingerprint,
                record,
                until,
            },
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.records.lock().unwrap().len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_expire_and_capacity_holds() {
        let cache = LocalCache::new(32).unwrap();
        for i in 0..1000u32 {
            let until = Instant::now() + Duration::from_secs(10);
            cache.put(
                RecordKey::new("c", &i),
                Fingerprint::NONE,
                Bytes::from_static(b"r"),
                until,
            );
        }
        assert!(cache.len() <= 32, "{}", cache.len());
        let key = RecordKey::new("c", &999u32);
        assert!(cache.get(&key).is_some());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(cache.get(&key).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn holds_at_most_its_capacity_and_zero_is_none() {
        assert!(LocalCache::new(0).is_none());
        for capacity in [1, 2, 5, 16, 17, 100] {
            let cache = LocalCache::new(capacity).unwrap();
            for i in 0..1000u32 {
                let until = Instant::now() + Duration::from_secs(10);
                let key = RecordKey::new("c", &i);
                cache.put(key, Fingerprint::NONE, Bytes::from_static(b"r"), until);
            }
            // Every shard fills to its share: exactly `capacity` in all.
            assert_eq!(cache.len(), capacity);
        }
    }
}
