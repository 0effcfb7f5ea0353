//! [`Dialect`] for MySQL and MariaDB: how `MySqlStore`'s statements bind a
//! step's values (`?` by position, so a value used twice is bound twice),
//! how its answers read, and which failures mean what.

use std::time::Duration;

use idem_contract::StoreError;
use idem_contract::store::{ClaimOutcome, Retention};
use sqlx::mysql::{MySqlConnection, MySqlRow};
use sqlx::{Executor, Row};

use crate::answer::Sent;
use crate::sql::claimed;
use crate::sql::dialect::{ClaimBytes, Completion, Dialect, Purge, StepSave, micros};

use super::statements::Sql;
use super::{BACKEND, MyQuery, conns, rows};

impl Dialect for Sql {
    type Db = sqlx::MySql;
    type Conn = MySqlConnection;
    type Claimed = Vec<MySqlRow>;
    type Live = Vec<MySqlRow>;
    type Found = Option<MySqlRow>;

    const NAMES: (&'static str, &'static str) = conns::NAMES;
    const BEGIN_FOR_HANDLER: &'static str = conns::BEGIN_FOR_HANDLER;
    const COMMIT_FOR_HANDLER: &'static str = conns::COMMIT_FOR_HANDLER;
    const ROLLBACK_FOR_HANDLER: &'static str = conns::ROLLBACK_FOR_HANDLER;

    fn lost_connection(err: &sqlx::Error) -> bool {
        conns::lost_connection(err)
    }

    fn rolled_back(err: &sqlx::Error) -> bool {
        conns::rolled_back(err)
    }

    fn begin_pooled(pool: &sqlx::Pool<Self::Db>) -> Sent<'_, sqlx::Transaction<'static, Self::Db>> {
        Box::pin(pool.begin())
    }

    fn send_raw<'c>(conn: &'c mut Self::Conn, text: &'static str) -> Sent<'c, ()> {
        Box::pin(async move { conn.execute(sqlx::raw_sql(text)).await.map(drop) })
    }

    /// A failed statement as a store error; a missing table or procedure
    /// (errors 1146, 1305) says to run the migration.
    fn store_error(&self, err: sqlx::Error) -> StoreError {
        let number = err
            .as_database_error()
            .and_then(|db| db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
            .map(|db| db.number());
        if matches!(number, Some(1146 | 1305)) {
            return StoreError::misconfigured(
                BACKEND,
                format!(
                    "{err}: the table {} is not set up; call `MySqlStore::migrate()` once at startup (it is idempotent and safe to run from every replica)",
                    self.table
                ),
            );
        }
        StoreError::new(BACKEND, err)
    }

    /// `own_tx` false: no transaction of the procedure's own.
    fn claim_query<'q>(
        &'q self,
        key: &'q [u8],
        claim: &'q ClaimBytes,
        own_tx: bool,
    ) -> MyQuery<'q> {
        sqlx::query(&self.claim)
            .bind(key)
            .bind(&claim.token[..])
            .bind(&claim.fingerprint[..])
            .bind(claim.lease_us)
            .bind(claim.site)
            .bind(own_tx)
            .bind(claim.rerun)
    }

    fn completed_query<'q>(&'q self, key: &'q [u8]) -> MyQuery<'q> {
        sqlx::query(&self.completed).bind(key)
    }

    fn complete_query<'q>(
        &'q self,
        how: Completion,
        key: &'q [u8],
        token: &'q [u8],
        record: &'q [u8],
        kept: Retention,
    ) -> MyQuery<'q> {
        let text = match how {
            Completion::Held => &self.complete,
            Completion::Again => &self.complete_again,
            Completion::Locked => &self.complete_locked,
        };
        let query = sqlx::query(text)
            .bind(record)
            .bind(micros(kept.ttl))
            .bind(kept.tombstone.map(|_| micros(kept.kept_for())))
            .bind(key)
            .bind(token);
        match how {
            Completion::Again => query.bind(record),
            Completion::Held | Completion::Locked => query,
        }
    }

    fn release_query<'q>(&'q self, locked: bool, key: &'q [u8], token: &'q [u8]) -> MyQuery<'q> {
        let text = if locked {
            &self.release_locked
        } else {
            &self.release
        };
        sqlx::query(text).bind(key).bind(token)
    }

    fn renew_query<'q>(&'q self, key: &'q [u8], token: &'q [u8], lease: Duration) -> MyQuery<'q> {
        sqlx::query(&self.renew)
            .bind(micros(lease))
            .bind(key)
            .bind(token)
    }

    fn save_step_query<'q>(&'q self, save: StepSave<'q>) -> MyQuery<'q> {
        let ttl = micros(save.ttl);
        sqlx::query(&self.steps.save)
            .bind(save.step)
            .bind(save.value)
            .bind(ttl)
            .bind(save.key)
            .bind(save.token)
            .bind(save.value)
            .bind(ttl)
    }

    fn live_query<'q>(&'q self, key: &'q [u8]) -> MyQuery<'q> {
        sqlx::query(&self.live).bind(key)
    }

    fn forget_query<'q>(&'q self, key: &'q [u8]) -> MyQuery<'q> {
        sqlx::query(&self.forget).bind(key)
    }

    fn purge_query(&self, purge: Purge, batch: i64) -> MyQuery<'_> {
        let text = match purge {
            Purge::Records => &self.purge,
            Purge::Tombstones => &self.compact,
            Purge::Steps => &self.steps.purge,
        };
        sqlx::query(text).bind(batch)
    }

    fn completed_outcome(row: &Option<MySqlRow>) -> Result<Option<ClaimOutcome>, StoreError> {
        claimed::completed(row.as_ref()).map_err(|err| StoreError::new(BACKEND, err))
    }

    fn claim_outcome(rows: &Vec<MySqlRow>) -> Result<ClaimOutcome, StoreError> {
        rows::claim_outcome(rows)
    }

    /// `SELECT COUNT(*)`: one row, one count.
    fn is_live(&self, rows: &Vec<MySqlRow>) -> Result<bool, StoreError> {
        let live: i64 = rows
            .first()
            .ok_or_else(|| StoreError::new(BACKEND, "no answer to the count"))?
            .try_get(0)
            .map_err(|err| self.store_error(err))?;
        Ok(live > 0)
    }
}
