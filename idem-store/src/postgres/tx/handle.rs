//! The transactional mode for `#[idempotent]` fns: an `Idempotency` handle
//! whose store is one transaction (written once in `crate::sql::tx_handle`).

use idem_core::Idempotency;
use sqlx::Postgres;
use sqlx::postgres::PgConnection;

use super::super::PostgresStore;
use super::super::statements::Sql;
use crate::sql::tx_handle::{SharedTx, tx_handle_methods};

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
pub struct TxHandle(SharedTx<Sql>);

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
        TxHandle(SharedTx::<Sql>::new(&self.inner, tx))
    }
}

tx_handle_methods!(PgConnection, "idem::postgres::TxHandle");
