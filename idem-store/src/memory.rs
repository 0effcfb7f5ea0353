//! One process's store, [`MemoryStore`]: sharded maps, a monotonic clock,
//! bounded.

mod admin;
mod steps;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use foldhash::HashMap;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use idem_contract::store::{
    Claim, ClaimOutcome, Fence, LAPSED_CLAIM_KEPT, Retention, StepId, Token, async_trait,
};
use idem_contract::{Store, StoreError};
use tokio::time::Instant;

const SHARDS: usize = 64;
const SWEEP_EVERY: u32 = 1024;
/// A full shard evicts this fraction of itself at once.
const EVICT_FRACTION: usize = 16;

/// The default bound on records: one million.
const DEFAULT_MAX_RECORDS: usize = 1_000_000;

/// Records in this process's memory: for one replica, tests, and as the
/// zero-setup default.
///
/// The map is split in 64 shards so calls on different keys rarely share a
/// lock. Expiry is judged by tokio's monotonic clock. The store is bounded:
/// when a shard is full, expired records go first; a shard still full of
/// live records (completed ones within their TTL or tombstone, claims, and
/// claims whose lease lapsed, kept a day as evidence:
/// [`LAPSED_CLAIM_KEPT`]) refuses new
/// claims with `Error::Store`, so the call fails closed. Evicting a live
/// record instead would let its duplicate run the body again; a store
/// that may do so is asked for with [`evict_live`](MemoryStore::evict_live).
/// The saved steps of calls (`idem::step`) are bounded apart: past the
/// bound, the call whose steps expire first loses them (and would resume
/// from its start).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let idem = idem::Idempotency::new(idem::MemoryStore::with_max_records(10_000));
/// let out: Result<u8, idem::Error> = idem.call("demo", "k").run(|| async { Ok(1) }).await;
/// assert_eq!(out.unwrap(), 1);
/// # }
/// ```
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    /// Completed records evicted within their TTL ([`evict_live`](Self::evict_live)).
    evicted: Option<AtomicU64>,
}

/// Its shape and eviction count; not its records.
impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field("per_shard", &self.per_shard)
            .field("evicted", &self.evicted)
            .finish()
    }
}

#[derive(Default)]
struct Shard {
    /// foldhash, not std's SipHash: the keys are SHA-256 digests, which a
    /// caller cannot aim at a bucket without knowing the map's random seed,
    /// and SipHash over 32 bytes cost more per call than the rest of the
    /// store operation (callgrind, see BENCHMARKS.md).
    entries: HashMap<RecordKey, Entry>,
    inserts: u32,
    steps: steps::Steps,
}

struct Entry {
    fingerprint: Fingerprint,
    state: State,
    /// When the lease or TTL runs out.
    until: Instant,
    /// When the entry may go: `until`, or the end of a completed record's
    /// tombstone.
    kept: Instant,
    /// When the claim was won, and where: for `Admin`.
    claimed: Instant,
    site: &'static str,
}

enum State {
    InProgress(Token),
    /// The record, and the token of the claim that completed it (so a
    /// completion sent again knows its own).
    Completed(Bytes, Token),
    /// A completed record past its TTL, kept as a tombstone: the value is
    /// dropped, the fingerprint stays.
    Tombstone,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store bounded to one million records.
    pub fn new() -> Self {
        Self::with_max_records(DEFAULT_MAX_RECORDS)
    }

    /// A store bounded to about `max_records` (rounded up to a multiple of
    /// the shard count).
    pub fn with_max_records(max_records: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: max_records.div_ceil(SHARDS).max(1),
            evicted: None,
        }
    }

    /// The same store, lossy when full: a shard full of live records
    /// evicts the completed records closest to expiry (a sixteenth of the
    /// shard at a time) instead of refusing new claims. **A duplicate of an
    /// evicted key runs its body again**: choose this only for calls whose
    /// repeated effect is harmless (a cache in front of an idempotent
    /// downstream). Claims, lapsed ones included, are never evicted. Each
    /// eviction counts in [`evicted`](Self::evicted) and in the metric
    /// `idem_memory_evicted_total`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let store = idem::MemoryStore::with_max_records(64).evict_live();
    /// let idem = idem::Idempotency::new(store);
    /// for key in 0..200u32 {
    ///     let out: Result<u32, idem::Error> = idem.call("demo", &key).run(|| async { Ok(key) }).await;
    ///     assert_eq!(out.unwrap(), key, "a full store evicts instead of refusing");
    /// }
    /// # }
    /// ```
    pub fn evict_live(mut self) -> Self {
        self.evicted = Some(AtomicU64::new(0));
        self
    }

    /// How many completed records were evicted within their TTL, by a
    /// store made with [`evict_live`](Self::evict_live); zero otherwise.
    ///
    /// ```
    /// assert_eq!(idem::MemoryStore::new().evicted(), 0);
    /// ```
    pub fn evicted(&self) -> u64 {
        self.evicted
            .as_ref()
            .map_or(0, |evicted| evicted.load(Ordering::Relaxed))
    }

    /// How many records are held, expired ones not yet evicted included.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).entries.len())
            .sum()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, key: &RecordKey) -> MutexGuard<'_, Shard> {
        // The key is a SHA-256 digest: any byte of it is uniform.
        lock(&self.shards[usize::from(key.as_bytes()[0]) % SHARDS])
    }

    /// The key's shard, and the time read once it is locked: read before,
    /// a claim that waited behind a renewal would find the renewed lease
    /// ending more than a lease after its own `now`.
    fn locked(&self, key: &RecordKey) -> (MutexGuard<'_, Shard>, Instant) {
        let shard = self.shard(key);
        (shard, Instant::now())
    }
}

/// Whether a claim that reruns on another payload replaces `entry`: a
/// completed record, or a tombstone, of another fingerprint.
fn replaced(entry: &Entry, claim: &Claim, now: Instant) -> bool {
    let completed = match entry.state {
        State::InProgress(_) => false,
        State::Completed(..) | State::Tombstone => entry.kept > now,
    };
    claim.rerun && completed && !claim.fingerprint.matches(&entry.fingerprint)
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic while holding a shard cannot leave an entry half-written:
    // every mutation is a single insert or remove.
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Entry {
    /// Drops the value of a completed record past its TTL: from then on it
    /// is a tombstone.
    fn compact(&mut self, now: Instant) {
        if self.until <= now && matches!(self.state, State::Completed(..)) {
            self.state = State::Tombstone;
        }
    }
}

impl Shard {
    /// Makes room for one more entry, or says the shard is full of live
    /// records. Evicts live completed records only where `evicted` counts
    /// them (a lossy store, [`MemoryStore::evict_live`]).
    fn make_room(
        &mut self,
        limit: usize,
        now: Instant,
        evicted: Option<&AtomicU64>,
    ) -> Result<(), StoreError> {
        self.inserts = self.inserts.wrapping_add(1);
        if self.entries.len() < limit && !self.inserts.is_multiple_of(SWEEP_EVERY) {
            return Ok(());
        }
        self.entries.retain(|_, entry| {
            entry.compact(now);
            entry.kept > now
        });
        self.steps.sweep(now);
        if self.entries.len() < limit {
            return Ok(());
        }
        let Some(evicted) = evicted else {
            return Err(StoreError::new(
                "memory",
                "store is full of live records; raise `MemoryStore::with_max_records`, or opt into `evict_live()` (lossy)",
            ));
        };
        // Evict a batch of the completed records nearest expiry, not just
        // one, so a full shard does not rescan itself on every insert.
        let mut completed: Vec<(Instant, RecordKey)> = self
            .entries
            .iter()
            .filter(|(_, entry)| !matches!(entry.state, State::InProgress(_)))
            .map(|(key, entry)| (entry.until, *key))
            .collect();
        if completed.is_empty() {
            return Err(StoreError::new(
                "memory",
                "store is full of in-progress claims",
            ));
        }
        let batch = (limit / EVICT_FRACTION).clamp(1, completed.len());
        completed.select_nth_unstable(batch - 1);
        for (_, key) in &completed[..batch] {
            self.entries.remove(key);
        }
        evicted.fetch_add(batch as u64, Ordering::Relaxed);
        metrics::counter!("idem_memory_evicted_total").increment(batch as u64);
        Ok(())
    }

    /// The entry under `key` if it is an unexpired claim held by `token`,
    /// or how the claim was lost.
    fn held(&mut self, key: &RecordKey, token: Token, now: Instant) -> Result<&mut Entry, Fence> {
        match self.entries.get_mut(key) {
            Some(entry) if entry.until > now => match entry.state {
                State::InProgress(t) if t == token => Ok(entry),
                _ => Err(Fence::Lost),
            },
            // A lapsed claim, ours or not: nobody holds the key.
            Some(Entry {
                state: State::InProgress(_),
                ..
            }) => Err(Fence::Expired),
            // Another caller completed the key; its tombstone stands.
            Some(entry) if entry.kept > now => Err(Fence::Lost),
            _ => Err(Fence::Expired),
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let (mut shard, now) = self.locked(key);
        let took_over = match shard.entries.get_mut(key) {
            // `mismatch = "rerun"`: another payload replaces a completed
            // record or its tombstone, and the replaced call's steps go.
            Some(entry) if replaced(entry, claim, now) => {
                shard.steps.forget(key);
                false
            }
            Some(entry) if entry.until > now => {
                return Ok(match &entry.state {
                    State::Completed(record, _) => ClaimOutcome::completed(
                        entry.fingerprint,
                        record.clone(),
                        entry.until - now,
                    ),
                    State::InProgress(_) => {
                        ClaimOutcome::in_progress(entry.fingerprint, entry.until - now)
                    }
                    // Only a record past its TTL becomes one.
                    State::Tombstone => ClaimOutcome::expired(entry.fingerprint, Duration::ZERO),
                });
            }
            Some(entry) if matches!(entry.state, State::InProgress(_)) => {
                if !claim.fingerprint.matches(&entry.fingerprint) {
                    return Ok(ClaimOutcome::in_progress(entry.fingerprint, Duration::ZERO));
                }
                true
            }
            Some(entry) if entry.kept > now => {
                entry.compact(now);
                return Ok(ClaimOutcome::expired(entry.fingerprint, now - entry.until));
            }
            Some(_) => false,
            None => {
                shard.make_room(self.per_shard, now, self.evicted.as_ref())?;
                false
            }
        };
        shard.entries.insert(
            *key,
            Entry {
                fingerprint: claim.fingerprint,
                state: State::InProgress(claim.token),
                until: now + claim.lease,
                kept: now + claim.lease + LAPSED_CLAIM_KEPT,
                claimed: now,
                site: claim.site,
            },
        );
        Ok(ClaimOutcome::won(took_over, shard.steps.finished(key, now)))
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        let (mut shard, now) = self.locked(key);
        Ok(match shard.held(key, token, now) {
            Ok(entry) => {
                entry.state = State::Completed(Bytes::copy_from_slice(record), token);
                entry.until = now + kept.ttl;
                entry.kept = now + kept.kept_for();
                Fence::Held
            }
            Err(lost) => lost,
        })
    }

    /// Our own completion, found standing, is `Held`; else as `complete`.
    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        let landed = {
            let (shard, now) = self.locked(key);
            shard.entries.get(key).is_some_and(|entry| {
                entry.until > now
                    && matches!(&entry.state, State::Completed(stored, by) if *by == token && stored == record)
            })
        };
        match landed {
            true => Ok(Fence::Held),
            false => self.complete(key, token, record, kept).await,
        }
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        let (mut shard, now) = self.locked(key);
        Ok(match shard.held(key, token, now) {
            Ok(_) => {
                shard.entries.remove(key);
                Fence::Held
            }
            Err(lost) => lost,
        })
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let (mut shard, now) = self.locked(key);
        Ok(match shard.held(key, token, now) {
            Ok(entry) => {
                entry.until = now + lease;
                entry.kept = entry.until + LAPSED_CLAIM_KEPT;
                Fence::Held
            }
            Err(lost) => lost,
        })
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let (mut shard, now) = self.locked(key);
        if let Err(lost) = shard.held(key, token, now) {
            return Ok(lost);
        }
        let limit = self.per_shard;
        shard.steps.save(key, step, value, now + ttl, limit);
        Ok(Fence::Held)
    }

    fn records_steps(&self) -> bool {
        true
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        let mut shard = self.shard(key);
        shard.entries.remove(key);
        shard.steps.forget(key);
        Ok(())
    }
}
