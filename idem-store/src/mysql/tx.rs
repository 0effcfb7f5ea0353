//! The transactional mode: a call whose claim, body and completion run in
//! the caller's transaction (its steps in `crate::sql::tx`).

use idem_core::{Call, Error, ErrorPolicy, NoReconcile, Reconcile, Reported};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::MySqlStore;
use super::statements::Sql;

mod handle;
pub use handle::TxHandle;

/// A call that will run inside a database transaction. Made by
/// [`MySqlStore::in_transaction`]; run by [`run`](InTransaction::run).
///
/// ```no_run
/// # async fn f(store: idem::MySqlStore, idem: idem::Idempotency, mut tx: sqlx::Transaction<'_, sqlx::MySql>) {
/// let call: idem::mysql::InTransaction<'_, _> =
///     store.in_transaction(&mut tx, idem.call("orders", "order-1"));
/// let out: Result<u8, idem::Error> = call.run(async |_conn| Ok(1)).await;
/// # }
/// ```
#[must_use = "a call does nothing until `.run(…)` is awaited"]
pub struct InTransaction<'a, P, R = NoReconcile> {
    store: &'a MySqlStore,
    conn: &'a mut MySqlConnection,
    call: Call<P, R>,
}

/// The store and the call; not the connection.
impl<P, R> std::fmt::Debug for InTransaction<'_, P, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InTransaction")
            .field("store", self.store)
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}

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

impl<P, R> InTransaction<'_, P, R> {
    /// Runs `body` with the transaction's connection if this call wins the
    /// claim; otherwise replays the stored result or reports why not, as
    /// [`Call::run`] does.
    ///
    /// ```no_run
    /// # async fn f(store: idem::MySqlStore, idem: idem::Idempotency, mut tx: sqlx::Transaction<'_, sqlx::MySql>) -> Result<(), idem::Error> {
    /// let n: u64 = store
    ///     .in_transaction(&mut tx, idem.call("audit", "event-9"))
    ///     .run(async |conn| {
    ///         sqlx::query("INSERT INTO audit (event) VALUES ('event-9')")
    ///             .execute(&mut *conn)
    ///             .await
    ///             .map(|done| done.rows_affected())
    ///             .map_err(|err| idem::Error::Store(idem::StoreError::new("audit", err)))
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<T, E, F>(self, body: F) -> Result<T, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        R: Reconcile<T, E>,
        F: AsyncFnOnce(&mut MySqlConnection) -> Result<T, E>,
    {
        self.run_reported(body).await.result
    }

    /// As [`run`](InTransaction::run), and also tells whether the result
    /// was replayed.
    ///
    /// ```no_run
    /// # async fn f(store: idem::MySqlStore, idem: idem::Idempotency, mut tx: sqlx::Transaction<'_, sqlx::MySql>) {
    /// let out = store
    ///     .in_transaction(&mut tx, idem.call("audit", "event-9"))
    ///     .run_reported(async |_conn| Ok::<_, idem::Error>(1u8))
    ///     .await;
    /// println!("replayed: {}", out.replayed);
    /// # }
    /// ```
    pub async fn run_reported<T, E, F>(self, body: F) -> Reported<Result<T, E>>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: ErrorPolicy<E>,
        R: Reconcile<T, E>,
        F: AsyncFnOnce(&mut MySqlConnection) -> Result<T, E>,
    {
        let sql = self.store.statements();
        crate::sql::tx::run_reported::<Sql, _, _, _, _, _>(sql, self.conn, self.call, body).await
    }
}
