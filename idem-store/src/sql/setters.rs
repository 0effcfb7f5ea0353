//! The public setters every SQL store's builder has for its `Settings`
//! (`settings.rs`), each with its rustdoc and example, written once for
//! `PostgresStoreBuilder` and `MySqlStoreBuilder`. The store-specific
//! setters (schema or database, table) stay in each builder.

/// `impl $builder { max_connections, acquire_timeout, response_timeout,
/// purge_batch }` on its `settings` field. `$store` names the store in the
/// examples, `$url` is an example URL, `$log` what a large purge floods
/// (e.g. `"WAL bursts"`).
macro_rules! settings_setters {
    ($builder:ident, $store:literal, $url:literal, $log:literal) => {
        impl $builder {
            /// How many connections [`connect`](Self::connect) opens at most
            /// (default 10). Ignored by [`from_pool`](Self::from_pool), whose pool
            /// has its own limit.
            ///
            /// ```no_run
            /// # async fn f() -> Result<(), idem::StoreError> {
            #[doc = concat!("let builder = idem::", $store, "::builder().max_connections(32);")]
            /// # Ok(()) }
            /// ```
            pub fn max_connections(mut self, max: u32) -> Self {
                self.settings.max_connections = max;
                self
            }

            /// How long a store operation waits for a connection before `Error::Store`
            /// (default 5 s).
            ///
            /// ```no_run
            /// # async fn f() -> Result<(), idem::StoreError> {
            #[doc = concat!("let builder = idem::", $store, "::builder()")]
            ///     .acquire_timeout(std::time::Duration::from_secs(1));
            /// # Ok(()) }
            /// ```
            pub fn acquire_timeout(mut self, timeout: std::time::Duration) -> Self {
                self.settings.acquire_timeout = timeout;
                self
            }

            /// How long a store operation (claim, complete, release, renew, save a step)
            /// waits for the server's answer before `Error::Store`. Default:
            /// [`DEFAULT_RESPONSE_TIMEOUT`](super::DEFAULT_RESPONSE_TIMEOUT) (5 s).
            /// The connection is closed after a timeout; whether the operation took
            /// effect is unknown (a claim then ends with its lease; a completion
            /// that did land is replayed). The server gives a statement up too, on
            /// the store's own connections (not a `from_pool` pool's, nor in a
            /// handler's transaction), instead of running it on beside the next:
            /// it is PostgreSQL's `statement_timeout`, MariaDB's
            /// `max_statement_time`, and (the next whole second above it) MySQL's
            /// and MariaDB's `innodb_lock_wait_timeout`.
            ///
            /// ```no_run
            /// # async fn f() -> Result<(), idem::StoreError> {
            #[doc = concat!("let store = idem::", $store, "::builder()")]
            ///     .response_timeout(std::time::Duration::from_secs(2))
            #[doc = concat!("    .connect(\"", $url, "\")")]
            ///     .await?;
            /// # Ok(()) }
            /// ```
            pub fn response_timeout(mut self, timeout: std::time::Duration) -> Self {
                self.settings.response_timeout = timeout;
                self
            }

            /// How many rows one statement of
            #[doc = concat!("[`purge_expired`](", $store, "::purge_expired) deletes (default")]
            #[doc = concat!("1,000, `idem::admin::Purge::DEFAULT_BATCH`): small batches keep locks and ", $log, " short.")]
            /// A purge paced otherwise per run is `Admin::purge_with`.
            ///
            /// ```no_run
            /// # async fn f() -> Result<(), idem::StoreError> {
            #[doc = concat!("let builder = idem::", $store, "::builder().purge_batch(500);")]
            /// # Ok(()) }
            /// ```
            pub fn purge_batch(mut self, rows: u32) -> Self {
                self.settings.purge_batch = rows.max(1);
                self
            }
        }
    };
}
pub(crate) use settings_setters;
