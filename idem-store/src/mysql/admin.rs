//! [`Admin`] for [`MySqlStore`]: listing, inspecting, purging and counting
//! records, for `idem` the CLI. Not on the hot path: the statements are
//! rendered per use.

use idem_contract::StoreError;
use idem_contract::admin::{Admin, ListFilter, Purge, Purged, RecordInfo, Stats};
use idem_contract::key::RecordKey;
use idem_contract::store::async_trait;
use sqlx::Row;
use sqlx::mysql::MySqlRow;

use crate::sql;

use super::MySqlStore;
use super::{BACKEND, NOW, micros};

/// The columns every answer reads; the record's bytes come after them.
/// Every number is cast to `SIGNED` (a `BIGINT`) whatever the server
/// would make of it.
fn columns() -> String {
    format!(
        "`key`, site, CAST(TIMESTAMPDIFF(MICROSECOND, created_at, {NOW}) AS SIGNED), \
         CAST(TIMESTAMPDIFF(MICROSECOND, {NOW}, expires_at) AS SIGNED), \
         CAST(record IS NULL AS SIGNED), CAST(COALESCE(LENGTH(record), 0) AS SIGNED), fingerprint, \
         CAST(COALESCE(TIMESTAMPDIFF(MICROSECOND, {NOW}, tombstone_until), 0) AS SIGNED)"
    )
}

impl MySqlStore {
    /// Checks, changing nothing, that the store's tables are set up at
    /// this release's schema version: a missing table, or one at another
    /// version, is a [`StoreError`] saying so. For tools that must not
    /// change a database (the `idem` CLI never migrates).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let store = idem::MySqlStore::connect("mysql://app@localhost/app").await?;
    /// store.check_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn check_schema(&self) -> Result<(), StoreError> {
        let sql = &self.inner.sql;
        let expected = crate::sql::schema::Expected {
            backend: BACKEND,
            table: &sql.table,
            store: "MySqlStore",
            settings: "the URL's database and --table",
            current: super::migrate::CURRENT,
        };
        // Asked of the catalogue, so a missing table is not an error to parse.
        let found = "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.tables \
                     WHERE table_schema = COALESCE(?, DATABASE()) AND table_name IN (?, ?)";
        let versions_table = format!("{}_migrations", sql.table_name);
        let rows = self
            .inner
            .send::<Vec<MySqlRow>>(|_| {
                sqlx::query(found)
                    .bind(sql.database_name.as_deref())
                    .bind(&sql.table_name)
                    .bind(&versions_table)
            })
            .await?;
        let read = |err| StoreError::new(BACKEND, err);
        let count = |rows: Vec<MySqlRow>| -> Result<i64, StoreError> {
            rows.first()
                .map_or(Ok(0), |row| row.try_get(0).map_err(read))
        };
        if count(rows)? != 2 {
            return Err(expected.missing());
        }
        let versions = format!(
            "SELECT CAST(COALESCE(MAX(version), 0) AS SIGNED) FROM {}",
            sql.versions
        );
        expected.version(count(
            self.inner
                .send::<Vec<MySqlRow>>(|_| sqlx::query(&versions))
                .await?,
        )?)
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
        let query = |_| {
            sqlx::query(&text)
                .bind(filter.in_progress)
                .bind(older_than)
                .bind(older_than)
                .bind(limit)
        };
        self.inner
            .send::<Vec<MySqlRow>>(query)
            .await?
            .iter()
            .map(|row| sql::admin::info(BACKEND, row))
            .collect()
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let text = format!(
            "SELECT {}, record FROM {t} WHERE `key` = ?",
            columns(),
            t = self.inner.sql.table
        );
        let query = |_| sqlx::query(&text).bind(&key.as_bytes()[..]);
        self.inner
            .send::<Vec<MySqlRow>>(query)
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
            "SELECT CAST(COALESCE(SUM(record IS NULL AND expires_at > {NOW}), 0) AS SIGNED), \
             CAST(COALESCE(SUM(record IS NOT NULL AND expires_at > {NOW}), 0) AS SIGNED), \
             CAST(COALESCE(SUM(record IS NOT NULL AND expires_at <= {NOW} AND COALESCE(tombstone_until <= {NOW}, TRUE)), 0) AS SIGNED), \
             CAST(COALESCE(SUM(LENGTH(record)), 0) AS SIGNED), \
             CAST(COALESCE(SUM(expires_at <= {NOW} AND tombstone_until > {NOW}), 0) AS SIGNED), \
             CAST(COALESCE(SUM(record IS NULL AND expires_at <= {NOW}), 0) AS SIGNED) FROM {t}",
            t = self.inner.sql.table
        );
        let rows = self
            .inner
            .send::<Vec<MySqlRow>>(|_| sqlx::query(&text))
            .await?;
        sql::admin::stats(BACKEND, &rows)
    }
}
