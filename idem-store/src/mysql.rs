//! Records in MySQL or MariaDB ([`MySqlStore`]): one statement, one round
//! trip per store operation, expiry by the server's clock.

mod admin;
mod builder;
mod conns;
mod dialect;
mod exec;
mod migrate;
mod rows;
mod statements;
mod steps;
mod tx;

use std::sync::Arc;
use std::time::Duration;

use idem_contract::StoreError;
use sqlx::mysql::MySqlPool;

use crate::sql::settings;
use statements::Sql;

/// The backend's name in a `StoreError`.
const BACKEND: &str = "mysql";

/// The server's clock, in UTC.
const NOW: &str = "UTC_TIMESTAMP(6)";

/// A statement with its parameters bound (`Query<'q, Sql>`, spelled out).
type MyQuery<'q> = sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>;

use crate::sql::dialect::micros;

pub use builder::MySqlStoreBuilder;
pub use tx::{InTransaction, TxHandle};

/// Connections [`MySqlStore::connect`] opens at most, unless set.
pub const DEFAULT_MAX_CONNECTIONS: u32 = settings::DEFAULT_MAX_CONNECTIONS;
/// How long a store operation waits for a free connection (or for a new one to
/// open) before failing with `Error::Store`, unless set.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = settings::DEFAULT_ACQUIRE_TIMEOUT;
/// How long a store operation waits for the server's answer by default: 5 seconds.
/// A stalled server (paused, partitioned, overloaded) fails callers within
/// this bound instead of hanging them; a claim waiting on a row locked by
/// another caller's open transaction waits within it too.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = settings::DEFAULT_RESPONSE_TIMEOUT;
/// The name of the records table, unless set.
pub const DEFAULT_TABLE: &str = "idem_records";
/// How many rows one statement of [`MySqlStore::purge_expired`] deletes.
pub const DEFAULT_PURGE_BATCH: u32 = settings::DEFAULT_PURGE_BATCH;

/// Records in MySQL (8.0 and later) or MariaDB (10.6 and later): for
/// several replicas that share a database, with records that survive
/// restarts.
///
/// Each store operation (claim, complete, release, renew, save a step) is **one
/// statement**, sent in one round trip; a replayed duplicate is one
/// statement (a `SELECT` of the completed row where this store saw the key
/// completed, else the claim). The claim is a stored procedure (`<table>_claim_v5`, made by
/// [`migrate`](MySqlStore::migrate)) answering one result set: a plain
/// read first, so a replay costs an index lookup; where it finds no row,
/// one plain `INSERT` (a transaction of its own) claims the key;
/// otherwise, in a transaction of its own, `INSERT … ON DUPLICATE KEY UPDATE` that inserts
/// the claim or locks the one row holding the key (no gap lock, so two
/// claimers of a new key do not deadlock on a gap as `SELECT … FOR UPDATE`
/// first would under REPEATABLE READ), then the row read under that lock
/// and taken over only if expired. InnoDB can still pick one of several
/// claimers of a new key as a deadlock victim; the procedure claims again
/// in the same call. Completion, release and renewal are single
/// `UPDATE`/`DELETE` statements fenced by the claim's token.
///
/// Lease and TTL expiry are judged by the server's clock,
/// `UTC_TIMESTAMP(6)`, in `DATETIME(6)` columns: the session's
/// `time_zone` plays no part. Keys, tokens and fingerprints are
/// `BINARY`, records `LONGBLOB`. Run [`migrate`](MySqlStore::migrate) once
/// at start-up (it is idempotent and versioned), and
/// [`purge_expired`](MySqlStore::purge_expired) now and then.
///
/// **Connections.** [`connect`](MySqlStore::connect) keeps its own
/// dedicated connections and reuses them *without* a health check, so every
/// operation is exactly one network turn. A sqlx `MySqlPool` pings each
/// connection when it returns to the pool (and, unless
/// `test_before_acquire(false)`, before handing it out): through
/// [`from_pool`](MySqlStore::from_pool) an operation costs the caller one turn
/// of latency plus one or two pings. Without the ping, a connection that
/// died while idle is found out by the statement itself: the store then
/// drops every idle connection and sends the operation once more on a new one
/// (each operation is written to be safe to send twice); a server that is down
/// is `Error::Store`, and the body does not run.
///
/// **Transactions.** [`in_transaction`](MySqlStore::in_transaction) runs
/// a call inside the caller's `sqlx::Transaction<MySql>`: the claim, the
/// body's own writes and the completed record commit or roll back
/// together. [`tx_handle`](MySqlStore::tx_handle) makes an `Idempotency`
/// handle on such a transaction, for `#[idempotent(store = tx)]`.
///
/// **MySQL and MariaDB.** The statements keep to what both servers
/// accept, so one migration serves both: no `RETURNING` (MariaDB only;
/// the claim's answer comes from the procedure's `SELECT`), no
/// `INSERT … AS new` row alias (MySQL 8.0.19+ only) and no `VALUES()` in
/// `ON DUPLICATE KEY UPDATE` (deprecated in MySQL 8.0.20; values are bound
/// twice instead), no `CREATE OR REPLACE PROCEDURE` (MariaDB only; `DROP
/// PROCEDURE IF EXISTS` first), `LOCK IN SHARE MODE` rather than MySQL 8's
/// `FOR SHARE`, `DELETE … ORDER BY … LIMIT` rather than `SKIP LOCKED`
/// (MySQL 8.0.1+, MariaDB 10.6+). Tested on MariaDB 10.11. On MySQL with
/// binary logging on, creating the procedure needs the `CREATE ROUTINE`
/// privilege and, unless the user has `SUPER` (or
/// `SET_USER_ID`/`SYSTEM_USER`), `log_bin_trust_function_creators = 1`;
/// `migrate` reports the server's error as `Error::Store` otherwise. On
/// Vitess/PlanetScale stored procedures are not available: this store
/// does not run there.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use idem::Idempotency;
/// use idem::MySqlStore;
///
/// let store = MySqlStore::connect("mysql://app@db.internal/app").await?;
/// store.migrate().await?;
/// let idem = Idempotency::new(store.clone());
/// let receipt: Result<String, idem::Error> = idem
///     .call("payments", "order-1")
///     .run(|| async { Ok("charged".to_owned()) })
///     .await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MySqlStore {
    inner: Arc<crate::sql::store::Core<Sql>>,
}

impl std::fmt::Debug for MySqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.debug(f, "MySqlStore", self.table())
    }
}

impl MySqlStore {
    /// Connects to `url` with default settings (table `idem_records` in the
    /// URL's database, up to 10 connections of the store's own).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::MySqlStore::connect("mysql://app@localhost/app").await?;
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder().connect(url).await
    }

    /// A store on the caller's sqlx pool, table `idem_records`. Every operation
    /// pays the pool's pings (see [`MySqlStore`]).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sqlx::mysql::MySqlPoolOptions;
    /// let pool = MySqlPoolOptions::new()
    ///     // The release ping stays; this removes the one before each operation.
    ///     .test_before_acquire(false)
    ///     .connect("mysql://app@localhost/app")
    ///     .await?;
    /// let store = idem::MySqlStore::from_pool(pool);
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub fn from_pool(pool: MySqlPool) -> Self {
        Self::builder()
            .from_pool(pool)
            .expect("the default names are valid")
    }

    /// Settings beyond the defaults: database, table, connections.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::MySqlStore::builder()
    ///     .table("checkout_idempotency")
    ///     .connect("mysql://app@localhost/app")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder() -> MySqlStoreBuilder {
        MySqlStoreBuilder::default()
    }

    /// The quoted records table, e.g. `` `idem_records` `` (or
    /// `` `db`.`idem_records` `` with a [database](MySqlStoreBuilder::database)),
    /// for your own queries and dashboards.
    ///
    /// ```no_run
    /// # async fn f(store: idem::MySqlStore) {
    /// let sql = format!("SELECT COUNT(*) FROM {}", store.table());
    /// # }
    /// ```
    pub fn table(&self) -> &str {
        &self.inner.sql.table
    }

    /// Creates or upgrades the tables, indexes and claim procedure.
    /// Versioned (in `<table>_migrations`), so running it again, or from
    /// several replicas at once, is harmless: a named lock (`GET_LOCK`)
    /// makes concurrent runs take turns.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::MySqlStore::connect("mysql://app@localhost/app").await?;
    /// store.migrate().await?;
    /// store.migrate().await?; // nothing left to do
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let sql = &self.inner.sql;
        self.inner
            .conns
            .on_one(BACKEND, async |conn| migrate::run(sql, conn).await)
            .await
    }

    /// Deletes expired records and steps, and claims that lapsed more than
    /// [`LAPSED_CLAIM_KEPT`](idem_core::store::LAPSED_CLAIM_KEPT) ago (a
    /// lapsed claim is the evidence a takeover and its reconcile need), oldest first, in
    /// statements of at most [`purge_batch`](MySqlStoreBuilder::purge_batch)
    /// rows with 20 ms between statements (`idem::admin::Purge::default()`;
    /// `Admin::purge_with` paces otherwise), and returns how many it deleted; a record past its TTL whose
    /// tombstone stands loses its value instead (counted too) and is
    /// deleted once the tombstone has passed. Expired rows are already
    /// ignored by every operation; purging them only reclaims space. Run it every few
    /// minutes from one place, e.g. with `spawn_purge`:
    ///
    /// ```no_run
    /// # async fn f(store: idem::MySqlStore) -> Result<(), idem::Error> {
    /// use std::{sync::Arc, time::Duration};
    /// let purger = idem::admin::spawn_purge(
    ///     Arc::new(store),
    ///     Duration::from_secs(300),
    ///     idem::admin::Purge::default(),
    /// )?;
    /// // … serve; dropping `purger` stops it.
    /// # drop(purger); Ok(())
    /// # }
    /// ```
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        let purged = self.inner.purge(&self.inner.default_purge()).await?;
        Ok(purged.records + purged.steps + purged.tombstones)
    }

    /// Closes the store's idle connections (or the caller's pool, for a
    /// store made with `from_pool`). Steps after this open new ones.
    ///
    /// ```no_run
    /// # async fn f(store: idem::MySqlStore) {
    /// store.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.inner.conns.close().await;
    }
}

crate::sql::store::store_on_core!(MySqlStore);
