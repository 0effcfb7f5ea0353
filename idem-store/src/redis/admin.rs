//! [`Admin`] for [`RedisStore`]: records found by `SCAN` over the store's
//! prefix (on one server or behind Sentinel; a cluster is refused, its
//! keyspace being split over several primaries).
//!
//! A claim keeps its time (by the claimer's clock: the claim is one native
//! `SET`, which cannot ask Redis's) and its call site after the fenced
//! fields; a completed record's age is the time since completion (its
//! stored TTL less what is left, by Redis's clock).

use std::time::Duration;

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::admin::{Admin, ListFilter, Purged, RecordInfo, RecordState, Stats};
use idem_contract::key::RecordKey;
use idem_contract::store::async_trait;
use redis::{FromRedisValue, Value};

use super::value::{
    CLAIM_AT, RELEASED, SITE_AT, corrupt, fingerprint_at, lease_left, millis_at, record_at,
    remaining, unix_now,
};
use super::{Conn, RedisStore};

/// How much of a value a listing reads: a claim's fenced fields, its time
/// and a call site's name (longer names are cut).
const HEAD_LEN: usize = SITE_AT + 256;

/// A tombstone's marker key, with the record it stands for.
type Marker = (RecordKey, Vec<u8>);

/// Keys a `SCAN` step asks for.
const SCAN_COUNT: usize = 500;

impl RedisStore {
    /// The record keys under the prefix, one `SCAN` step at a time, and
    /// the tombstones' markers it found.
    async fn scan_step(&self, cursor: u64) -> Result<(u64, Vec<Vec<u8>>, Vec<Marker>), StoreError> {
        if matches!(self.conn, Conn::Cluster(_)) {
            return Err(StoreError::unsupported(
                "redis",
                "listing records is not supported on Redis Cluster (inspect and forget are)",
            ));
        }
        let mut pattern = Vec::with_capacity(self.prefix.len() + 1);
        for &byte in &self.prefix {
            if matches!(byte, b'*' | b'?' | b'[' | b']' | b'\\') {
                pattern.push(b'\\');
            }
            pattern.push(byte);
        }
        pattern.push(b'*');
        let mut pipe = redis::pipe();
        pipe.cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let ((next, keys),): ((u64, Vec<Vec<u8>>),) = self.query(&pipe).await?;
        let width = self.prefix.len() + 32;
        let (records, others): (Vec<_>, Vec<_>) = keys.into_iter().partition(|k| k.len() == width);
        let markers = others
            .into_iter()
            .filter_map(|key| self.marker(key))
            .collect();
        Ok((next, records, markers))
    }

    /// The marker `key` and the record it stands for, if `key` is a
    /// tombstone's marker.
    fn marker(&self, key: Vec<u8>) -> Option<Marker> {
        let hashed: [u8; 32] = key.get(key.len().checked_sub(32)?..)?.try_into().ok()?;
        let record = RecordKey::from_bytes(hashed);
        (self.tombstone_key(&record) == key).then_some((record, key))
    }

    /// The tombstones among `markers` whose record has expired (a live
    /// record is listed as itself).
    async fn read_tombstones(&self, markers: &[Marker]) -> Result<Vec<RecordInfo>, StoreError> {
        if markers.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (record, marker) in markers {
            pipe.cmd("EXISTS").arg(self.redis_key(record));
            pipe.cmd("PTTL").arg(marker).cmd("GET").arg(marker);
        }
        let answers: Vec<Value> = self.query(&pipe).await?;
        let mut out = Vec::new();
        for ((record, _), answer) in markers.iter().zip(answers.chunks(3)) {
            let [exists, pttl, value] = answer else {
                return Err(corrupt("short pipeline answer"));
            };
            let (exists, pttl): (bool, i64) = (parse(exists)?, parse(pttl)?);
            let value: Option<Vec<u8>> = parse(value)?;
            if let Some(value) = value.filter(|_| !exists && pttl > 0) {
                out.push(tombstone_info(*record, pttl, &value)?);
            }
        }
        Ok(out)
    }

    /// Each key's record, read with its remaining time; `whole` reads the
    /// record's bytes too, else only its header. A key gone meanwhile is
    /// left out.
    async fn read(&self, keys: &[Vec<u8>], whole: bool) -> Result<Vec<RecordInfo>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("PTTL").arg(key).cmd("STRLEN").arg(key);
            if whole {
                pipe.cmd("GET").arg(key);
            } else {
                // Enough for a claim's header and a completed record's.
                pipe.cmd("GETRANGE").arg(key).arg(0).arg(HEAD_LEN - 1);
            }
        }
        let answers: Vec<Value> = self.query(&pipe).await?;
        let mut out = Vec::with_capacity(keys.len());
        for (key, answer) in keys.iter().zip(answers.chunks(3)) {
            let [pttl, len, head] = answer else {
                return Err(corrupt("short pipeline answer"));
            };
            let pttl: i64 = parse(pttl)?;
            let len: usize = parse(len)?;
            let head: Option<Vec<u8>> = parse(head)?;
            // A release's marker is no record (see `value::RELEASED`).
            let Some(head) = head.filter(|head| pttl != -2 && head.first() != Some(&RELEASED))
            else {
                continue;
            };
            let hashed: [u8; 32] = key[self.prefix.len()..].try_into().expect("32 bytes");
            out.push(info(
                RecordKey::from_bytes(hashed),
                pttl,
                len,
                &head,
                whole,
            )?);
        }
        Ok(out)
    }

    /// Every record under the prefix matching `keep`.
    async fn scan_all(
        &self,
        mut keep: impl FnMut(&RecordInfo) -> bool,
    ) -> Result<Vec<RecordInfo>, StoreError> {
        let (mut cursor, mut out) = (0, Vec::new());
        loop {
            let (next, keys, markers) = self.scan_step(cursor).await?;
            out.extend(self.read(&keys, false).await?.into_iter().filter(&mut keep));
            let tombstones = self.read_tombstones(&markers).await?;
            out.extend(tombstones.into_iter().filter(&mut keep));
            if next == 0 {
                return Ok(out);
            }
            cursor = next;
        }
    }
}

fn parse<T: FromRedisValue>(value: &Value) -> Result<T, StoreError> {
    T::from_redis_value_ref(value).map_err(|err| StoreError::new("redis", err.to_string()))
}

fn info(
    key: RecordKey,
    pttl: i64,
    len: usize,
    value: &[u8],
    whole: bool,
) -> Result<RecordInfo, StoreError> {
    // An in-progress claim's key outlives its lease: what is left is the
    // lease (zero once it lapsed, until the next claim takes it over).
    let left = match value.first() {
        Some(b'P') => lease_left(pttl),
        _ => remaining(pttl),
    };
    let (state, fingerprint, age, size, record) = match value.first() {
        // A lapsed claim's key is kept a day after its lease
        // (`KEPT_AFTER_LEASE_MS`): it is listed, not in progress.
        Some(b'P') if left.is_zero() => (
            RecordState::Lapsed,
            fingerprint_at(value, 17)?,
            claim_age(value)?,
            0,
            None,
        ),
        Some(b'P') => (
            RecordState::InProgress,
            fingerprint_at(value, 17)?,
            claim_age(value)?,
            0,
            None,
        ),
        Some(_) if let Some(at) = record_at(value) => {
            let ttl = millis_at(value, 33)?;
            let record = whole.then(|| Bytes::copy_from_slice(&value[at..]));
            let age = ttl.saturating_sub(left);
            let size = len.saturating_sub(at);
            (
                RecordState::Completed,
                fingerprint_at(value, 1)?,
                age,
                size,
                record,
            )
        }
        _ => return Err(corrupt("unknown state")),
    };
    let site = match value.first() {
        Some(b'P') => value
            .get(SITE_AT..)
            .filter(|site| !site.is_empty())
            .map(|site| String::from_utf8_lossy(site).into_owned()),
        _ => None,
    };
    let mut info = RecordInfo::new(key, state, fingerprint);
    info.site = site;
    info.age = age;
    info.expires_in = (state != RecordState::Lapsed).then_some(left);
    info.size = size;
    info.record = record;
    Ok(info)
}

/// A tombstone, from its marker (`tombstone.rs`) and the marker's `PTTL`:
/// what is left is the tombstone's; its age is since the record was
/// completed (its TTL and the tombstone, less what is left).
fn tombstone_info(key: RecordKey, pttl: i64, marker: &[u8]) -> Result<RecordInfo, StoreError> {
    let (tombstone, ttl) = (millis_at(marker, 33)?, millis_at(marker, 41)?);
    let left = remaining(pttl);
    let mut info = RecordInfo::new(key, RecordState::Tombstone, fingerprint_at(marker, 1)?);
    info.age = (ttl + tombstone).saturating_sub(left);
    info.expires_in = Some(left);
    Ok(info)
}

/// Since a claim was won, by the claimer's clock.
fn claim_age(value: &[u8]) -> Result<Duration, StoreError> {
    let at = value
        .get(CLAIM_AT..CLAIM_AT + 8)
        .and_then(|at| <[u8; 8]>::try_from(at).ok())
        .ok_or_else(|| corrupt("claim time is not 8 bytes"))?;
    let at = Duration::from_millis(u64::from_be_bytes(at));
    Ok(unix_now().saturating_sub(at))
}

#[async_trait]
impl Admin for RedisStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<RecordInfo>, StoreError> {
        let mut records = self
            .scan_all(|info| {
                let in_progress = info.state == RecordState::InProgress;
                let old = match filter.older_than {
                    None => true,
                    Some(limit) => info.age >= limit,
                };
                (!filter.in_progress || in_progress) && old
            })
            .await?;
        // Oldest first.
        records.sort_by_key(|info| std::cmp::Reverse(info.age));
        if let Some(limit) = filter.limit {
            records.truncate(limit);
        }
        Ok(records)
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let found = self.read(&[self.redis_key(key)], true).await?;
        match found.into_iter().next() {
            Some(info) => Ok(Some(info)),
            None => {
                let marker = (*key, self.tombstone_key(key));
                Ok(self.read_tombstones(&[marker]).await?.into_iter().next())
            }
        }
    }

    /// Nothing to delete: Redis drops a record when its `PX` runs out.
    async fn purge(&self) -> Result<Purged, StoreError> {
        Ok(Purged::default())
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let mut stats = Stats::default();
        for info in self.scan_all(|_| true).await? {
            match info.state {
                RecordState::InProgress => stats.in_progress += 1,
                RecordState::Completed => stats.completed += 1,
                RecordState::Tombstone => stats.tombstones += 1,
                RecordState::Lapsed => stats.lapsed += 1,
                _ => stats.expired += 1,
            }
            stats.bytes += info.size as u64;
        }
        Ok(stats)
    }
}
