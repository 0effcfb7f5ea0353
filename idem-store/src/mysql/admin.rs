//! [`Admin`] for [`MySqlStore`]: listing, inspecting, purging and counting
//! records, for `idem` the CLI. Not on the hot path: the statements are
//! rendered per use.

use std::time::Duration;

use bytes::Bytes;
use idem_core::StoreError;
use idem_core::admin::{Admin, ListFilter, Purged, RecordInfo, RecordState, Stats};
use idem_core::fingerprint::Fingerprint;
use idem_core::key::RecordKey;
use idem_core::store::async_trait;
use sqlx::Row;
use sqlx::mysql::MySqlRow;

use super::{BACKEND, MyQuery, NOW, micros};
use super::{MySqlStore, Source};

/// The columns every answer reads; the record's bytes come after them.
/// Every number is cast to `SIGNED` (a `BIGINT`) whatever the server
/// would make of it.
fn columns() -> String {
    format!(
        "`key`, site, CAST(TIMESTAMPDIFF(MICROSECOND, created_at, {NOW}) AS SIGNED), \
         CAST(TIMESTAMPDIFF(MICROSECOND, {NOW}, expires_at) AS SIGNED), \
         CAST(record IS NULL AS SIGNED), CAST(COALESCE(LENGTH(record), 0) AS SIGNED), fingerprint"
    )
}

fn micros_to(us: i64) -> Duration {
    Duration::from_micros(us.max(0) as u64)
}

fn corrupt(what: &str) -> StoreError {
    StoreError::new(BACKEND, format!("a stored {what} is not 32 bytes"))
}

fn info(row: &MySqlRow) -> Result<RecordInfo, StoreError> {
    let read = |err| StoreError::new(BACKEND, err);
    let key: Vec<u8> = row.try_get(0).map_err(read)?;
    let key: [u8; 32] = key.try_into().map_err(|_| corrupt("key"))?;
    let age: i64 = row.try_get(2).map_err(read)?;
    let left: i64 = row.try_get(3).map_err(read)?;
    let in_progress: i64 = row.try_get(4).map_err(read)?;
    let size: i64 = row.try_get(5).map_err(read)?;
    let fingerprint: Vec<u8> = row.try_get(6).map_err(read)?;
    let fingerprint: [u8; 32] = fingerprint.try_into().map_err(|_| corrupt("fingerprint"))?;
    let record: Option<Vec<u8>> = row.try_get(7).map_err(read)?;
    let mut info = RecordInfo::new(
        RecordKey::from_bytes(key),
        RecordState::of(left > 0, in_progress != 0),
        Fingerprint::from_bytes(fingerprint),
    );
    info.site = row.try_get(1).map_err(read)?;
    info.age = micros_to(age);
    info.expires_in = (left > 0).then(|| micros_to(left));
    info.size = size as usize;
    info.record = record.map(Bytes::from);
    Ok(info)
}

impl MySqlStore {
    /// Every row `query` answers, on one of the store's connections.
    async fn fetch_all(&self, query: MyQuery<'_>) -> Result<Vec<MySqlRow>, StoreError> {
        let err = |err| self.inner.sql.store_error(err);
        match &self.inner.conns {
            Source::Pool(pool) => self.timed(query.fetch_all(pool)).await?.map_err(err),
            Source::Own(conns) => {
                let mut leased = conns.acquire().await?;
                let rows = self
                    .timed(query.fetch_all(leased.conn()))
                    .await?
                    .map_err(err)?;
                leased.keep();
                Ok(rows)
            }
        }
    }
}

#[async_trait]
impl Admin for MySqlStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<RecordInfo>, StoreError> {
        let text = format!(
            "SELECT {}, NULL FROM {t} \
             WHERE (? = 0 OR (record IS NULL AND expires_at > {NOW})) \
             AND (? IS NULL OR created_at <= {NOW} - INTERVAL ? MICROSECOND) \
             ORDER BY created_at, `key` LIMIT ?",
            columns(),
            t = self.inner.sql.table
        );
        let older_than = filter.older_than.map(micros);
        let limit = filter
            .limit
            .map_or(i64::MAX, |n| n.min(i64::MAX as usize) as i64);
        let query = sqlx::query(&text)
            .bind(filter.in_progress)
            .bind(older_than)
            .bind(older_than)
            .bind(limit);
        self.fetch_all(query).await?.iter().map(info).collect()
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let text = format!(
            "SELECT {}, record FROM {t} WHERE `key` = ?",
            columns(),
            t = self.inner.sql.table
        );
        let query = sqlx::query(&text).bind(&key.as_bytes()[..]);
        self.fetch_all(query).await?.first().map(info).transpose()
    }

    async fn purge(&self) -> Result<Purged, StoreError> {
        self.purge_counted().await
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let text = format!(
            "SELECT CAST(COALESCE(SUM(record IS NULL AND expires_at > {NOW}), 0) AS SIGNED), \
             CAST(COALESCE(SUM(record IS NOT NULL AND expires_at > {NOW}), 0) AS SIGNED), \
             CAST(COALESCE(SUM(expires_at <= {NOW}), 0) AS SIGNED), \
             CAST(COALESCE(SUM(LENGTH(record)), 0) AS SIGNED) FROM {t}",
            t = self.inner.sql.table
        );
        let rows = self.fetch_all(sqlx::query(&text)).await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::new(BACKEND, "no answer to the count"))?;
        let count = |i: usize| -> Result<u64, StoreError> {
            let n: i64 = row
                .try_get(i)
                .map_err(|err| StoreError::new(BACKEND, err))?;
            Ok(n.max(0) as u64)
        };
        let mut stats = Stats::default();
        stats.in_progress = count(0)?;
        stats.completed = count(1)?;
        stats.expired = count(2)?;
        stats.bytes = count(3)?;
        Ok(stats)
    }
}
