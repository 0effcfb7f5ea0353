//! The settings of a `PostgresStore` and the ways to connect it.

use idem_contract::StoreError;
use sqlx::postgres::{PgConnectOptions, PgPool};

use super::BACKEND;
use super::statements::Sql;
use super::{DEFAULT_SCHEMA, DEFAULT_TABLE, PostgresStore};
use crate::sql::setters::settings_setters;
use crate::sql::settings::Settings;

/// Settings of a [`PostgresStore`]: where the records live and how many
/// connections to keep. Made by [`PostgresStore::builder`].
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
/// let store = idem::PostgresStore::builder()
///     .schema("billing")
///     .table("payment_idempotency")
///     .max_connections(20)
///     .connect("postgres://app@db.internal/app")
///     .await?;
/// store.migrate().await?; // creates billing.payment_idempotency
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStoreBuilder {
    schema: String,
    table: String,
    settings: Settings,
}

settings_setters!(
    PostgresStoreBuilder,
    "PostgresStore",
    "postgres://app@db.internal/app",
    "WAL bursts"
);

impl Default for PostgresStoreBuilder {
    fn default() -> Self {
        PostgresStoreBuilder {
            schema: DEFAULT_SCHEMA.to_owned(),
            table: DEFAULT_TABLE.to_owned(),
            settings: Settings::default(),
        }
    }
}

impl PostgresStoreBuilder {
    /// The schema of the records table (default `public`); `migrate`
    /// creates it if missing. ASCII letters, digits and `_`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::PostgresStore::builder().schema("idem");
    /// # Ok(()) }
    /// ```
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The records table (default `idem_records`). `migrate` also creates
    /// `<table>_migrations`, the functions `<table>_claim` and
    /// `<table>_claim_v4`, and the index
    /// `<table>_expires_at` beside it. ASCII letters, digits and `_`, at
    /// most 52 bytes.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::PostgresStore::builder().table("checkout_idem");
    /// # Ok(()) }
    /// ```
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// Connects to `url` with connections of the store's own (see
    /// [`PostgresStore`] for why), opening one at once so that a wrong URL
    /// fails here.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::builder()
    ///     .connect("postgres://app@localhost/app")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self, url: &str) -> Result<PostgresStore, StoreError> {
        let options: PgConnectOptions = url
            .parse()
            .map_err(|err| StoreError::misconfigured(BACKEND, err))?;
        self.connect_with(options).await
    }

    /// As [`connect`](Self::connect), with sqlx's connect options.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let options: sqlx::postgres::PgConnectOptions = "postgres://app@localhost/app"
    ///     .parse()
    ///     .map_err(|err| idem::StoreError::new("postgres", err))?;
    /// let store = idem::PostgresStore::builder()
    ///     .connect_with(options.application_name("checkout"))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with(
        self,
        options: PgConnectOptions,
    ) -> Result<PostgresStore, StoreError> {
        let sql = Sql::new(&self.schema, &self.table)?;
        // The server gives a statement up when idem does: one the caller
        // stopped waiting for (a purge batch slowed by dead rows, a claim
        // behind a lock) must not run on and pile up beside the next.
        let limit = format!("{}ms", self.settings.response_timeout.as_millis().max(1));
        let options = options.options([("statement_timeout", limit)]);
        let inner = self.settings.connect_with(sql, options, None).await?;
        Ok(PostgresStore { inner })
    }

    /// A store on the caller's sqlx pool. Each step is still one statement,
    /// but the pool pings connections (see [`PostgresStore`]); prefer
    /// [`connect`](Self::connect) where round trips matter, or build the
    /// pool with `test_before_acquire(false)`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let pool = sqlx::PgPool::connect_lazy("postgres://app@localhost/app")
    ///     .map_err(|err| idem::StoreError::new("postgres", err))?;
    /// let store = idem::PostgresStore::builder().schema("idem").from_pool(pool)?;
    /// # Ok(()) }
    /// ```
    pub fn from_pool(self, pool: PgPool) -> Result<PostgresStore, StoreError> {
        let sql = Sql::new(&self.schema, &self.table)?;
        let inner = self.settings.on_pool(sql, pool);
        Ok(PostgresStore { inner })
    }
}
