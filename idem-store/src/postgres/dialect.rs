//! [`Dialect`] for PostgreSQL: how `PostgresStore`'s statements bind a
//! step's values (numbered parameters, `$1` the key, `$2` the token), how
//! its answers read, and which failures mean what.

use std::time::Duration;

use idem_contract::StoreError;
use idem_contract::store::{ClaimOutcome, Retention};
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::{Executor, Row};

use crate::answer::Sent;
use crate::sql::claimed;
use crate::sql::dialect::{ClaimBytes, Completion, Dialect, Purge, StepSave, micros};

use super::statements::Sql;
use super::{BACKEND, conns, rows};

/// A statement with its parameters bound (`Query<'q, Sql>`, spelled out).
pub(super) type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

impl Dialect for Sql {
    type Db = sqlx::Postgres;
    type Conn = PgConnection;
    type Claimed = PgRow;
    type Live = PgRow;
    type Found = Option<PgRow>;

    const NAMES: (&'static str, &'static str) = conns::NAMES;
    const BEGIN_FOR_HANDLER: &'static str = "BEGIN; SET LOCAL statement_timeout = 0";

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

    /// A failed statement as a store error; a missing table or claim
    /// function (SQLSTATE 42P01, 42883, 3F000) says to run the migration.
    fn store_error(&self, err: sqlx::Error) -> StoreError {
        let code = err.as_database_error().and_then(|db| db.code());
        if matches!(code.as_deref(), Some("42P01" | "42883" | "3F000")) {
            return StoreError::misconfigured(
                BACKEND,
                format!(
                    "{err}: the table {} is not set up; call `PostgresStore::migrate()` once at startup (it is idempotent and safe to run from every replica)",
                    self.table
                ),
            );
        }
        StoreError::new(BACKEND, err)
    }

    /// The claim function runs in the statement's transaction either way.
    fn claim_query<'q>(&'q self, key: &'q [u8], claim: &'q ClaimBytes, _: bool) -> PgQuery<'q> {
        sqlx::query(&self.claim)
            .bind(key)
            .bind(&claim.token[..])
            .bind(&claim.fingerprint[..])
            .bind(claim.lease_us)
            .bind(claim.site)
            .bind(claim.rerun)
    }

    fn completed_query<'q>(&'q self, key: &'q [u8]) -> PgQuery<'q> {
        sqlx::query(&self.completed).bind(key)
    }

    fn complete_query<'q>(
        &'q self,
        how: Completion,
        key: &'q [u8],
        token: &'q [u8],
        record: &'q [u8],
        kept: Retention,
    ) -> PgQuery<'q> {
        let text = match how {
            Completion::Held => &self.complete,
            Completion::Again => &self.complete_again,
            Completion::Locked => &self.complete_locked,
        };
        sqlx::query(text)
            .bind(key)
            .bind(token)
            .bind(record)
            .bind(micros(kept.ttl))
            .bind(kept.tombstone.map(|_| micros(kept.kept_for())))
    }

    fn release_query<'q>(&'q self, locked: bool, key: &'q [u8], token: &'q [u8]) -> PgQuery<'q> {
        let text = if locked {
            &self.release_locked
        } else {
            &self.release
        };
        sqlx::query(text).bind(key).bind(token)
    }

    fn renew_query<'q>(&'q self, key: &'q [u8], token: &'q [u8], lease: Duration) -> PgQuery<'q> {
        sqlx::query(&self.renew)
            .bind(key)
            .bind(token)
            .bind(micros(lease))
    }

    fn save_step_query<'q>(&'q self, save: StepSave<'q>) -> PgQuery<'q> {
        sqlx::query(&self.steps.save)
            .bind(save.key)
            .bind(save.token)
            .bind(save.step)
            .bind(save.value)
            .bind(micros(save.ttl))
    }

    fn live_query<'q>(&'q self, key: &'q [u8]) -> PgQuery<'q> {
        sqlx::query(&self.live).bind(key)
    }

    fn forget_query<'q>(&'q self, key: &'q [u8]) -> PgQuery<'q> {
        sqlx::query(&self.forget).bind(key)
    }

    fn purge_query(&self, purge: Purge, batch: i64) -> PgQuery<'_> {
        let text = match purge {
            Purge::Records => &self.purge,
            Purge::Tombstones => &self.compact,
            Purge::Steps => &self.steps.purge,
        };
        sqlx::query(text).bind(batch)
    }

    fn completed_outcome(row: &Option<PgRow>) -> Result<Option<ClaimOutcome>, StoreError> {
        claimed::completed(row.as_ref()).map_err(|err| StoreError::new(BACKEND, err))
    }

    fn claim_outcome(row: &PgRow) -> Result<ClaimOutcome, StoreError> {
        rows::claim_outcome(row)
    }

    /// `SELECT EXISTS (…)`: one boolean.
    fn is_live(&self, row: &PgRow) -> Result<bool, StoreError> {
        row.try_get(0).map_err(|err| self.store_error(err))
    }
}
