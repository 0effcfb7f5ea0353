//! The transactional mode for `#[idempotent]` fns: an `Idempotency` handle
//! whose store is one transaction.

use std::sync::Arc;
use std::time::Duration;

use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome, Fence, Retention, Token, async_trait};
use idem_core::{Idempotency, Store, StoreError};
use sqlx::Postgres;
use sqlx::postgres::PgConnection;
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use super::super::BACKEND;
use super::super::PostgresStore;
use super::super::statements::Sql;
use crate::sql::tx::TxStore;

type Shared = Arc<Mutex<Option<sqlx::Transaction<'static, Postgres>>>>;

/// An [`Idempotency`] handle whose claims and completions run in one
/// database transaction, for `#[idempotent]` fns: pass it as
/// `store = tx` and write the body's effects through
/// [`conn`](TxHandle::conn), so the effects and the record commit or roll
/// back together. Made by [`PostgresStore::tx_handle`]; it derefs to the
/// handle. The same rules as [`PostgresStore::in_transaction`] hold: commit
/// after a success or a replay, roll back after an error; until then the
/// claim row is locked and a concurrent duplicate waits on it.
///
/// Do not hold the [`conn`](TxHandle::conn) guard across a call on the
/// same handle: the call's steps need the connection too.
///
/// ```no_run
/// use idem::idempotent;
/// # use idem::postgres::TxHandle;
/// // use idem::{idempotent, postgres::TxHandle};
///
/// #[idempotent(key = order_id, scope = "orders", store = tx, skip(tx))]
/// async fn place(tx: &TxHandle, order_id: &str) -> Result<i64, idem::Error> {
///     let id: i64 = sqlx::query_scalar("INSERT INTO orders (ref) VALUES ($1) RETURNING id")
///         .bind(order_id)
///         .fetch_one(&mut *tx.conn().await)
///         .await
///         .map_err(|err| idem::Error::Store(idem::StoreError::new("orders", err)))?;
///     Ok(id)
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::PgPool::connect("postgres://app@localhost/app").await?;
/// let store = idem::PostgresStore::from_pool(pool.clone()); // idem::PostgresStore
/// let tx = store.tx_handle(pool.begin().await?);
/// match place(&tx, "order-1").await {
///     // The order row and the record commit together.
///     Ok(id) => tx.commit().await?,
///     // Nothing of this call stays.
///     Err(_) => tx.rollback().await?,
/// }
/// # Ok(()) }
/// ```
pub struct TxHandle {
    idem: Idempotency,
    tx: Shared,
}

impl PostgresStore {
    /// An [`Idempotency`] handle on the caller's transaction `tx` (from
    /// `pool.begin()`), for `#[idempotent(store = …)]`: see [`TxHandle`].
    /// The handle has default settings; the records live in this store's
    /// table.
    ///
    /// ```no_run
    /// # async fn f(store: idem::PostgresStore, pool: sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// let tx = store.tx_handle(pool.begin().await?);
    /// let out: Result<u8, idem::Error> =
    ///     tx.call("demo", "k").run(|| async { Ok(1) }).await;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn tx_handle(&self, tx: sqlx::Transaction<'static, Postgres>) -> TxHandle {
        let tx: Shared = Arc::new(Mutex::new(Some(tx)));
        let store = OwnedTxStore {
            store: self.clone(),
            tx: Arc::clone(&tx),
        };
        TxHandle {
            idem: Idempotency::new(store),
            tx,
        }
    }
}

impl TxHandle {
    /// The transaction's connection, for the body's own writes
    /// (`.execute(&mut *tx.conn().await)`). Held until the guard drops.
    ///
    /// ```no_run
    /// # async fn f(tx: idem::postgres::TxHandle) -> Result<(), sqlx::Error> {
    /// sqlx::query("INSERT INTO audit (event) VALUES ('e')")
    ///     .execute(&mut *tx.conn().await)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn conn(&self) -> MappedMutexGuard<'_, PgConnection> {
        MutexGuard::map(self.tx.lock().await, |tx| {
            // Only `commit` and `rollback` end the transaction, and they
            // take the handle.
            &mut **tx.as_mut().expect("a live TxHandle holds its transaction")
        })
    }

    /// Commits the effects and the records together.
    ///
    /// ```no_run
    /// # async fn f(tx: idem::postgres::TxHandle) -> Result<(), sqlx::Error> {
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self.tx.lock().await.take() {
            Some(tx) => tx.commit().await,
            None => Ok(()),
        }
    }

    /// Rolls back the effects and the claims: a retry runs the body again
    /// at once.
    ///
    /// ```no_run
    /// # async fn f(tx: idem::postgres::TxHandle) -> Result<(), sqlx::Error> {
    /// tx.rollback().await?;
    /// # Ok(()) }
    /// ```
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        match self.tx.lock().await.take() {
            Some(tx) => tx.rollback().await,
            None => Ok(()),
        }
    }
}

impl std::ops::Deref for TxHandle {
    type Target = Idempotency;

    fn deref(&self) -> &Idempotency {
        &self.idem
    }
}

impl std::fmt::Debug for TxHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxHandle").finish_non_exhaustive()
    }
}

/// The store of a [`TxHandle`]: each step borrows the transaction's
/// connection and runs as [`PostgresStore::in_transaction`]'s steps do.
struct OwnedTxStore {
    store: PostgresStore,
    tx: Shared,
}

impl OwnedTxStore {
    async fn on_tx<R>(
        &self,
        step: impl AsyncFnOnce(&TxStore<'_, Sql>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let mut tx = self.tx.lock().await;
        let Some(tx) = tx.as_mut() else {
            return Err(StoreError::misconfigured(
                BACKEND,
                "the TxHandle's transaction has ended (committed or rolled back)",
            ));
        };
        step(&TxStore::new(self.store.statements(), &mut **tx)).await
    }
}

#[async_trait]
impl Store for OwnedTxStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.on_tx(async |store| store.claim(key, claim).await)
            .await
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.on_tx(async |store| store.complete(key, token, record, kept).await)
            .await
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.on_tx(async |store| store.release(key, token).await)
            .await
    }

    /// Nothing to do, as in [`PostgresStore::in_transaction`]: the claim
    /// row is locked by the transaction. (Not locking here also keeps a
    /// renewal from waiting on a body that holds the connection.)
    async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }

    /// Inside the transaction: the record is gone when it commits.
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.on_tx(async |store| store.forget(key).await).await
    }
}
