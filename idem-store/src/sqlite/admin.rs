//! [`Admin`] for [`SqliteStore`]: listing, inspecting, purging and
//! counting records, for `idem` the CLI.

use std::time::Duration;

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::admin::{Admin, ListFilter, Purge, Purged, RecordInfo, RecordState, Stats};
use idem_contract::key::RecordKey;
use idem_contract::store::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{SqliteStore, err, fingerprint, now_ms};

/// The columns every answer reads, `?`-free; the record's bytes last.
macro_rules! columns {
    () => {
        concat!(
            "SELECT key, site, ",
            now_ms!(),
            " - created_at, expires_at - ",
            now_ms!(),
            ", record IS NULL, coalesce(length(record), 0), fingerprint, coalesce(tombstone_until, 0) - ",
            now_ms!()
        )
    };
}

const LIST: &str = concat!(
    columns!(),
    ", NULL FROM idem_records WHERE (?1 = 0 OR (record IS NULL AND expires_at > ",
    now_ms!(),
    ")) AND (?2 IS NULL OR created_at <= ",
    now_ms!(),
    " - ?2) ORDER BY created_at, key LIMIT ?3"
);

const INSPECT: &str = concat!(columns!(), ", record FROM idem_records WHERE key = ?1");

const STATS: &str = concat!(
    "SELECT coalesce(sum(record IS NULL AND expires_at > ",
    now_ms!(),
    "), 0), coalesce(sum(record IS NOT NULL AND expires_at > ",
    now_ms!(),
    "), 0), coalesce(sum(record IS NOT NULL AND expires_at <= ",
    now_ms!(),
    " AND coalesce(tombstone_until, 0) <= ",
    now_ms!(),
    "), 0), coalesce(sum(length(record)), 0), coalesce(sum(expires_at <= ",
    now_ms!(),
    " AND tombstone_until > ",
    now_ms!(),
    "), 0), coalesce(sum(record IS NULL AND expires_at <= ",
    now_ms!(),
    "), 0) FROM idem_records"
);

fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

fn info(row: &SqliteRow) -> Result<RecordInfo, StoreError> {
    let key: Vec<u8> = row.try_get(0).map_err(err)?;
    let key: [u8; 32] = key
        .try_into()
        .map_err(|_| StoreError::new("sqlite", "a stored key is not 32 bytes"))?;
    let age: i64 = row.try_get(2).map_err(err)?;
    let left: i64 = row.try_get(3).map_err(err)?;
    let in_progress: bool = row.try_get(4).map_err(err)?;
    let size: i64 = row.try_get(5).map_err(err)?;
    let tombstone_left: i64 = row.try_get(7).map_err(err)?;
    let record: Option<Vec<u8>> = row.try_get(8).map_err(err)?;
    let state = RecordState::of_row(left > 0, in_progress, tombstone_left > 0);
    let mut info = RecordInfo::new(
        RecordKey::from_bytes(key),
        state,
        fingerprint(row.try_get(6).map_err(err)?)?,
    );
    info.site = row.try_get(1).map_err(err)?;
    info.age = millis(age);
    info.expires_in = match state {
        RecordState::Tombstone => Some(millis(tombstone_left)),
        _ => (left > 0).then(|| millis(left)),
    };
    info.size = size as usize;
    info.record = record.map(Bytes::from);
    Ok(info)
}

#[async_trait]
impl Admin for SqliteStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<RecordInfo>, StoreError> {
        let older_than = filter.older_than.map(super::millis);
        let limit = filter.limit.map_or(-1, |n| n.min(i64::MAX as usize) as i64);
        let rows: Vec<SqliteRow> = self
            .send(
                sqlx::query(LIST)
                    .bind(filter.in_progress)
                    .bind(older_than)
                    .bind(limit),
            )
            .await?;
        rows.iter().map(info).collect()
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let row: Option<SqliteRow> = self
            .send(sqlx::query(INSPECT).bind(&key.as_bytes()[..]))
            .await?;
        row.as_ref().map(info).transpose()
    }

    async fn purge(&self) -> Result<Purged, StoreError> {
        self.purge_counted(&Purge::default()).await
    }

    async fn purge_with(&self, options: &Purge) -> Result<Purged, StoreError> {
        self.purge_counted(options).await
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let row: SqliteRow = self.send(sqlx::query(STATS)).await?;
        let count = |i: usize| -> Result<u64, StoreError> {
            Ok(row.try_get::<i64, _>(i).map_err(err)?.max(0) as u64)
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
}
