//! Reading the rows of the SQL stores' admin queries (`list`, `inspect`,
//! `stats`), whatever the database: each store renders its own SQL, in
//! the column order these functions read.

use std::time::Duration;

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::admin::{RecordInfo, RecordState, Stats};
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use sqlx::{ColumnIndex, Decode, Row, Type};

fn micros_to(us: i64) -> Duration {
    Duration::from_micros(us.max(0) as u64)
}

/// A record's row: key, site, age and time left in microseconds (by the
/// server's clock), in progress, size, fingerprint, the tombstone's time
/// left in microseconds (NULL or not positive: none), then the record's
/// bytes (NULL where not asked for).
pub(crate) fn info<'r, R>(backend: &'static str, row: &'r R) -> Result<RecordInfo, StoreError>
where
    R: Row,
    usize: ColumnIndex<R>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let read = |err| StoreError::new(backend, err);
    let corrupt = |what: &str| StoreError::new(backend, format!("a stored {what} is not 32 bytes"));
    let key: Vec<u8> = row.try_get(0).map_err(read)?;
    let key: [u8; 32] = key.try_into().map_err(|_| corrupt("key"))?;
    let age: i64 = row.try_get(2).map_err(read)?;
    let left: i64 = row.try_get(3).map_err(read)?;
    let in_progress: bool = row.try_get(4).map_err(read)?;
    let size: i64 = row.try_get(5).map_err(read)?;
    let fingerprint: Vec<u8> = row.try_get(6).map_err(read)?;
    let fingerprint: [u8; 32] = fingerprint.try_into().map_err(|_| corrupt("fingerprint"))?;
    let tombstone_left: Option<i64> = row.try_get(7).map_err(read)?;
    let tombstone_left = tombstone_left.unwrap_or(0);
    let record: Option<Vec<u8>> = row.try_get(8).map_err(read)?;
    let state = RecordState::of_row(left > 0, in_progress, tombstone_left > 0);
    let mut info = RecordInfo::new(
        RecordKey::from_bytes(key),
        state,
        Fingerprint::from_bytes(fingerprint),
    );
    info.site = row.try_get(1).map_err(read)?;
    info.age = micros_to(age);
    info.expires_in = match state {
        RecordState::Tombstone => Some(micros_to(tombstone_left)),
        _ => (left > 0).then(|| micros_to(left)),
    };
    info.size = size as usize;
    info.record = record.map(Bytes::from);
    Ok(info)
}

/// The count's row: in progress, completed, expired (results only),
/// stored bytes, tombstones, lapsed (claims whose lease ran out).
pub(crate) fn stats<'r, R>(backend: &'static str, rows: &'r [R]) -> Result<Stats, StoreError>
where
    R: Row,
    usize: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let row = rows
        .first()
        .ok_or_else(|| StoreError::new(backend, "no answer to the count"))?;
    let count = |i: usize| -> Result<u64, StoreError> {
        let n: i64 = row
            .try_get(i)
            .map_err(|err| StoreError::new(backend, err))?;
        Ok(n.max(0) as u64)
    };
    let mut stats = Stats::default();
    stats.in_progress = count(0)?;
    stats.completed = count(1)?;
    stats.expired = count(2)?;
    stats.bytes = count(3)?;
    stats.tombstones = count(4)?;
    stats.lapsed = count(5)?;
    Ok(stats)
}
