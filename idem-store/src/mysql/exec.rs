//! Sending one statement for a typed answer (its rows, or how many rows it
//! matched), through `crate::sql::send`.

use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::Fence;
use sqlx::Row;
use sqlx::mysql::{MySqlConnection, MySqlRow};

pub(super) use crate::sql::send::Affected;
use crate::sql::send::{Answer, Sent, Server};

use super::conns::{NAMES, lost_connection};
use super::{BACKEND, MyQuery, MySqlStore};

/// Every row a statement (or the claim procedure) answers.
impl<'q> Answer<MySqlConnection, MyQuery<'q>> for Vec<MySqlRow> {
    fn read<'c>(query: MyQuery<'q>, on: &'c mut MySqlConnection) -> Sent<'c, Self>
    where
        MyQuery<'q>: 'c,
    {
        Box::pin(query.fetch_all(on))
    }
}

impl<'q> Answer<MySqlConnection, MyQuery<'q>> for Affected {
    fn read<'c>(query: MyQuery<'q>, on: &'c mut MySqlConnection) -> Sent<'c, Self>
    where
        MyQuery<'q>: 'c,
    {
        Box::pin(async move { Ok(Affected(query.execute(on).await?.rows_affected())) })
    }
}

impl MySqlStore {
    fn server(&self) -> Server {
        Server {
            names: NAMES,
            response_timeout: self.inner.response_timeout,
            lost_connection,
        }
    }

    /// Sends one statement. `build(again)` makes it; `again` is true when
    /// it is sent a second time after a lost connection.
    pub(super) async fn send<'q, T: Answer<MySqlConnection, MyQuery<'q>>>(
        &self,
        build: impl Fn(bool) -> MyQuery<'q>,
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
        let rows: Vec<MySqlRow> = self.send(|_| sql.live_query(key.as_bytes())).await?;
        let live: i64 = rows
            .first()
            .ok_or_else(|| StoreError::new(BACKEND, "no answer to the count"))?
            .try_get(0)
            .map_err(|err| sql.store_error(err))?;
        Ok(if live > 0 {
            Fence::Lost
        } else {
            Fence::Expired
        })
    }
}
