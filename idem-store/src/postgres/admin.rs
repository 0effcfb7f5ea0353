//! [`Admin`] for [`PostgresStore`]: listing, inspecting, purging and
//! counting records, for `idem` the CLI. Not on the hot path: the
//! statements are rendered per use.

use idem_contract::StoreError;
use idem_contract::admin::{Admin, ListFilter, Purge, Purged, RecordInfo, Stats};
use idem_contract::key::RecordKey;
use idem_contract::store::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::sql;

use super::BACKEND;
use super::PostgresStore;
use crate::sql::dialect::micros;

/// The columns every answer reads; the record's bytes come after them.
const COLUMNS: &str = "key, site, \
    floor(extract(epoch FROM statement_timestamp() - created_at) * 1000000)::bigint, \
    floor(extract(epoch FROM expires_at - statement_timestamp()) * 1000000)::bigint, \
    record IS NULL, coalesce(octet_length(record), 0)::bigint, fingerprint, \
    floor(extract(epoch FROM tombstone_until - statement_timestamp()) * 1000000)::bigint";

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
            .inner
            .send::<Vec<PgRow>>(|_| sqlx::query(text).bind(&sql.table).bind(&sql.versions))
            .await?;
        let set_up: bool = rows
            .first()
            .and_then(|row| row.try_get(0).ok())
            .unwrap_or(false);
        let expected = crate::sql::schema::Expected {
            backend: BACKEND,
            table: &sql.table,
            store: "PostgresStore",
            settings: "--schema and --table",
            current: i64::from(super::migrate::CURRENT),
        };
        if !set_up {
            return Err(expected.missing());
        }
        let versions = format!("SELECT coalesce(max(version), 0) FROM {}", sql.versions);
        let rows = self
            .inner
            .send::<Vec<PgRow>>(|_| sqlx::query(&versions))
            .await?;
        let version: i32 = rows
            .first()
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(|err| StoreError::new(BACKEND, err))?
            .unwrap_or(0);
        expected.version(i64::from(version))
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
        let query = |_| {
            sqlx::query(&text)
                .bind(filter.in_progress)
                .bind(filter.older_than.map(micros))
                .bind(limit)
        };
        self.inner
            .send::<Vec<PgRow>>(query)
            .await?
            .iter()
            .map(|row| sql::admin::info(BACKEND, row))
            .collect()
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let text = format!(
            "SELECT {COLUMNS}, record FROM {t} WHERE key = $1",
            t = self.inner.sql.table
        );
        let query = |_| sqlx::query(&text).bind(&key.as_bytes()[..]);
        self.inner
            .send::<Vec<PgRow>>(query)
            .await?
            .first()
            .map(|row| sql::admin::info(BACKEND, row))
            .transpose()
    }

    async fn purge(&self) -> Result<Purged, StoreError> {
        self.inner.purge(&self.inner.default_purge()).await
    }

    async fn purge_with(&self, options: &Purge) -> Result<Purged, StoreError> {
        self.inner.purge(options).await
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let text = format!(
            "SELECT count(*) FILTER (WHERE record IS NULL AND expires_at > statement_timestamp()), \
             count(*) FILTER (WHERE record IS NOT NULL AND expires_at > statement_timestamp()), \
             count(*) FILTER (WHERE record IS NOT NULL AND expires_at <= statement_timestamp() \
                 AND (tombstone_until IS NULL OR tombstone_until <= statement_timestamp())), \
             coalesce(sum(octet_length(record)), 0)::bigint, \
             count(*) FILTER (WHERE expires_at <= statement_timestamp() \
                 AND tombstone_until > statement_timestamp()), \
             count(*) FILTER (WHERE record IS NULL AND expires_at <= statement_timestamp()) FROM {t}",
            t = self.inner.sql.table
        );
        let rows = self
            .inner
            .send::<Vec<PgRow>>(|_| sqlx::query(&text))
            .await?;
        sql::admin::stats(BACKEND, &rows)
    }
}
