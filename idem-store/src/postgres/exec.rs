//! Sending one statement for a typed answer (its row or rows, or how many
//! rows it changed), through `crate::sql::send`.

use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::Fence;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

pub(super) use crate::sql::send::Affected;
use crate::sql::send::{Answer, Sent, Server};

use super::PostgresStore;
use super::conns::{NAMES, lost_connection};
use super::statements::PgQuery;

/// The one row a statement answers.
impl<'q> Answer<PgConnection, PgQuery<'q>> for PgRow {
    fn read<'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>
    where
        PgQuery<'q>: 'c,
    {
        Box::pin(query.fetch_one(on))
    }
}

/// Every row a statement answers.
impl<'q> Answer<PgConnection, PgQuery<'q>> for Vec<PgRow> {
    fn read<'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>
    where
        PgQuery<'q>: 'c,
    {
        Box::pin(query.fetch_all(on))
    }
}

impl<'q> Answer<PgConnection, PgQuery<'q>> for Affected {
    fn read<'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>
    where
        PgQuery<'q>: 'c,
    {
        Box::pin(async move { Ok(Affected(query.execute(on).await?.rows_affected())) })
    }
}

impl PostgresStore {
    fn server(&self) -> Server {
        Server {
            names: NAMES,
            response_timeout: self.inner.response_timeout,
            lost_connection,
        }
    }

    /// Sends one statement. `build(again)` makes it; `again` is true when
    /// it is sent a second time after a lost connection.
    pub(super) async fn send<'q, T: Answer<PgConnection, PgQuery<'q>>>(
        &self,
        build: impl Fn(bool) -> PgQuery<'q>,
    ) -> Result<T, StoreError> {
        let err = |err| self.inner.sql.store_error(err);
        self.inner.conns.send(&self.server(), build, err).await
    }

    /// A fenced operation's answer. When it found no claim of ours, one more
    /// statement (on that rare path only) tells a takeover from an expiry.
    pub(super) async fn fence(
        &self,
        changed: Affected,
        key: &RecordKey,
    ) -> Result<Fence, StoreError> {
        if changed.fence().is_held() {
            return Ok(Fence::Held);
        }
        let sql = &self.inner.sql;
        let row: PgRow = self.send(|_| sql.live_query(key.as_bytes())).await?;
        let live: bool = row.try_get(0).map_err(|err| sql.store_error(err))?;
        Ok(if live { Fence::Lost } else { Fence::Expired })
    }
}
