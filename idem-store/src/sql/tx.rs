//! The transactional mode of a SQL store, written once: a call whose
//! claim, body and completion run on the caller's transaction. Each store
//! keeps its public `InTransaction` (and its docs) and runs it here.

use std::time::Duration;

use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome, Fence, Retention, Token, async_trait};
use idem_core::{Call, Error, ErrorPolicy, Reconcile, Reported, Store, StoreError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;

use super::dialect::{ClaimBytes, Completion, Dialect, Query};
use crate::answer::{Affected, Answer};

/// Runs `call` with `body` on `conn`, a transaction's connection, the
/// records in `sql`'s table (`InTransaction::run_reported`): the call on a
/// borrowed store, as [`Call::on`] runs it.
pub(crate) async fn run_reported<S, P, R, T, E, F>(
    sql: &S,
    conn: &mut S::Conn,
    call: Call<P, R>,
    body: F,
) -> Reported<Result<T, E>>
where
    S: Dialect,
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
    T: Serialize + DeserializeOwned,
    E: From<Error>,
    P: ErrorPolicy<E>,
    R: Reconcile<T, E>,
    F: AsyncFnOnce(&mut S::Conn) -> Result<T, E>,
{
    let store = TxStore::new(sql, conn);
    let store = &store;
    call.on(store)
        .run_reported(|| async move {
            let mut conn = store.conn.lock().await;
            body(&mut **conn).await
        })
        .await
}

/// A store on one transaction's connection. The body holds the connection
/// while it runs; the protocol's steps take it before and after.
pub(crate) struct TxStore<'a, S: Dialect> {
    sql: &'a S,
    conn: Mutex<&'a mut S::Conn>,
}

impl<'a, S: Dialect> TxStore<'a, S> {
    /// The steps of `sql`'s table on `conn`.
    pub(crate) fn new(sql: &'a S, conn: &'a mut S::Conn) -> Self {
        TxStore {
            sql,
            conn: Mutex::new(conn),
        }
    }

    async fn send<'q, T: Answer<S::Conn, Query<'q, S>>>(
        &self,
        query: Query<'q, S>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().await;
        T::read(query, &mut conn)
            .await
            .map_err(|err| self.sql.store_error(err))
    }
}

/// The answer of a completion in a transaction to being sent again: the
/// failure ended the transaction, so the earlier error stands.
pub(crate) fn not_sent_again(backend: &'static str) -> StoreError {
    StoreError::unsupported(
        backend,
        "a completion inside a transaction is not sent again: the failure ended the transaction",
    )
}

#[async_trait]
impl<S: Dialect> Store for TxStore<'_, S>
where
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
{
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let bytes = ClaimBytes::from(claim);
        // `false`: no transaction of the claim's own, no snapshot read.
        let answer: S::Claimed = self
            .send(self.sql.claim_query(key.as_bytes(), &bytes, false))
            .await?;
        S::claim_outcome(&answer)
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        let token = token.to_bytes();
        let query =
            self.sql
                .complete_query(Completion::Locked, key.as_bytes(), &token, record, kept);
        Ok(self.send::<Affected>(query).await?.fence())
    }

    /// Not sent again: the failure ended the transaction the completion
    /// was in.
    async fn complete_again(
        &self,
        _: &RecordKey,
        _: Token,
        _: &[u8],
        _: Retention,
    ) -> Result<Fence, StoreError> {
        Err(not_sent_again(S::NAMES.0))
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        let token = token.to_bytes();
        let query = self.sql.release_query(true, key.as_bytes(), &token);
        Ok(self.send::<Affected>(query).await?.fence())
    }

    /// Nothing to do: the claim row is locked by this transaction, so no
    /// one can take it over while the transaction lives. (The body holds
    /// the connection, so a renewal could not be sent anyway.)
    async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }

    /// Inside the transaction: the record is gone when it commits.
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        let query = self.sql.forget_query(key.as_bytes());
        self.send::<Affected>(query).await?;
        Ok(())
    }
}
