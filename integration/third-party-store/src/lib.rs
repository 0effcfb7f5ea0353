//! A store written as a third party's would be: against
//! [`idem_contract`] alone, with no dependency on idem's runtime, tokio,
//! `metrics` or `arc-swap`. Its tests run conformance cases of
//! `idem-conformance` on it through `idemkit`, as an application's calls
//! would.
//!
//! [`MapStore`] keeps records in a map behind a mutex, judged by its own
//! clock: claims with their lease, records with their TTL and tombstone,
//! lapsed claims (taken over only by their own payload), steps.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token, async_trait};
use idem_contract::{Store, StoreError};

/// Records in a map behind a mutex: one process, nothing bounded.
#[derive(Debug, Default)]
pub struct MapStore {
    keys: Mutex<HashMap<RecordKey, Entry>>,
}

#[derive(Debug)]
struct Entry {
    fingerprint: Fingerprint,
    state: State,
    /// Each saved step's value and when it expires.
    steps: HashMap<StepId, (Bytes, Instant)>,
}

#[derive(Debug)]
enum State {
    /// Held by `token` until `until`; lapsed after.
    Claimed { token: Token, until: Instant },
    /// Replayed until `until`; then a tombstone until `tombstone`, if any.
    Completed {
        record: Bytes,
        until: Instant,
        tombstone: Option<Instant>,
    },
    /// Released: nobody holds the key; its steps stay.
    Free,
}

impl MapStore {
    fn keys(&self) -> MutexGuard<'_, HashMap<RecordKey, Entry>> {
        // A panic under the lock leaves the map as it was: each operation
        // writes at its end.
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `then` on the entry if `token` holds its live claim; the fence
    /// either way.
    fn fenced(
        &self,
        key: &RecordKey,
        token: Token,
        then: impl FnOnce(&mut Entry, Instant),
    ) -> Fence {
        let now = Instant::now();
        let mut keys = self.keys();
        let Some(entry) = keys.get_mut(key) else {
            return Fence::Expired;
        };
        match entry.state {
            State::Claimed { token: held, until } if held == token => {
                if until > now {
                    then(entry, now);
                    Fence::Held
                } else {
                    Fence::Expired
                }
            }
            State::Claimed { .. } | State::Completed { .. } => Fence::Lost,
            State::Free => Fence::Expired,
        }
    }
}

fn live_steps(steps: &mut HashMap<StepId, (Bytes, Instant)>, now: Instant) -> Vec<(StepId, Bytes)> {
    steps.retain(|_, (_, until)| *until > now);
    steps
        .iter()
        .map(|(id, (value, _))| (*id, value.clone()))
        .collect()
}

#[async_trait]
impl Store for MapStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let now = Instant::now();
        let mut keys = self.keys();
        let held = State::Claimed {
            token: claim.token,
            until: now + claim.lease,
        };
        let Some(entry) = keys.get_mut(key) else {
            let entry = Entry {
                fingerprint: claim.fingerprint,
                state: held,
                steps: HashMap::new(),
            };
            keys.insert(*key, entry);
            return Ok(ClaimOutcome::won(false, Vec::new()));
        };
        // A state update (`Claim::rerun`) replaces a completed record of
        // another payload, and drops its call's steps.
        let other = !claim.fingerprint.matches(&entry.fingerprint);
        let took_over = match &entry.state {
            State::Completed { .. } if claim.rerun && other => {
                entry.steps.clear();
                false
            }
            State::Completed { record, until, .. } if *until > now => {
                let left = *until - now;
                return Ok(ClaimOutcome::completed(
                    entry.fingerprint,
                    record.clone(),
                    left,
                ));
            }
            State::Completed {
                until,
                tombstone: Some(tombstone),
                ..
            } if *tombstone > now => {
                return Ok(ClaimOutcome::expired(entry.fingerprint, now - *until));
            }
            State::Claimed { until, .. } if *until > now => {
                return Ok(ClaimOutcome::in_progress(entry.fingerprint, *until - now));
            }
            // Lapsed: the vanished holder's payload only takes it over.
            State::Claimed { .. } if !claim.fingerprint.matches(&entry.fingerprint) => {
                return Ok(ClaimOutcome::in_progress(entry.fingerprint, Duration::ZERO));
            }
            State::Claimed { .. } => true,
            State::Completed { .. } => {
                entry.steps.clear();
                false
            }
            // Released: its saved steps are another payload's evidence too.
            State::Free => {
                let saved = !live_steps(&mut entry.steps, now).is_empty();
                if saved && !claim.fingerprint.matches(&entry.fingerprint) {
                    return Ok(ClaimOutcome::in_progress(entry.fingerprint, Duration::ZERO));
                }
                false
            }
        };
        if !claim.fingerprint.matches(&entry.fingerprint) {
            entry.steps.clear();
        }
        entry.fingerprint = claim.fingerprint;
        entry.state = held;
        Ok(ClaimOutcome::won(
            took_over,
            live_steps(&mut entry.steps, now),
        ))
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        Ok(self.fenced(key, token, |entry, now| {
            let until = now + kept.ttl;
            entry.state = State::Completed {
                record: Bytes::copy_from_slice(record),
                until,
                tombstone: kept.tombstone.map(|tombstone| until + tombstone),
            };
            entry.steps.clear();
        }))
    }

    /// In memory a completion cannot land and lose its answer, so a
    /// completion sent again finding these very bytes is our own.
    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        let landed = self.keys().get(key).is_some_and(|entry| {
            matches!(&entry.state, State::Completed { record: ours, until, .. } if *ours == record && *until > Instant::now())
        });
        match landed {
            true => Ok(Fence::Held),
            false => self.complete(key, token, record, kept).await,
        }
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        Ok(self.fenced(key, token, |entry, _| entry.state = State::Free))
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        Ok(self.fenced(key, token, |entry, now| {
            entry.state = State::Claimed {
                token,
                until: now + lease,
            }
        }))
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        Ok(self.fenced(key, token, |entry, now| {
            entry
                .steps
                .insert(step, (Bytes::copy_from_slice(value), now + ttl));
        }))
    }

    fn records_steps(&self) -> bool {
        true
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.keys().remove(key);
        Ok(())
    }
}
