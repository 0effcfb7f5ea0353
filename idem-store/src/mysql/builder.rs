//! The settings of a `MySqlStore` and the ways to connect it.

use idem_contract::StoreError;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};

use super::BACKEND;
use super::statements::Sql;
use super::{DEFAULT_TABLE, MySqlStore};
use crate::sql::setters::settings_setters;
use crate::sql::settings::Settings;

/// Settings of a [`MySqlStore`]: where the records live and how many
/// connections to keep. Made by [`MySqlStore::builder`].
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
/// let store = idem::MySqlStore::builder()
///     .table("payment_idempotency")
///     .max_connections(20)
///     .connect("mysql://app@db.internal/billing")
///     .await?;
/// store.migrate().await?; // creates billing.payment_idempotency
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MySqlStoreBuilder {
    database: Option<String>,
    table: String,
    settings: Settings,
}

settings_setters!(
    MySqlStoreBuilder,
    "MySqlStore",
    "mysql://app@db.internal/app",
    "binlog events"
);

impl Default for MySqlStoreBuilder {
    fn default() -> Self {
        MySqlStoreBuilder {
            database: None,
            table: DEFAULT_TABLE.to_owned(),
            settings: Settings::default(),
        }
    }
}

impl MySqlStoreBuilder {
    /// The database (MySQL's schema) of the records table; by default the
    /// connection's own, the one named in the URL. It must exist. ASCII
    /// letters, digits and `_`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::MySqlStore::builder().database("idem");
    /// # Ok(()) }
    /// ```
    pub fn database(mut self, database: impl Into<String>) -> Self {
        self.database = Some(database.into());
        self
    }

    /// The records table (default `idem_records`). `migrate` also creates
    /// `<table>_steps`, `<table>_migrations` and the procedures
    /// `<table>_claim`, `<table>_claim_v4` and `<table>_claim_v5` beside
    /// it. ASCII letters, digits and `_`, at most 53 bytes.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::MySqlStore::builder().table("checkout_idem");
    /// # Ok(()) }
    /// ```
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// Connects to `url` with connections of the store's own (see
    /// [`MySqlStore`] for why), opening one at once so that a wrong URL
    /// fails here.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let store = idem::MySqlStore::builder()
    ///     .connect("mysql://app@localhost/app")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self, url: &str) -> Result<MySqlStore, StoreError> {
        let options: MySqlConnectOptions = url
            .parse()
            .map_err(|err| StoreError::misconfigured(BACKEND, err))?;
        self.connect_with(options).await
    }

    /// As [`connect`](Self::connect), with sqlx's connect options.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let options = sqlx::mysql::MySqlConnectOptions::new()
    ///     .host("db.internal")
    ///     .username("app")
    ///     .database("app");
    /// let store = idem::MySqlStore::builder().connect_with(options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with(
        self,
        options: MySqlConnectOptions,
    ) -> Result<MySqlStore, StoreError> {
        let sql = Sql::new(self.database.as_deref(), &self.table)?;
        let limits = super::conns::limits(self.settings.response_timeout);
        let inner = self
            .settings
            .connect_with(sql, options, Some(limits))
            .await?;
        Ok(MySqlStore { inner })
    }

    /// A store on the caller's sqlx pool. Each step is still one statement,
    /// but the pool pings connections (see [`MySqlStore`]); prefer
    /// [`connect`](Self::connect) where round trips matter, or build the
    /// pool with `test_before_acquire(false)`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let pool = sqlx::MySqlPool::connect_lazy("mysql://app@localhost/app")
    ///     .map_err(|err| idem::StoreError::new("mysql", err))?;
    /// let store = idem::MySqlStore::builder().table("idem").from_pool(pool)?;
    /// # Ok(()) }
    /// ```
    pub fn from_pool(self, pool: MySqlPool) -> Result<MySqlStore, StoreError> {
        let sql = Sql::new(self.database.as_deref(), &self.table)?;
        let inner = self.settings.on_pool(sql, pool);
        Ok(MySqlStore { inner })
    }
}
