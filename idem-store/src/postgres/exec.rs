//! Sending one statement for a typed answer (its row, or how many rows it
//! changed): on one connection, or on the store's own connections with the
//! response timeout and one resend after a lost connection.

use std::pin::Pin;

use idem_core::StoreError;
use idem_core::key::RecordKey;
use idem_core::store::Fence;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

use super::BACKEND;
use super::conns::lost_connection;
use super::statements::PgQuery;
use super::{PostgresStore, Source};

/// A statement on its way, boxed: a future in the trait itself would not
/// be provably `Send` inside `#[async_trait]` methods (rust-lang/rust#100013).
pub(super) type Sent<'c, T> = Pin<Box<dyn Future<Output = Result<T, sqlx::Error>> + Send + 'c>>;

/// What a statement is sent for, read from its answer.
pub(super) trait Answer: Sized + Send {
    /// Sends `query` on `on` and reads its answer.
    fn read<'q: 'c, 'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>;
}

/// The one row a statement answers.
impl Answer for PgRow {
    fn read<'q: 'c, 'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self> {
        Box::pin(query.fetch_one(on))
    }
}

/// How many rows a statement changed.
pub(super) struct Affected(pub u64);

impl Affected {
    /// A fenced operation's answer as its statement alone tells it: a row
    /// changed means the claim was ours.
    pub(super) fn fence(&self) -> Fence {
        if self.0 == 0 {
            Fence::Lost
        } else {
            Fence::Held
        }
    }
}

impl Answer for Affected {
    fn read<'q: 'c, 'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self> {
        Box::pin(async move { Ok(Affected(query.execute(on).await?.rows_affected())) })
    }
}

impl PostgresStore {
    /// Sends one statement. `build(again)` makes it; `again` is true when
    /// it is sent a second time after a lost connection.
    pub(super) async fn send<'q, T: Answer>(
        &self,
        build: impl Fn(bool) -> PgQuery<'q>,
    ) -> Result<T, StoreError> {
        let err = |err| self.inner.sql.store_error(err);
        let conns = match &self.inner.conns {
            Source::Pool(pool) => {
                let sent = async {
                    let mut conn = pool.acquire().await?;
                    T::read(build(false), &mut conn).await
                };
                return self.timed(sent).await?.map_err(err);
            }
            Source::Own(conns) => conns,
        };
        let mut leased = conns.acquire().await?;
        // A timeout drops `leased`, closing a connection in an unknown state.
        match self.timed(T::read(build(false), leased.conn())).await? {
            Ok(out) => {
                leased.keep();
                Ok(out)
            }
            // The connection died (an idle one found dead, a backend killed,
            // a server restarted): the steps are safe to repeat, so send it
            // once more on a new connection.
            Err(first) if lost_connection(&first) => {
                drop(leased);
                conns.drop_idle();
                tracing::debug!(error = %first, "idem: a PostgreSQL connection was lost; sending again on a new one");
                let mut leased = conns.acquire().await?;
                let out = self
                    .timed(T::read(build(true), leased.conn()))
                    .await?
                    .map_err(err)?;
                leased.keep();
                Ok(out)
            }
            // The statement failed on a live connection: close it all the
            // same, its state (an aborted transaction?) is not worth
            // reasoning about.
            Err(other) => Err(err(other)),
        }
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

    /// `statement`, failed with `Error::Store` if the server does not
    /// answer within the response timeout.
    pub(super) async fn timed<T>(
        &self,
        statement: impl Future<Output = T>,
    ) -> Result<T, StoreError> {
        let limit = self.inner.response_timeout;
        tokio::time::timeout(limit, statement).await.map_err(|_| {
            StoreError::new(
                BACKEND,
                format!(
                    "PostgreSQL did not answer within {limit:?} (response_timeout): the server is stalled or unreachable; whether the operation took effect is unknown, and its claim, if any, ends with its lease"
                ),
            )
        })
    }
}
