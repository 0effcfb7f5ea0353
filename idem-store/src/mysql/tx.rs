//! The transactional mode: a call whose claim, body and completion run in
//! the caller's transaction (`InTransaction` and its steps written once in
//! `crate::sql::in_transaction` and `crate::sql::tx`).

use idem_core::{Call, Error, ErrorPolicy, NoReconcile, Reconcile, Reported};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::MySqlStore;
use super::statements::Sql;

mod handle;
pub use handle::TxHandle;

crate::sql::in_transaction::in_transaction_type!(
    MySqlStore,
    MySqlConnection,
    "sqlx::MySql",
    "idem::mysql::InTransaction"
);

impl MySqlStore {
    /// Runs `call` inside the caller's transaction `tx`: the claim, the
    /// body's own writes (the body gets the transaction's connection) and
    /// the completed record commit together or not at all.
    ///
    /// - Commit `tx` after a successful run (or a replay); drop or roll it
    ///   back after an error. If the process dies before the commit, the
    ///   server rolls everything back, the claim included, so a retry runs
    ///   the body again at once, with no lease to wait out.
    /// - Until `tx` ends, its claim row is locked: a concurrent duplicate
    ///   waits on that lock (within its response timeout), then replays
    ///   the committed record or, after a rollback, claims the key itself.
    ///   Keep such transactions short. No one can take the claim over
    ///   while `tx` lives, so the lease is neither renewed nor checked at
    ///   completion.
    /// - Works under REPEATABLE READ (InnoDB's default) and READ
    ///   COMMITTED: the claim reads with a locking read, never the
    ///   transaction's snapshot. When the key's row already exists (a
    ///   replay, a takeover), InnoDB's duplicate-key check locks the gap
    ///   before that row too, until `tx` ends; a claim of another key
    ///   falling in that gap waits, and two such transactions can deadlock:
    ///   the victim's transaction is rolled back and its call is
    ///   `Error::Store`; retry the transaction.
    /// - Steps ([`idem::step`](idem_core::step)) are not kept in this mode,
    ///   and the handle's local cache is not used: a record is not known
    ///   to exist until the commit.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pool = sqlx::MySqlPool::connect("mysql://app@localhost/app").await?;
    /// # let store = idem::MySqlStore::from_pool(pool.clone());
    /// # let idem = idem::Idempotency::new(store.clone());
    /// # let (order_id, sku) = ("order-1", "sku-7");
    /// let mut tx = pool.begin().await?;
    /// let row: Result<u64, idem::Error> = store
    ///     .in_transaction(&mut tx, idem.call("orders", order_id).fingerprint(&sku))
    ///     .run(async |conn| {
    ///         let done = sqlx::query("INSERT INTO orders (sku) VALUES (?)")
    ///             .bind(sku)
    ///             .execute(&mut *conn)
    ///             .await
    ///             .map_err(|err| idem::Error::Store(idem::StoreError::new("orders", err)))?;
    ///         Ok(done.last_insert_id())
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
        tx: &'a mut sqlx::Transaction<'_, MySql>,
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
impl idem_core::transaction::Transactional for MySqlStore {
    type Conn = sqlx::mysql::MySqlConnection;

    async fn begin(
        &self,
    ) -> Result<idem_core::transaction::Begun<Self::Conn>, idem_core::StoreError> {
        crate::sql::request_tx::begin::<Sql>(&self.inner).await
    }
}
