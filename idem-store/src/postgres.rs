//! Records in PostgreSQL ([`PostgresStore`]): one statement, one round trip per operation, expiry by
//! the server's clock, and a transactional mode.

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
use sqlx::postgres::PgPool;

use crate::sql::settings;
use statements::Sql;

/// The backend's name in a `StoreError`.
const BACKEND: &str = "postgres";

pub use builder::PostgresStoreBuilder;
pub use tx::{InTransaction, TxHandle};

/// Connections [`PostgresStore::connect`] opens at most, unless set.
pub const DEFAULT_MAX_CONNECTIONS: u32 = settings::DEFAULT_MAX_CONNECTIONS;
/// How long a store operation waits for a free connection (or for a new one to
/// open) before failing with `Error::Store`, unless set.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = settings::DEFAULT_ACQUIRE_TIMEOUT;

/// How long a store operation waits for the server's answer by default: 5 seconds.
/// A stalled server (paused, partitioned, overloaded) fails callers within
/// this bound instead of hanging them; a claim waiting on a row locked by
/// another caller's open transaction waits within it too.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = settings::DEFAULT_RESPONSE_TIMEOUT;
/// The schema of the records table, unless set.
pub const DEFAULT_SCHEMA: &str = "public";
/// The name of the records table, unless set.
pub const DEFAULT_TABLE: &str = "idem_records";
/// How many rows one statement of [`PostgresStore::purge_expired`] deletes.
pub const DEFAULT_PURGE_BATCH: u32 = settings::DEFAULT_PURGE_BATCH;

/// Records in PostgreSQL: for several replicas that share a database, with
/// records that survive restarts.
///
/// Each store operation (claim, complete, release, renew) is **one statement**, sent
/// in one round trip and atomic at READ COMMITTED; a replayed duplicate is
/// one statement: a `SELECT` of the completed row where this store saw the
/// key completed, else the claim statement. Lease and TTL expiry are judged by the
/// server's clock (`statement_timestamp()`). Keys, tokens, fingerprints and
/// records are `bytea`. Run [`migrate`](PostgresStore::migrate) once at
/// start-up (it is idempotent and versioned), and
/// [`purge_expired`](PostgresStore::purge_expired) now and then.
///
/// **Connections.** [`connect`](PostgresStore::connect) keeps its own
/// dedicated connections and reuses them *without* a health check, so every
/// operation is exactly one network turn. A sqlx `PgPool` pings each connection
/// when it returns to the pool (and, unless `test_before_acquire(false)`,
/// before handing it out): through [`from_pool`](PostgresStore::from_pool)
/// an operation costs the caller one turn of latency plus one or two pings (two
/// or three turns of server work in all). Without the ping, a connection
/// that died while idle is found out by the statement itself: the store
/// then drops every idle connection and sends the operation once more on a new
/// one (each operation is written to be safe to send twice), so a server
/// restart costs no error while the server is back; a server that is down
/// is `Error::Store`, and the body does not run.
///
/// **Transactions.** [`in_transaction`](PostgresStore::in_transaction)
/// runs a call inside the caller's `sqlx::Transaction`: the claim, the
/// body's own writes and the completed record commit or roll back
/// together.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use idem::Idempotency;
/// use idem::PostgresStore;
///
/// let store = PostgresStore::connect("postgres://app@db.internal/app").await?;
/// store.migrate().await?;
/// let idem = Idempotency::new(store.clone());
/// let receipt: Result<String, idem::Error> = idem
///     .call("payments", "order-1")
///     .run(|| async { Ok("charged".to_owned()) })
///     .await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<crate::sql::store::Core<Sql>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.debug(f, "PostgresStore", self.table())
    }
}

impl PostgresStore {
    /// Connects to `url` with default settings (table `public.idem_records`,
    /// up to 10 connections of the store's own).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::connect("postgres://app@localhost/app").await?;
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder().connect(url).await
    }

    /// A store on the caller's sqlx pool, table `public.idem_records`.
    /// Every operation pays the pool's pings (see [`PostgresStore`]).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sqlx::postgres::PgPoolOptions;
    /// let pool = PgPoolOptions::new()
    ///     // The release ping stays; this removes the one before each operation.
    ///     .test_before_acquire(false)
    ///     .connect("postgres://app@localhost/app")
    ///     .await?;
    /// let store = idem::PostgresStore::from_pool(pool);
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub fn from_pool(pool: PgPool) -> Self {
        Self::builder()
            .from_pool(pool)
            .expect("the default names are valid")
    }

    /// Settings beyond the defaults: schema, table, connections.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::builder()
    ///     .table("checkout_idempotency")
    ///     .connect("postgres://app@localhost/app")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder() -> PostgresStoreBuilder {
        PostgresStoreBuilder::default()
    }

    /// The schema-qualified, quoted records table, e.g.
    /// `"public"."idem_records"`, for your own queries and dashboards.
    ///
    /// ```no_run
    /// # async fn f(store: idem::PostgresStore) {
    /// let sql = format!("SELECT count(*) FROM {}", store.table());
    /// # }
    /// ```
    pub fn table(&self) -> &str {
        &self.inner.sql.table
    }

    /// Creates or upgrades the schema, table, index and claim function.
    /// Versioned (in `<table>_migrations`), so running it again, or from
    /// several replicas at once, is harmless: a transaction-scoped advisory
    /// lock makes concurrent runs take turns.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::connect("postgres://app@localhost/app").await?;
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
    /// lapsed claim is the evidence a takeover and its reconcile need), in statements of at most
    /// [`purge_batch`](PostgresStoreBuilder::purge_batch) rows (rows locked
    /// by a running claim are skipped) with 20 ms between statements
    /// (`Admin::purge_with` paces otherwise), and returns how many it deleted; a
    /// record past its TTL whose tombstone stands loses its value instead
    /// (counted too) and is deleted once the tombstone has passed.
    /// Expired records are already ignored by every operation; purging them
    /// only reclaims space. Run it every few minutes from one place, e.g. with `spawn_purge`:
    ///
    /// ```no_run
    /// # async fn f(store: idem::PostgresStore) -> Result<(), idem::Error> {
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
    /// # async fn f(store: idem::PostgresStore) {
    /// store.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.inner.conns.close().await;
    }
}

crate::sql::store::store_on_core!(PostgresStore);
