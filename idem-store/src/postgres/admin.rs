//! [`Admin`] for [`PostgresStore`]: listing, inspecting, purging and
//! counting records, for `idem` the CLI. Not on the hot path: the
//! statements are rendered per use.

use std::time::Duration;

use bytes::Bytes;
use idem_core::StoreError;
use idem_core::admin::{Admin, ListFilter, Purged, RecordInfo, RecordState, Stats};
use idem_core::fingerprint::Fingerprint;
use idem_core::key::RecordKey;
use idem_core::store::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::BACKEND;
use super::statements::{PgQuery, micros};
use super::{PostgresStore, Source};

/// The columns every answer reads; the record's bytes come after them.
const COLUMNS: &str = "key, site, \
    floor(extract(epoch FROM statement_timestamp() - created_at) * 1000000)::bigint, \
    floor(extract(epoch FROM expires_at - statement_timestamp()) * 1000000)::bigint, \
    record IS NULL, coalesce(octet_length(record), 0)::bigint, fingerprint";

fn micros_to(us: i64) -> Duration {
    Duration::from_micros(us.max(0) as u64)
}

fn corrupt(what: &str) -> StoreError {
    StoreError::new(BACKEND, format!("a stored {what} is not 32 bytes"))
}

fn info(row: &PgRow) -> Result<RecordInfo, StoreError> {
    let read = |err| StoreError::new(BACKEND, err);
    let key: Vec<u8> = row.try_get(0).map_err(read)?;
    let key: [u8; 32] = key.try_into().map_err(|_| corrupt("key"))?;
    let age: i64 = row.try_get(2).map_err(read)?;
    let left: i64 = row.try_get(3).map_err(read)?;
    let in_progress: bool = row.try_get(4).map_err(read)?;
    let size: i64 = row.try_get(5).map_err(read)?;
    let fingerprint: Vec<u8> = row.try_get(6).map_err(read)?;
    let fingerprint: [u8; 32] = fingerprint.try_into().map_err(|_| corrupt("fingerprint"))?;
    let record: Option<Vec<u8>> = row.try_get(7).map_err(read)?;
    let state = RecordState::of(left > 0, in_progress);
    let mut info = RecordInfo::new(
        RecordKey::from_bytes(key),
        state,
        Fingerprint::from_bytes(fingerprint),
    );
    info.site = row.try_get(1).map_err(read)?;
    info.age = micros_to(age);
    info.expires_in = (left > 0).then(|| micros_to(left));
    info.size = size as usize;
    info.record = record.map(Bytes::from);
    Ok(info)
}

impl PostgresStore {
    /// Checks, changing nothing, that the store's table is set up at this
    /// release's schema version: a missing table, or one at another
    /// version, is a [`StoreError`] saying so. For tools that must not
    /// change a database (the `idem` CLI never migrates).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::connect("postgres://app@localhost/app").await?;
    /// store.check_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn check_schema(&self) -> Result<(), StoreError> {
        let sql = &self.inner.sql;
        let text = "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL";
        let rows = self
            .fetch_all(sqlx::query(text).bind(&sql.table).bind(&sql.versions))
            .await?;
        let set_up: bool = rows
            .first()
            .and_then(|row| row.try_get(0).ok())
            .unwrap_or(false);
        if !set_up {
            return Err(StoreError::new(
                BACKEND,
                format!(
                    "no idem table {} here (nothing was changed): check --schema and --table, or run \
                     `PostgresStore::migrate()` from the application first",
                    sql.table
                ),
            ));
        }
        let versions = format!("SELECT coalesce(max(version), 0) FROM {}", sql.versions);
        let rows = self.fetch_all(sqlx::query(&versions)).await?;
        let version: i32 = rows
            .first()
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(|err| StoreError::new(BACKEND, err))?
            .unwrap_or(0);
        let current = super::migrate::CURRENT;
        if version == current {
            return Ok(());
        }
        Err(StoreError::new(
            BACKEND,
            format!(
                "the table {} is at schema version {version}, this release reads {current} \
                 (nothing was changed; {})",
                sql.table,
                if version < current {
                    "`PostgresStore::migrate()` upgrades it"
                } else {
                    "use the release that wrote it"
                }
            ),
        ))
    }

    /// Every row `query` answers, on one of the store's connections.
    async fn fetch_all(&self, query: PgQuery<'_>) -> Result<Vec<PgRow>, StoreError> {
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
impl Admin for PostgresStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<RecordInfo>, StoreError> {
        let text = format!(
            "SELECT {COLUMNS}, NULL::bytea FROM {t} \
             WHERE (NOT $1 OR (record IS NULL AND expires_at > statement_timestamp())) \
             AND ($2::bigint IS NULL OR created_at <= statement_timestamp() - $2 * interval '1 microsecond') \
             ORDER BY created_at, key LIMIT $3",
            t = self.inner.sql.table
        );
        let limit = filter.limit.map(|n| n.min(i64::MAX as usize) as i64);
        let query = sqlx::query(&text)
            .bind(filter.in_progress)
            .bind(filter.older_than.map(micros))
            .bind(limit);
        self.fetch_all(query).await?.iter().map(info).collect()
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let text = format!(
            "SELECT {COLUMNS}, record FROM {t} WHERE key = $1",
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
            "SELECT count(*) FILTER (WHERE record IS NULL AND expires_at > statement_timestamp()), \
             count(*) FILTER (WHERE record IS NOT NULL AND expires_at > statement_timestamp()), \
             count(*) FILTER (WHERE expires_at <= statement_timestamp()), \
             coalesce(sum(octet_length(record)), 0)::bigint FROM {t}",
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
