//! [`Admin`] for [`MemoryStore`]: its records listed, counted and purged
//! one shard at a time, so a purge holds one shard's lock (a 64th of the
//! keys) at once.

use idem_contract::StoreError;
use idem_contract::admin::{Admin, ListFilter, Purge, Purged, RecordInfo, RecordState, Stats};
use idem_contract::key::RecordKey;
use idem_contract::store::async_trait;
use tokio::time::Instant;

use super::{Entry, MemoryStore, State, lock};

impl Entry {
    /// What `Admin` shows of the entry at `now`.
    fn info(&self, key: &RecordKey, now: Instant) -> RecordInfo {
        let in_progress = matches!(self.state, State::InProgress(_));
        let live = self.until > now;
        let state = RecordState::of_row(live, in_progress, !in_progress && self.kept > now);
        let mut info = RecordInfo::new(*key, state, self.fingerprint);
        info.site = Some(self.site.to_owned());
        info.age = now.saturating_duration_since(self.claimed);
        info.expires_in = match state {
            RecordState::InProgress | RecordState::Completed => Some(self.until - now),
            RecordState::Tombstone => Some(self.kept - now),
            _ => None,
        };
        if let State::Completed(record, _) = &self.state {
            info.size = record.len();
        }
        info
    }
}

/// Counts what `purge` did to one shard.
fn sweep(shard: &mut super::Shard, now: Instant, purged: &mut Purged) {
    let before = shard.entries.len();
    shard.entries.retain(|_, entry| {
        let completed = matches!(entry.state, State::Completed(..));
        entry.compact(now);
        let kept = entry.kept > now;
        if kept && completed && matches!(entry.state, State::Tombstone) {
            purged.tombstones += 1;
        }
        kept
    });
    purged.records += (before - shard.entries.len()) as u64;
    purged.steps += shard.steps.sweep(now);
}

/// The records and claims in this process's memory. Purging is optional
/// here (a full shard sweeps itself), but frees the memory of expired
/// records at once; it takes one shard at a time and does not pause
/// between them, each shard's sweep being short.
#[async_trait]
impl Admin for MemoryStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<RecordInfo>, StoreError> {
        let mut all = Vec::new();
        for shard in &self.shards {
            let shard = lock(shard);
            let now = Instant::now();
            all.extend(
                shard
                    .entries
                    .iter()
                    .map(|(key, entry)| entry.info(key, now))
                    .filter(|info| !filter.in_progress || info.state == RecordState::InProgress)
                    .filter(|info| filter.older_than.is_none_or(|age| info.age >= age)),
            );
        }
        all.sort_by_key(|info| std::cmp::Reverse(info.age));
        all.truncate(filter.limit.unwrap_or(usize::MAX));
        Ok(all)
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let shard = self.shard(key);
        let now = Instant::now();
        Ok(shard.entries.get(key).map(|entry| {
            let mut info = entry.info(key, now);
            if let State::Completed(record, _) = &entry.state {
                info.record = Some(record.clone());
            }
            info
        }))
    }

    async fn purge(&self) -> Result<Purged, StoreError> {
        let mut purged = Purged::default();
        for shard in &self.shards {
            let mut shard = lock(shard);
            sweep(&mut shard, Instant::now(), &mut purged);
        }
        Ok(purged)
    }

    /// As `purge`: a shard is the batch, and there is no pause.
    async fn purge_with(&self, _: &Purge) -> Result<Purged, StoreError> {
        self.purge().await
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let mut stats = Stats::default();
        for shard in &self.shards {
            let shard = lock(shard);
            let now = Instant::now();
            for (key, entry) in &shard.entries {
                let info = entry.info(key, now);
                match info.state {
                    RecordState::InProgress => stats.in_progress += 1,
                    RecordState::Completed => stats.completed += 1,
                    RecordState::Expired => stats.expired += 1,
                    RecordState::Lapsed => stats.lapsed += 1,
                    _ => stats.tombstones += 1,
                }
                stats.bytes += info.size as u64;
            }
        }
        Ok(stats)
    }
}
