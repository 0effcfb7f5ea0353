//! The finished steps of calls (`idem::step`), kept beside the records.

use bytes::Bytes;
use foldhash::HashMap;
use idem_contract::key::RecordKey;
use idem_contract::store::StepId;
use tokio::time::Instant;

/// The saved steps of every call that has some, by call.
#[derive(Default)]
pub(super) struct Steps {
    calls: HashMap<RecordKey, Vec<Saved>>,
}

struct Saved {
    id: StepId,
    value: Bytes,
    until: Instant,
}

impl Steps {
    /// The unexpired steps of `key`, for a claim that won it.
    pub(super) fn finished(&self, key: &RecordKey, now: Instant) -> Vec<(StepId, Bytes)> {
        if self.calls.is_empty() {
            return Vec::new();
        }
        self.calls.get(key).map_or_else(Vec::new, |saved| {
            saved
                .iter()
                .filter(|step| step.until > now)
                .map(|step| (step.id, step.value.clone()))
                .collect()
        })
    }

    /// Drops every step of `key` (`forget`).
    pub(super) fn forget(&mut self, key: &RecordKey) {
        self.calls.remove(key);
    }

    /// Saves (or replaces) one step of `key`. At most `limit` calls keep
    /// steps: past it, expired ones go, then the call whose steps expire
    /// first (it resumes from the start).
    pub(super) fn save(
        &mut self,
        key: &RecordKey,
        id: StepId,
        value: &[u8],
        until: Instant,
        limit: usize,
    ) {
        if !self.calls.contains_key(key) && self.calls.len() >= limit {
            let now = Instant::now();
            self.sweep(now);
            if self.calls.len() >= limit {
                let first = self
                    .calls
                    .iter()
                    .map(|(call, saved)| (saved.iter().map(|s| s.until).max(), *call))
                    .min();
                if let Some((_, call)) = first {
                    self.calls.remove(&call);
                }
            }
        }
        let saved = self.calls.entry(*key).or_default();
        saved.retain(|step| step.id != id);
        saved.push(Saved {
            id,
            value: Bytes::copy_from_slice(value),
            until,
        });
    }

    /// Drops expired steps, and calls left with none; how many steps.
    pub(super) fn sweep(&mut self, now: Instant) -> u64 {
        let mut dropped = 0;
        self.calls.retain(|_, saved| {
            let before = saved.len();
            saved.retain(|step| step.until > now);
            dropped += (before - saved.len()) as u64;
            !saved.is_empty()
        });
        dropped
    }
}
