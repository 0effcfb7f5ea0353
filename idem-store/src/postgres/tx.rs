//! The transactional mode: a call whose claim, body and completion run in
//! the caller's transaction (`InTransaction` and its steps written once in
//! `crate::sql::in_transaction` and `crate::sql::tx`).

use idem_core::{Call, Error, ErrorPolicy, NoReconcile, Reconcile, Reported};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::Postgres;
use sqlx::postgres::PgConnection;

use super::PostgresStore;
use super::statements::Sql;

mod handle;
pub use handle::TxHandle;

crate::sql::in_transaction::in_transaction_type!(
    PostgresStore,
    PgConnection,
    "sqlx::Postgres",
    "idem::postgres::InTransaction"
);

impl PostgresStore {
    /// Runs `call` inside the caller's transaction `tx`: the claim, the
    /// body's own writes (the body gets the transaction's connection) and
    /// the completed record commit together or not at all.
    ///
    /// - Commit `tx` after a successful run (or a replay); drop or roll it
    ///   back after an error. If the process dies before the commit, the
    ///   database rolls everything back, the claim included, so a retry
    ///   runs the body again at once, with no lease to wait out.
    /// - Until `tx` ends, its claim row is locked: a concurrent duplicate
    ///   waits on that lock, then replays the committed record or, after a
    ///   rollback, claims the key itself. Keep such transactions short. No
    ///   one can take the claim over while `tx` lives, so the lease plays
    ///   no part: it is neither renewed nor checked at completion.
    /// - Expects READ COMMITTED, PostgreSQL's default. Under REPEATABLE
    ///   READ or SERIALIZABLE a race with another claimer fails as a
    ///   serialization error (`Error::Store`); retry the transaction.
    /// - The handle's local cache is not used: a record is not known to
    ///   exist until the commit.
    /// - The call is run [on](idem_core::Call::on) a store over `tx`, with
    ///   its settings: a [reconcile](idem_core::Call::reconcile) is asked
    ///   on a takeover as anywhere. A [detached](idem_core::Call::detach)
    ///   call is not accepted (its body could outlive the transaction).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pool = sqlx::PgPool::connect("postgres://app@localhost/app").await?;
    /// # let store = idem::PostgresStore::from_pool(pool.clone());
    /// # let idem = idem::Idempotency::new(store.clone());
    /// # let (order_id, sku) = ("order-1", "sku-7");
    /// let mut tx = pool.begin().await?;
    /// let row: Result<i64, idem::Error> = store
    ///     .in_transaction(&mut tx, idem.call("orders", order_id).fingerprint(&sku))
    ///     .run(async |conn| {
    ///         let id: i64 = sqlx::query_scalar("INSERT INTO orders (sku) VALUES ($1) RETURNING id")
    ///             .bind(sku)
    ///             .fetch_one(&mut *conn)
    ///             .await
    ///             .map_err(|err| idem::Error::Store(idem::StoreError::new("orders", err)))?;
    ///         Ok(id)
    ///     })
    ///     .await;
    /// match row {
    ///     // The order row and the record commit together.
    ///     Ok(id) => { tx.commit().await?; println!("order row {id}"); }
    ///     // Nothing of this call stays.
    ///     Err(err) => { tx.rollback().await?; println!("failed: {err}"); }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn in_transaction<'a, P, R>(
        &'a self,
        tx: &'a mut sqlx::Transaction<'_, Postgres>,
        call: Call<P, R>,
    ) -> InTransaction<'a, P, R> {
        InTransaction {
            store: self,
            conn: &mut *tx,
            call,
        }
    }
}

/// The HTTP layer's transactional mode (`IdempotencyLayer::transactional`):
/// a transaction per request, on the store's own connections (`connect`,
/// taken beside `max_connections` while it is open) or from its pool
/// (`from_pool`).
#[idem_core::store::async_trait]
impl idem_core::transaction::Transactional for PostgresStore {
    type Conn = sqlx::postgres::PgConnection;

    async fn begin(
        &self,
    ) -> Result<idem_core::transaction::Begun<Self::Conn>, idem_core::StoreError> {
        crate::sql::request_tx::begin::<Sql>(&self.inner).await
    }
}
